package ynotebook

import (
	"reflect"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

func TestStandInID(t *testing.T) {
	a, b := standInID("c-raw", 1), standInID("c-raw", 2)
	if a == b || a != standInID("c-raw", 1) || a == standInID("c-raw2", 1) {
		t.Fatalf("stand-ins not distinct and deterministic: %s %s", a, b)
	}
	if !nbformatID.MatchString(a) || len(a) != 36 || a[14] != '8' {
		t.Fatalf("stand-in %q is not a version 8 UUID", a)
	}
}

func TestPyEqual(t *testing.T) {
	tests := []struct {
		name string
		a, b any
		want bool
	}{
		{"int and float", int64(3), 3.0, true},
		{"bool is an int", true, 1.0, true},
		{"big ints exactly", int64(1<<60 + 1), int64(1 << 60), false},
		{"undefined is None", yjs.Undefined, nil, true},
		{"None is not 0", nil, 0.0, false},
		{"strings", "a", "a", true},
		{"string and bytes", "a", []byte("a"), false},
		{"bytes", []byte{1}, []byte{1}, true},
		{"lists", []any{1.0, "x"}, []any{int64(1), "x"}, true},
		{"list lengths", []any{1.0}, []any{1.0, 1.0}, false},
		{"dicts", map[string]any{"a": 1.0}, map[string]any{"a": int64(1)}, true},
		{"dict keys", map[string]any{"a": 1.0}, map[string]any{"b": 1.0}, false},
		{"list and dict", []any{}, map[string]any{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pyEqual(tt.a, tt.b); got != tt.want {
				t.Fatalf("pyEqual(%v, %v) = %v", tt.a, tt.b, got)
			}
			if got := pyEqual(tt.b, tt.a); got != tt.want {
				t.Fatalf("pyEqual(%v, %v) = %v (reversed)", tt.b, tt.a, got)
			}
		})
	}
}

// TestDuplicateChanges replays the real writer's duplicates and checks the change sets
// that drive notifications: an edit of a hidden exact duplicate adds its stand-in and
// does not touch the kept cell, the server's re-id replaces the stand-in with the real id.
func TestDuplicateChanges(t *testing.T) {
	var c pycrdtCase
	for _, x := range loadPycrdt(t, pycrdtDir) {
		if x.Name == "duplicates" {
			c = x
		}
	}
	want := map[string]Changes{
		"the stale client syncs: every cell twice":           {Added: []string{standInID("c-code", 1)}},
		"the server saves: the re-id written back":           {Added: []string{"00000000-0000-4004-8000-000000000001"}, Removed: []string{standInID("c-code", 1)}},
		"a hidden exact duplicate is edited: it differs now": {Added: []string{standInID("c-raw", 1)}},
	}
	nb := New()
	seen := 0
	for i, st := range c.Steps {
		ch, err := nb.Apply(st.Update)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[st.What]
		if !ok {
			continue
		}
		seen++
		if !reflect.DeepEqual(ch, w) {
			t.Errorf("step %d (%s): %+v, want %+v", i, st.What, ch, w)
		}
	}
	if seen != len(want) {
		t.Fatalf("checked %d of %d steps", seen, len(want))
	}
	if _, i, ok := nb.Snapshot().Cell("c-raw"); !ok || i != 1 {
		t.Fatalf("cells/c-raw: index %d, %v; want the first copy, 1", i, ok)
	}
}
