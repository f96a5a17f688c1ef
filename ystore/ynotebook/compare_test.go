package ynotebook

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"
)

// parsed decodes JSON into plain values for comparison.
func parsed(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("parse %s: %v", b, err)
	}
	return v
}

// requireJSON fails unless the snapshot equals want (nbformat JSON from YNotebook.toJSON).
func requireJSON(t testing.TB, what string, s *Snapshot, want []byte) {
	t.Helper()
	got, err := s.JSON()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	g, w := parsed(t, got), parsed(t, want)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: snapshot differs from Yjs at %s\n got: %s\nwant: %s", what, firstDiff("$", g, w), got, want)
	}
}

// firstDiff names the first path at which a and b differ.
func firstDiff(path string, a, b any) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return path
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if !reflect.DeepEqual(x[k], y[k]) {
				return firstDiff(path+"."+k, x[k], y[k])
			}
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return fmt.Sprintf("%s (len %d vs %v)", path, len(x), b)
		}
		for i := range x {
			if !reflect.DeepEqual(x[i], y[i]) {
				return firstDiff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i])
			}
		}
	}
	return fmt.Sprintf("%s: %#v vs %#v", path, a, b)
}

func requireState(t testing.TB, what string, got State, want map[string]any) {
	t.Helper()
	w := State{}
	w.Path, _ = want["path"].(string)
	w.Dirty = want["dirty"] == true
	if got != w {
		t.Fatalf("%s: state %+v, want %+v", what, got, w)
	}
}
