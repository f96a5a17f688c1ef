package ynotebook

import (
	"fmt"
	"slices"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// Root names of the jupyter_ydoc layout.
const (
	rootCells = "cells"
	rootMeta  = "meta"
	rootState = "state"
)

// Notebook is a live Yjs document read as a jupyter_ydoc notebook. It is not safe for
// concurrent use.
type Notebook struct {
	doc   *yjs.Doc
	cells *yjs.Array
	meta  *yjs.Map
	state *yjs.Map
	snap  *Snapshot
	// shared is set once snap has been handed out: it must be copied before an edit.
	shared bool
}

// State is the document's "state" map: the path fallback and the dirty flag.
type State struct {
	Path  string // state.path, "" when absent
	Dirty bool   // state.dirty is true
}

// New returns an empty notebook document.
func New() *Notebook {
	doc := yjs.NewDoc()
	n := &Notebook{
		doc:   doc,
		cells: doc.Array(rootCells),
		meta:  doc.Map(rootMeta),
		state: doc.Map(rootState),
	}
	n.snap, _ = n.rebuild(&Snapshot{}, scope{meta: true, cells: true})
	return n
}

// part is a set of cell keys an update touched.
type part uint8

const (
	partSource part = 1 << iota
	partMetadata
	partOutputs
	partExecutionCount
	partAttachments
	partOther // id or cell_type: the cell is read again as a whole

	partAll = partSource | partMetadata | partOutputs | partExecutionCount | partAttachments
)

// partOf names the part of a cell its key belongs to; keys YNotebook.toJSON() does not
// show (execution_state, anything unknown) belong to none.
func partOf(key string) part {
	switch key {
	case "source":
		return partSource
	case "metadata":
		return partMetadata
	case "outputs":
		return partOutputs
	case "execution_count":
		return partExecutionCount
	case "attachments":
		return partAttachments
	case "id", "cell_type":
		return partOther
	}
	return 0
}

// scope is the part of the notebook an update touched.
type scope struct {
	meta  bool               // the meta map or anything in it
	cells bool               // the cells array itself: cells inserted or deleted
	parts map[*yjs.Type]part // cell maps with changes inside, and where
}

// scopeOf attributes every changed type of txn to the notebook part holding it.
func scopeOf(txn *yjs.Txn) scope {
	var sc scope
	for _, c := range txn.Changes() {
		// walk up to the root, remembering the cell map and the key below it
		var cell, below *yjs.Type
		t := c.Type
		for !t.Root() {
			below, cell = cell, t
			t, _, _ = t.Parent()
		}
		switch t.Name() {
		case rootMeta:
			sc.meta = true
		case rootCells:
			if cell == nil {
				sc.cells = true
				continue
			}
			if sc.parts == nil {
				sc.parts = map[*yjs.Type]part{}
			}
			sc.parts[cell] |= touched(c, below)
		}
	}
	return sc
}

// touched returns the part of a cell that change c touched; below is the type held by
// the cell on the way to c.Type, nil when c.Type is the cell map itself.
func touched(c yjs.Change, below *yjs.Type) part {
	if below != nil {
		_, key, hasKey := below.Parent()
		if !hasKey {
			return partOther
		}
		return partOf(key)
	}
	var p part
	if c.Seq {
		p |= partOther
	}
	for _, k := range c.Keys {
		p |= partOf(k)
	}
	return p
}

// Apply applies one Yjs v1 update and reports what changed in the notebook view. On error
// the notebook is unchanged.
func (n *Notebook) Apply(update []byte) (Changes, error) {
	txn, err := n.doc.ApplyUpdate(update)
	if err != nil {
		return Changes{}, fmt.Errorf("apply notebook update: %w", err)
	}
	sc := scopeOf(txn)
	if !sc.meta && !sc.cells && len(sc.parts) == 0 {
		return Changes{}, nil
	}
	if n.inPlace(sc) {
		return n.edit(sc), nil
	}
	prev := n.snap
	next, fresh := n.rebuild(prev, sc)
	n.snap, n.shared = next, false
	ch := reorder(prev, next, fresh)
	ch.Metadata = sc.meta && levelChanged(prev, next)
	return ch, nil
}

// Snapshot returns the current notebook; the result is never modified afterwards.
func (n *Notebook) Snapshot() *Snapshot {
	n.shared = true
	return n.snap
}

// State returns the document's state map.
func (n *Notebook) State() State {
	var s State
	if p, ok := get(n.state, "path"); ok {
		s.Path, _ = p.(string)
	}
	if d, ok := get(n.state, "dirty"); ok {
		s.Dirty = d == true
	}
	return s
}

// Doc returns the underlying Yjs document.
func (n *Notebook) Doc() *yjs.Doc { return n.doc }

// inPlace reports whether the update only touched cells already in the snapshot and none
// of their ids or types, so that the cell list stays as it is.
func (n *Notebook) inPlace(sc scope) bool {
	if sc.cells {
		return false
	}
	for t, p := range sc.parts {
		if _, ok := n.snap.index[t]; !ok || p&partOther != 0 {
			return false
		}
	}
	return true
}

// edit reads the touched parts again into the current snapshot, copying it first if it
// has been handed out, and reports the differences.
func (n *Notebook) edit(sc scope) Changes {
	s := n.snap
	if n.shared {
		c := *s
		c.Cells = slices.Clone(s.Cells)
		s, n.snap, n.shared = &c, &c, false
	}
	var ch Changes
	if sc.meta {
		old := *s
		readSnapshotMeta(s, n.meta)
		ch.Metadata = levelChanged(&old, s)
	}
	for t, p := range sc.parts {
		i := s.index[t]
		old := s.Cells[i]
		s.Cells[i], _ = reread(old, (*yjs.Map)(t), p)
		ch.addCell(&old, &s.Cells[i])
	}
	return ch
}

// rebuild returns a new snapshot of the whole cells array, taking from prev every cell
// the update did not touch; fresh marks the cells read anew.
func (n *Notebook) rebuild(prev *Snapshot, sc scope) (s *Snapshot, fresh []bool) {
	s = &Snapshot{}
	if sc.meta {
		readSnapshotMeta(s, n.meta)
	} else {
		*s = *prev
	}
	values := n.cells.Values()
	s.Cells = make([]Cell, 0, len(values))
	s.types = make([]*yjs.Type, 0, len(values))
	s.index = make(map[*yjs.Type]int, len(values))
	fresh = make([]bool, 0, len(values))
	for _, v := range values {
		m, isMap := v.(*yjs.Map)
		if !isMap {
			continue
		}
		t := m.Type()
		p, touched := sc.parts[t]
		i, known := prev.index[t]
		var c Cell
		switch {
		case known && !touched:
			c = prev.Cells[i]
		case known:
			var ok bool
			if c, ok = reread(prev.Cells[i], m, p); !ok {
				continue
			}
		default:
			var ok bool
			if c, ok = readCell(m); !ok {
				continue
			}
		}
		s.index[t] = len(s.Cells)
		s.Cells = append(s.Cells, c)
		s.types = append(s.types, t)
		fresh = append(fresh, !known || touched)
	}
	return s, fresh
}

// reread reads the touched parts of cell map m again, keeping the rest of c.
func reread(c Cell, m *yjs.Map, p part) (Cell, bool) {
	if p&partOther != 0 {
		return readCell(m)
	}
	c.readParts(m, p)
	return c, true
}
