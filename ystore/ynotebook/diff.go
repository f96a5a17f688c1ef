package ynotebook

import (
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/jsonenc"
	"maps"
	"reflect"
)

// Diff is what changed from snapshot a to snapshot b, at the granularity of the change
// sets Apply reports: notebook-level fields, cells added, removed and moved (paired by
// id as in Changes), and per cell present on both sides the parts and output indexes
// that differ. A nil snapshot has no cells.
func Diff(a, b *Snapshot) Changes {
	a, b = orEmpty(a), orEmpty(b)
	ch := reorder(readCells(a), readCells(b))
	ch.Metadata = levelChanged(a, b)
	return ch
}

// readCells lists the cells of s, each to be compared (fresh).
func readCells(s *Snapshot) []readCell {
	out := make([]readCell, 0, s.Len())
	for _, c := range s.All() {
		out = append(out, readCell{cell: c, fresh: true})
	}
	return out
}

func orEmpty(s *Snapshot) *Snapshot {
	if s == nil {
		return &Snapshot{}
	}
	return s
}

// DiffContent is Diff of a and b leaving out the fields Equivalent does: what changed
// for a reader when the same notebook is served from a source that lacks them (its
// file) instead of one that holds them (its room), or back.
func DiffContent(a, b *Snapshot) Changes {
	return Diff(withoutTransient(orEmpty(a)), withoutTransient(orEmpty(b)))
}

// Equivalent reports whether a and b serve the same notebook once the fields a room
// holds and a file need not are left out: the trust mark jupyter_server puts into a
// loaded code cell's metadata (cell.metadata.trusted), which a saved file never holds,
// and the placeholders jupyter_ydoc gives notebook metadata lacking them
// (language_info {"name": ""}, kernelspec {"name": "", "display_name": ""}).
func Equivalent(a, b *Snapshot) bool {
	va, vb := withoutTransient(orEmpty(a)).Get(), withoutTransient(orEmpty(b)).Get()
	na, errA := jsonenc.Measure(va)
	nb, errB := jsonenc.Measure(vb)
	if errA != nil || errB != nil || na != nb {
		return false
	}
	da, errA := jsonenc.Digest(va)
	db, errB := jsonenc.Digest(vb)
	return errA == nil && errB == nil && da == db
}

// placeholders are the notebook metadata entries jupyter_ydoc sets where a loaded file
// has none (YNotebook._set).
var placeholders = map[string]map[string]any{
	"language_info": {"name": ""},
	"kernelspec":    {"name": "", "display_name": ""},
}

// withoutTransient is s, or a copy of it whose cells' metadata lack "trusted" and whose
// notebook metadata lacks jupyter_ydoc's placeholders.
func withoutTransient(s *Snapshot) *Snapshot {
	changed := false
	meta := s.Metadata
	for k, v := range placeholders {
		if m, ok := meta[k].(map[string]any); ok && reflect.DeepEqual(m, v) {
			if !changed {
				meta, changed = maps.Clone(meta), true
			}
			delete(meta, k)
		}
	}
	if meta != nil && len(meta) == 0 {
		meta, changed = nil, true // no metadata, as a file without the placeholders has
	}
	read := make([]readCell, 0, s.Len())
	for _, c := range s.All() {
		if _, ok := c.Metadata["trusted"]; ok {
			md := maps.Clone(c.Metadata)
			delete(md, "trusted")
			obj := maps.Clone(c.obj)
			obj["metadata"] = md
			cc := *c
			cc.withObject(obj)
			c, changed = &cc, true
		}
		read = append(read, readCell{cell: c})
	}
	if !changed {
		return s
	}
	out := *s
	out.Metadata = meta
	if _, isMap := s.metadata.(map[string]any); isMap || s.metadata == nil {
		out.metadata = nil
		if meta != nil {
			out.metadata = meta
		}
	}
	out.cells = buildTree(read, 0)
	return &out
}
