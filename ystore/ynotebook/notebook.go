package ynotebook

import (
	"fmt"

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
	// cache holds the materialized cell of every cell map of the current snapshot.
	cache map[*yjs.Type]Cell
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
		cache: map[*yjs.Type]Cell{},
	}
	n.snap = n.materialize(nil, true)
	return n
}

// scope is the part of the notebook an update touched.
type scope struct {
	meta      bool               // the meta map or anything in it
	cells     bool               // the cells array itself: cells inserted or deleted
	cellTypes map[*yjs.Type]bool // cell maps with changes inside
}

// scopeOf attributes every changed type of txn to the notebook part holding it.
func scopeOf(txn *yjs.Txn) scope {
	var sc scope
	for _, c := range txn.Changes() {
		var child *yjs.Type
		t := c.Type
		for !t.Root() {
			child = t
			t, _, _ = t.Parent()
		}
		switch t.Name() {
		case rootMeta:
			sc.meta = true
		case rootCells:
			if child == nil {
				sc.cells = true
				continue
			}
			if sc.cellTypes == nil {
				sc.cellTypes = map[*yjs.Type]bool{}
			}
			sc.cellTypes[child] = true
		}
	}
	return sc
}

// Apply applies one Yjs v1 update and reports what changed in the notebook view. On error
// the notebook is unchanged.
func (n *Notebook) Apply(update []byte) (Changes, error) {
	txn, err := n.doc.ApplyUpdate(update)
	if err != nil {
		return Changes{}, fmt.Errorf("apply notebook update: %w", err)
	}
	sc := scopeOf(txn)
	if !sc.meta && !sc.cells && len(sc.cellTypes) == 0 {
		return Changes{}, nil
	}
	for t := range sc.cellTypes {
		delete(n.cache, t)
	}
	prev := n.snap
	n.snap = n.materialize(prev, sc.meta)
	return diff(prev, n.snap, sc.meta), nil
}

// Snapshot returns the current notebook; the result is never modified afterwards.
func (n *Notebook) Snapshot() *Snapshot { return n.snap }

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

// materialize builds the snapshot of the current document, reusing every cached cell and,
// unless meta changed, the notebook-level fields of prev.
func (n *Notebook) materialize(prev *Snapshot, metaChanged bool) *Snapshot {
	s := &Snapshot{}
	if metaChanged {
		readSnapshotMeta(s, n.meta)
	} else {
		*s = *prev
	}
	values := n.cells.Values()
	s.Cells = make([]Cell, 0, len(values))
	s.types = make([]*yjs.Type, 0, len(values))
	s.fresh = make([]bool, 0, len(values))
	live := make(map[*yjs.Type]Cell, len(values))
	for _, v := range values {
		m, isMap := v.(*yjs.Map)
		if !isMap {
			continue
		}
		c, cached := n.cache[m.Type()]
		if !cached {
			var ok bool
			if c, ok = readCell(m); !ok {
				continue
			}
		}
		live[m.Type()] = c
		s.Cells = append(s.Cells, c)
		s.types = append(s.types, m.Type())
		s.fresh = append(s.fresh, !cached)
	}
	n.cache = live
	return s
}
