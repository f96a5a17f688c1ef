package ynotebook

import (
	"slices"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// spliceMax is the most cells an update may insert or delete for splice to handle it;
// larger updates read the whole cells array again.
const spliceMax = 32

// spliced is a cell an update inserted or deleted.
type spliced struct {
	typ  *yjs.Type
	cell *Cell
	pos  int // index in the snapshot: before the update for deleted cells, after it for inserted ones
}

// splice applies txn to the snapshot by visiting only the cells it inserted, deleted or
// edited, so that its cost does not depend on the size of the notebook. It declines (ok
// false, nothing changed) when the cells array must be read again as a whole: a cell's
// id or type edited, many cells inserted or deleted, an inserted or deleted cell whose
// key is not unique on both sides, more than one cell put in another's place, a cell
// edited whose id another cell holds too, or meta edited while an id is held twice (which
// cells get() serves may change: dedup.go).
func (n *Notebook) splice(txn *yjs.Txn, sc scope) (Changes, bool) {
	removed, inserted, ok := n.splicedCells(txn, sc)
	if !ok {
		return Changes{}, false
	}
	for t, p := range sc.parts {
		if p&partOther != 0 && !slices.ContainsFunc(inserted, func(c spliced) bool { return c.typ == t }) {
			return Changes{}, false
		}
		if n.duplicated(t) {
			return Changes{}, false
		}
	}
	if sc.meta && n.dups {
		return Changes{}, false // nbformat decides whether duplicates are dropped
	}
	cross, ok := n.uniqueKeys(removed, inserted)
	if !ok {
		return Changes{}, false
	}

	s := n.editable()
	var ch Changes
	if sc.meta {
		old := *s
		readSnapshotMeta(s, n.meta)
		ch.Metadata = levelChanged(&old, s)
	}
	for t, p := range sc.parts {
		sl := n.bySlot[t]
		if sl == nil || t.Deleted() {
			continue // a cell inserted, deleted or not in the snapshot (a hidden duplicate)
		}
		old := sl.cell()
		c := reread(old, (*yjs.Map)(t), p, &sc)
		s.cells.set(sl, c)
		ch.addCell(old, c, p)
	}
	n.remove(removed)
	n.insert(inserted)

	// cells are paired by key, unique here: a key on both sides is one cell put in the
	// place of another (cross), the others are added or removed
	var crossKey cellKey
	if cross >= 0 {
		crossKey = keyOf(inserted[cross].cell)
	}
	var gone, added []string // united once each (union): a splice may remove or insert every cell
	for _, c := range removed {
		if cross < 0 || keyOf(c.cell) != crossKey {
			gone = append(gone, c.cell.ID)
		}
	}
	ch.Removed = union(ch.Removed, gone)
	slices.SortFunc(inserted, func(a, b spliced) int { return a.pos - b.pos })
	for i, c := range inserted {
		if cross >= 0 && keyOf(c.cell) == crossKey {
			cross = i // its index after sorting
			continue
		}
		added = append(added, c.cell.ID)
	}
	ch.Added = union(ch.Added, added)
	if cross >= 0 {
		x := &inserted[cross]
		i := slices.IndexFunc(removed, func(c spliced) bool { return keyOf(c.cell) == crossKey })
		ch.addCell(removed[i].cell, x.cell, partOther)
		ch.Moved = n.moved(removed, inserted, removed[i].pos, x.pos, cross)
	}
	return ch, true
}

// editable returns the current snapshot, first copied when Snapshot handed it out: the
// copy's cell tree is of a new generation, so that the nodes it shares are copied before
// an edit.
func (n *Notebook) editable() *Snapshot {
	if n.shared {
		c := *n.snap
		c.cells.gen++
		n.snap, n.shared = &c, false
	}
	return n.snap
}

// splicedCells returns the cells of the snapshot txn deleted, by position, and the cell
// maps it inserted into the cells array, read; ok is false when there are too many.
func (n *Notebook) splicedCells(txn *yjs.Txn, sc scope) (removed, inserted []spliced, ok bool) {
	if !sc.cells {
		return nil, nil, true
	}
	cells := n.cells.Type()
	for _, t := range txn.SeqTypes() {
		if parent, _, _ := t.Parent(); parent != cells {
			continue
		}
		same := func(c spliced) bool { return c.typ == t }
		switch sl := n.bySlot[t]; {
		case sl != nil && t.Deleted() && !slices.ContainsFunc(removed, same):
			removed = append(removed, spliced{typ: t, cell: sl.cell(), pos: sl.pos()})
		case sl == nil && !t.Deleted() && t.Kind() == yjs.KindMap && !slices.ContainsFunc(inserted, same):
			inserted = append(inserted, spliced{typ: t, cell: readCellMap((*yjs.Map)(t))})
		default:
			continue
		}
		if len(removed)+len(inserted) > spliceMax {
			return nil, nil, false
		}
	}
	slices.SortFunc(removed, func(a, b spliced) int { return a.pos - b.pos })
	return removed, inserted, true
}

// uniqueKeys checks that every key of a removed or inserted cell is held by at most one
// cell before and after the update, so that pairing cells by key needs no counting of
// occurrences, and that at most one key is on both sides; cross is the index in inserted
// of the cell with that key, -1 when there is none.
func (n *Notebook) uniqueKeys(removed, inserted []spliced) (cross int, ok bool) {
	cross = -1
	count := func(k cellKey) (gone, added int) {
		for i := range removed {
			if keyOf(removed[i].cell) == k {
				gone++
			}
		}
		for i := range inserted {
			if keyOf(inserted[i].cell) == k {
				added++
			}
		}
		return gone, added
	}
	check := func(k cellKey) bool {
		before := n.ids[k]
		gone, added := count(k)
		return before <= 1 && before-gone+added <= 1
	}
	for i := range removed {
		if !check(keyOf(removed[i].cell)) {
			return -1, false
		}
	}
	for i := range inserted {
		k := keyOf(inserted[i].cell)
		if !check(k) {
			return -1, false
		}
		if gone, _ := count(k); gone > 0 {
			if cross >= 0 {
				return -1, false
			}
			cross = i
		}
	}
	return cross, true
}

// remove takes the removed cells out of the snapshot.
func (n *Notebook) remove(removed []spliced) {
	for _, c := range removed {
		n.snap.cells.remove(n.bySlot[c.typ])
		delete(n.bySlot, c.typ)
		if k := keyOf(c.cell); n.ids[k] > 1 {
			n.ids[k]--
		} else {
			delete(n.ids, k)
		}
	}
}

// insert puts the inserted cells into the snapshot, each after the nearest cell before it
// in the document that is already there, and sets their positions.
func (n *Notebook) insert(inserted []spliced) {
	for i := range inserted {
		c := &inserted[i]
		var left *slot
		for l := c.typ.Left(); l != nil && left == nil; l = l.Left() {
			left = n.bySlot[l]
		}
		sl := &slot{typ: c.typ}
		n.snap.cells.insertAfter(left, sl, c.cell)
		n.bySlot[c.typ] = sl
		n.ids[keyOf(c.cell)]++
	}
	for i := range inserted {
		inserted[i].pos = n.bySlot[inserted[i].typ].pos()
	}
}

// moved returns the ids reorder reports as moved when one cell, at oldPos before and at
// inserted[cross] (newPos) after, takes the place of a cell with its key and every other
// cell on both sides keeps its order. Counted among the cells on both sides only, the
// cell moved by d places; reorder's longest increasing run leaves it out when |d| > 1 and
// when it moved up by one, and leaves out the cell it passed when it moved down by one.
func (n *Notebook) moved(removed, inserted []spliced, oldPos, newPos, cross int) []string {
	oldRank, newRank := oldPos, newPos
	for _, c := range removed {
		if c.pos < oldPos && keyOf(c.cell) != keyOf(inserted[cross].cell) {
			oldRank--
		}
	}
	added := func(pos int) bool {
		for i, c := range inserted {
			if i != cross && c.pos == pos {
				return true
			}
		}
		return false
	}
	for i, c := range inserted {
		if i != cross && c.pos < newPos {
			newRank--
		}
	}
	switch d := newRank - oldRank; {
	case d == 0:
		return nil
	case d == 1:
		j := newPos - 1
		for added(j) {
			j--
		}
		return []string{n.snap.At(j).ID}
	default:
		return []string{inserted[cross].cell.ID}
	}
}

// duplicated reports whether cell map t is one of several cells with its id (dedup.go):
// hidden as an exact duplicate, or in the snapshot with a key held more than once.
func (n *Notebook) duplicated(t *yjs.Type) bool {
	if n.hidden[t] {
		return true
	}
	sl := n.bySlot[t]
	if sl == nil {
		return false
	}
	k := keyOf(sl.cell())
	return dupKey(k) && n.ids[k] > 1
}
