package ynotebook

import "testing"

func TestFirstDifference(t *testing.T) {
	code := func(id, src string, meta map[string]any) Cell {
		if meta == nil {
			meta = map[string]any{}
		}
		return Cell{ID: id, CellType: CellCode, Source: src, Metadata: meta}
	}
	base := NewSnapshot(code("x", "a", nil), code("y", "note🎉s日本a", nil))
	withMeta := NewSnapshot(code("x", "a", nil), code("y", "note🎉s日本a", nil))
	withMeta.Metadata = map[string]any{"a/b~": map[string]any{"k": 1.0}}
	for _, tc := range []struct {
		name   string
		a, b   *Snapshot
		path   string
		va, vb string
		differ bool
	}{
		{name: "equivalent, the trust mark left out", a: base,
			b: NewSnapshot(code("x", "a", map[string]any{"trusted": true}), code("y", "note🎉s日本a", nil))},
		{name: "source", a: base, b: NewSnapshot(code("x", "a", nil), code("y", "note🎉s日本a 日本", nil)),
			path: "/cells/1/source", va: `"note🎉s日本a"`, vb: `"note🎉s日本a 日本"`, differ: true},
		{name: "a cell more", a: base, b: NewSnapshot(code("x", "a", nil), code("y", "note🎉s日本a", nil), code("z", "", nil)),
			path: "/cells/2", vb: `{"cell_type":"code","execution_count":null,"id":"z","metadata":{},"outputs":[],"source":""}`, differ: true},
		{name: "metadata, escaped", a: base, b: withMeta, path: "/metadata/a~1b~0", va: ``, vb: `{"k":1}`, differ: true},
		{name: "a value of another type", a: withMeta, b: func() *Snapshot {
			s := NewSnapshot(code("x", "a", nil), code("y", "note🎉s日本a", nil))
			s.Metadata = map[string]any{"a/b~": map[string]any{"k": []any{1.0}}}
			return s
		}(), path: "/metadata/a~1b~0/k", va: `1`, vb: `[1]`, differ: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, va, vb, differ := FirstDifference(tc.a, tc.b)
			if differ != tc.differ || differ == Equivalent(tc.a, tc.b) || path != tc.path || string(va) != tc.va || string(vb) != tc.vb {
				t.Fatalf("FirstDifference = %q, %s, %s, %v; want %q, %s, %s, %v", path, va, vb, differ, tc.path, tc.va, tc.vb, tc.differ)
			}
		})
	}
}
