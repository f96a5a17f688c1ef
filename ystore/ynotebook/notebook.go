package ynotebook

import (
	"errors"
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
	// shared is set once snap has been handed out: it must be copied, and the nodes of
	// its cell tree with it, before an edit.
	shared bool
	// bySlot finds the slot of each cell map in snap's cell tree; ids counts the cells of
	// each key (the stored id and whether there is one), hidden ones included; hidden
	// holds the cell maps left out as exact duplicates; dups is whether any key of
	// deduplicated cells is held twice.
	bySlot map[*yjs.Type]*slot
	ids    map[cellKey]int
	hidden map[*yjs.Type]bool
	dups   bool
	// parts and inner are the storage of the scope of the update being applied (scopeOf).
	parts map[*yjs.Type]part
	inner map[*yjs.Type]bool
}

// cellKey is what pairs cells across an update (with the number of cells before carrying
// the same key, see occurrence).
type cellKey struct {
	id    string
	hasID bool
}

func keyOf(c *Cell) cellKey { return c.key }

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
	n.reset(n.rebuild(&Snapshot{}, scope{meta: true, cells: true}))
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
	partOther // id, cell_type or a key outside nbformat: the cell is read again as a whole
)

// partOf names the part of a cell its key belongs to: execution_state, which get() does
// not show, to none; a key outside nbformat to partOther.
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
	case "execution_state":
		return 0
	}
	return partOther
}

// partKeys are the keys of the parts p, partOther aside.
func partKeys(p part) []string {
	var keys []string
	for _, k := range []string{"source", "metadata", "outputs", "execution_count", "attachments"} {
		if p&partOf(k) != 0 {
			keys = append(keys, k)
		}
	}
	return keys
}

// scope is the part of the notebook an update touched.
type scope struct {
	meta  bool               // the meta map or anything in it
	cells bool               // the cells array itself: cells inserted or deleted
	all   bool               // read every cell anew
	parts map[*yjs.Type]part // cell maps with changes inside, and where
	// inner are the types two levels below a cell map (an output in the outputs list)
	// with changes inside: the others hold what they held when last read.
	inner map[*yjs.Type]bool
	txn   *yjs.Txn // the update's transaction: what it added (yjs.Txn.Added)
}

// scopeOf attributes every changed type of txn to the notebook part holding it; parts
// and inner, empty, receive the touched cell maps and their touched elements (nil: a map
// is made when needed).
func scopeOf(txn *yjs.Txn, parts map[*yjs.Type]part, inner map[*yjs.Type]bool) scope {
	sc := scope{parts: parts, inner: inner, txn: txn}
	for _, c := range txn.Changes() {
		// walk up to the root, remembering the cell map, the type below it (in a key of
		// the cell) and the one below that
		var cell, below, elem *yjs.Type
		t := c.Type
		for !t.Root() {
			elem, below, cell = below, cell, t
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
			if elem != nil {
				if sc.inner == nil {
					sc.inner = map[*yjs.Type]bool{}
				}
				sc.inner[elem] = true
			}
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
	clear(n.parts)
	clear(n.inner)
	sc := scopeOf(txn, n.parts, n.inner)
	n.parts, n.inner = sc.parts, sc.inner
	if !sc.meta && !sc.cells && len(sc.parts) == 0 {
		return Changes{}, nil
	}
	if ch, ok := n.splice(txn, sc); ok {
		return ch, nil
	}
	return n.readAll(sc), nil
}

// readAll reads the cells array again as a whole, reusing the cells the update did not
// touch, and pairs the cells of both sides by key to report the changes.
func (n *Notebook) readAll(sc scope) Changes {
	prev := n.snap
	before := prev.cells.root.entries()
	next, r := n.rebuild(prev, sc)
	n.reset(next, r)
	ch := reorder(before, r.visible)
	ch.Metadata = sc.meta && levelChanged(prev, next)
	return ch
}

// Load applies updates without reporting changes and reads the notebook once at the end:
// the fast way to bring a notebook up to date from a store. Each update is decoded and
// integrated alone (yjs.Doc.ApplyUpdate), into storage the document reuses. An update
// that does not decode, or would nest types deeper than yjs.MaxDepth, is skipped, as
// Apply would leave the notebook unchanged by it: the error joins an *UpdateError for
// each (errors.Join; nil when every update applied). An update past the memory the
// document's meter has left (yjs.ErrBudget) ends the load: its error is returned alone,
// the updates before it applied.
func (n *Notebook) Load(updates [][]byte) error {
	defer n.reread()
	var errs []error
	for i, u := range updates {
		_, err := n.doc.ApplyUpdate(u)
		if errors.Is(err, yjs.ErrBudget) {
			return fmt.Errorf("update %d: %w", i, err)
		}
		if err != nil {
			errs = append(errs, &UpdateError{Index: i, Err: err})
		}
	}
	return errors.Join(errs...)
}

// reread reads the whole notebook again into a new current snapshot.
func (n *Notebook) reread() {
	n.reset(n.rebuild(n.snap, scope{meta: true, cells: true, all: true}))
}

// Loading is a new notebook built from updates that arrive one at a time (a store's rows
// read as they stream in), so that no more than one of them is held at once and its
// caller may stop between any two: Add applies each as Load does, Done reads the notebook
// once and hands it over. The result is the notebook Load of every update, in order,
// gives.
type Loading struct{ n *Notebook }

// NewLoading starts loading a new notebook whose document's memory is charged to m (nil:
// not counted; yjs.Doc.SetMeter).
func NewLoading(m yjs.Meter) *Loading {
	n := New()
	n.doc.SetMeter(m)
	return &Loading{n: n}
}

// Add applies update as Load does. An update that does not decode or nests too deep is
// skipped, its error returned (the *yjs.DecodeError, *yjs.DepthError or
// *yjs.ParentError), and the load goes on; past the meter, the error wraps yjs.ErrBudget
// and the load must end. Nothing refers to update once Add returns.
func (l *Loading) Add(update []byte) error {
	_, err := l.n.doc.ApplyUpdate(update)
	return err
}

// Done reads the notebook and returns it; l must not be used afterwards. The text the
// load decoded is compacted (yjs.Doc.CompactText): what stays is the live text's.
func (l *Loading) Done() *Notebook {
	n := l.n
	l.n = nil
	n.doc.CompactText()
	n.reread()
	return n
}

// Abandon gives back what the load was charged; l must not be used afterwards.
func (l *Loading) Abandon() {
	l.n.doc.SetMeter(nil)
	l.n = nil
}

// UpdateError is an update Load skipped because it does not decode or nests too deep.
type UpdateError struct {
	Index int   // its index in the updates given to Load
	Err   error // the *yjs.DecodeError, *yjs.DepthError or *yjs.ParentError
}

func (e *UpdateError) Error() string {
	return fmt.Sprintf("load notebook update %d: %v", e.Index, e.Err)
}

func (e *UpdateError) Unwrap() error { return e.Err }

// reset makes s, read by rebuild, the current snapshot.
func (n *Notebook) reset(s *Snapshot, r rebuilt) {
	n.snap, n.shared = s, false
	n.bySlot = make(map[*yjs.Type]*slot, len(r.visible))
	n.ids = make(map[cellKey]int, len(r.all))
	n.hidden, n.dups = r.hidden, false
	for _, c := range r.all {
		k := keyOf(c.cell)
		n.ids[k]++
		n.dups = n.dups || dupKey(k) && n.ids[k] > 1
	}
	for x := range leaves(s.cells.root) {
		for _, sl := range x.slots {
			n.bySlot[sl.typ] = sl
		}
	}
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

// readCell is a cell rebuild put in a snapshot: its map, the cell and whether it was read
// anew.
type readCell struct {
	typ   *yjs.Type
	cell  *Cell
	fresh bool
}

// rebuilt is what rebuild read: every cell YNotebook models, the cells served (dedup)
// and the cell maps left out as exact duplicates.
type rebuilt struct {
	all, visible []readCell
	hidden       map[*yjs.Type]bool
}

// rebuild returns a new snapshot of the whole cells array, taking from prev, the current
// snapshot or an empty one, every cell the update did not touch.
func (n *Notebook) rebuild(prev *Snapshot, sc scope) (*Snapshot, rebuilt) {
	s := &Snapshot{}
	if sc.meta {
		readSnapshotMeta(s, n.meta)
	} else {
		*s = *prev
	}
	values := n.cells.Values()
	read := make([]readCell, 0, len(values))
	for _, v := range values {
		m, isMap := v.(*yjs.Map)
		if !isMap {
			continue
		}
		t := m.Type()
		p, touched := sc.parts[t]
		var sl *slot
		if prev == n.snap && !sc.all {
			sl = n.bySlot[t]
		}
		var c *Cell
		switch {
		case sl != nil && !touched:
			c = sl.cell()
		case sl != nil:
			c = reread(sl.cell(), m, p, &sc)
		default:
			c = readCellMap(m)
		}
		read = append(read, readCell{typ: t, cell: c, fresh: sl == nil || touched})
	}
	visible, hidden := dedup(read, dedupOn(s))
	s.cells = buildTree(visible, prev.cells.gen)
	return s, rebuilt{all: read, visible: visible, hidden: hidden}
}

// reread reads the touched parts of cell map m again, keeping the rest of c, after the
// update sc describes.
func reread(c *Cell, m *yjs.Map, p part, sc *scope) *Cell {
	if p&partOther != 0 {
		return readCellMap(m)
	}
	next := *c
	next.outShared = next.outBytes + refBytes*int64(cap(next.outs)) // until read again
	next.readParts(m, p, sc)
	return &next
}
