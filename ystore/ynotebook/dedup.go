package ynotebook

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// Duplicate cell ids. A room can hold two cells with one id (a stale client that
// reconnects re-inserts its cells). jupyter_ydoc's YNotebook.get(), which the Jupyter
// server saves and jupyter-mcp-server reads, then serves each id once:
//
//   - a later cell equal to the first cell with its id (compared as get() compares them:
//     the whole cell map, execution_state left out, numbers by value) is dropped;
//   - a later cell that differs is given a new uuid4, which get() writes back into the
//     document, so that the store carries it after the server's next save.
//
// A snapshot serves the same cells. Until the new id reaches the store, a differing
// duplicate is served under a stand-in id (standInID): deterministic, so that every
// snapshot and every sidecar names it alike, and a valid nbformat id. When the server's
// re-id arrives, the stand-in disappears (removed) and the new id appears (added).
// Like get(), nothing is deduplicated for nbformat 4.0–4.4, whose cells have no ids,
// nor among cells whose id Python takes for false (absent, empty, 0, null); a numeric id
// is deduplicated as get() does (5 and 5.0 and true and 1 are one id there).

// dedupOn reports whether get() deduplicates the cells of a notebook with the
// notebook-level fields of s: not for nbformat 4.0–4.4, where it drops the ids first.
func dedupOn(s *Snapshot) bool {
	return !(s.NBFormat == 4 && s.NBFormatMinor <= 4)
}

// dupKey reports whether cells with key k are deduplicated.
func dupKey(k cellKey) bool { return k.hasID && k.id != "" }

// dedup returns the cells of all that get() serves, in order: exact duplicates dropped
// (hidden), differing ones under a stand-in id. Every cell's served ID is set anew (a
// cell is copied when it changes), so a cell no longer a duplicate gets its own id back.
func dedup(all []readCell, on bool) (visible []readCell, hidden map[*yjs.Type]bool) {
	type group struct {
		first int // index in all of the first cell with the id
		n     int // cells with the id so far
	}
	groups := map[string]*group{}
	visible = make([]readCell, 0, len(all))
	for i, r := range all {
		want, renamed := r.cell.storedID, false
		if k := keyOf(r.cell); on && dupKey(k) {
			g := groups[k.id]
			switch {
			case g == nil:
				groups[k.id] = &group{first: i, n: 1}
			case samePyCell(all[g.first], r):
				g.n++
				if hidden == nil {
					hidden = map[*yjs.Type]bool{}
				}
				hidden[r.typ] = true
				continue
			default:
				want, renamed = standInID(k.id, g.n), true
				g.n++
			}
		}
		if served := renamed || r.cell.strID; r.cell.ID != want || r.cell.hasID != served {
			c := *r.cell
			c.ID, c.hasID = want, served
			r.cell = &c
		}
		visible = append(visible, r)
	}
	return visible, hidden
}

// standInNamespace prefixes what standInID hashes.
const standInNamespace = "jupyter-mcp-sidecar duplicate cell id\x00"

// standInID is the id served for the cell that is the n-th (n >= 1) after the first to
// hold id and differs from the first: an RFC 9562 version 8 UUID made of the SHA-256 of
// the id and n. It depends only on the id and on how many cells before it hold that id,
// not on other cells' places.
func standInID(id string, n int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s%s\x00%d", standInNamespace, id, n))
	h[6] = h[6]&0x0f | 0x80 // version 8
	h[8] = h[8]&0x3f | 0x80 // variant 10
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// samePyCell reports whether get() takes the cells a and b for one cell: their to_py()
// dicts without execution_state (and without falsy attachments of raw and markdown
// cells) are equal in Python. Cells of a file (Parse: no cell map) are compared by what
// get() yields of them, numbers already cast.
func samePyCell(a, b readCell) bool {
	if a.typ == nil || b.typ == nil {
		return a.typ == nil && b.typ == nil && pyEqualJSON(a.cell.obj, b.cell.obj)
	}
	return pyEqual(pyCell(a.typ), pyCell(b.typ))
}

// pyEqualJSON is Python's == between two values get() yields (numbers as json.Number,
// each written one way: a whole number as an int).
func pyEqualJSON(a, b any) bool {
	num := func(v any) (json.Number, bool) {
		switch x := v.(type) {
		case json.Number:
			return x, true
		case bool: // an int in Python
			if x {
				return "1", true
			}
			return "0", true
		}
		return "", false
	}
	if x, ok := num(a); ok {
		y, ok := num(b)
		return ok && x == y
	}
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, pyEqualJSON)
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && maps.EqualFunc(x, y, pyEqualJSON)
	}
	return a == b
}

// pyCell is jupyter_ydoc's _cell_to_py of cell map t, before the id is pruned.
func pyCell(t *yjs.Type) map[string]any {
	m, _ := yjs.ToJSON((*yjs.Map)(t)).(map[string]any)
	delete(m, "execution_state")
	if ct := m["cell_type"]; ct == CellRaw || ct == CellMarkdown {
		if att, ok := m["attachments"]; ok && !pyTruthy(att) {
			delete(m, "attachments")
		}
	}
	return m
}

// pyTruthy is Python's bool() of a value as pycrdt's to_py yields it: JavaScript's
// truthiness but for NaN (true) and empty bytes, lists and dicts (false).
func pyTruthy(v any) bool {
	switch x := v.(type) {
	case float64:
		return x != 0
	case []byte:
		return len(x) > 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return truthy(v)
}

// pyNumber is the number Python compares v as (bool is an int there).
func pyNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case float64:
		return x, true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// pyEqual is Python's == between two values as pycrdt's to_py yields them (undefined is
// None there). Integers beyond 2^53 are compared exactly with each other.
func pyEqual(a, b any) bool {
	if x, ok := a.(int64); ok {
		if y, ok := b.(int64); ok {
			return x == y
		}
	}
	if x, ok := pyNumber(a); ok {
		y, ok := pyNumber(b)
		return ok && x == y && !math.IsNaN(x)
	}
	switch x := a.(type) {
	case nil, yjs.UndefinedType:
		switch b.(type) {
		case nil, yjs.UndefinedType:
			return true
		}
		return false
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !pyEqual(v, w) {
				return false
			}
		}
		return true
	}
	return false
}
