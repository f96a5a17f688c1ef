package ynotebook

import (
	"encoding/json"
	"fmt"
	"maps"
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

// requireJSON fails unless the snapshot equals want (nbformat JSON from YNotebook.toJSON),
// its duplicate cell ids settled as YNotebook.get() does (asGet).
func requireJSON(t testing.TB, what string, s *Snapshot, want []byte) {
	t.Helper()
	got, err := s.JSON()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	g, w := withJSExecutionCounts(parsed(t, got)), asGet(parsed(t, want))
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

// withJSExecutionCounts writes the parsed JSON of a snapshot the way @jupyter/ydoc
// reads execution counts (`execution_count || null`): the snapshot follows jupyter_ydoc,
// the server's reading, where 0 is a count (docs/COMPATIBILITY.md).
func withJSExecutionCounts(nb any) any {
	m, _ := nb.(map[string]any)
	cells, _ := m["cells"].([]any)
	for _, c := range cells {
		if cell, ok := c.(map[string]any); ok {
			if n, ok := cell["execution_count"]; ok && n != nil && !truthy(n) {
				cell["execution_count"] = nil
			}
		}
	}
	return nb
}

// asGet settles the duplicate cell ids of nb, the parsed JSON of YNotebook.toJSON(), the
// way jupyter_ydoc's YNotebook.get() does, with the sidecar's stand-in ids for the new
// uuid4s: a later cell equal to the first with its id is dropped, a differing one renamed.
// It compares cells by their JSON, which for the fixtures' cells is their whole map.
func asGet(nb any) any {
	m, ok := nb.(map[string]any)
	if !ok {
		return nb
	}
	major, _ := m["nbformat"].(float64)
	minor, _ := m["nbformat_minor"].(float64)
	cells, _ := m["cells"].([]any)
	if major == 4 && minor <= 4 || cells == nil {
		return nb
	}
	type group struct {
		first map[string]any
		n     int
	}
	groups := map[string]*group{}
	out := make([]any, 0, len(cells))
	for _, c := range cells {
		cell, _ := c.(map[string]any)
		id, _ := cell["id"].(string)
		if id == "" {
			out = append(out, c)
			continue
		}
		g := groups[id]
		switch {
		case g == nil:
			groups[id] = &group{first: cell, n: 1}
		case reflect.DeepEqual(g.first, cell):
			g.n++
			continue
		default:
			renamed := maps.Clone(cell)
			renamed["id"] = standInID(id, g.n)
			g.n++
			cell = renamed
		}
		out = append(out, cell)
	}
	res := maps.Clone(m)
	res["cells"] = out
	return res
}
