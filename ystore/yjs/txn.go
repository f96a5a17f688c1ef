package yjs

import (
	"cmp"
	"slices"
)

// Txn reports what one ApplyUpdate changed, like the changed map of a Yjs transaction:
// every type that existed before the update, is not deleted, and gained or lost content.
// Re-applying known structs reports nothing. It is valid until the document applies
// another update.
type Txn struct {
	doc     *Doc // the document applying it
	changes []Change
	index   map[*Type]int // built once changes outgrow a linear scan
	before  []clientClock
	beforeM map[uint64]uint64 // built once before outgrows a linear scan
	deletes []deleteRange
	// mergeStructs are the starts of items split during the transaction. (Structs put
	// in the place of a Skip are not merged with their neighbours, as in yrs.)
	mergeStructs []ID
	// filled are the clock ranges the transaction added in the place of Skips: below
	// their clients' states before it, yet new.
	filled []deleteRange
	// seqTypes are the types inserted into or deleted from a sequence.
	seqTypes []*Type
	// unsorted is set while a change's keys are in the order they changed (settle).
	unsorted bool
}

// reset empties t for the next update, keeping the storage of its lists: a document
// applies every update in the same Txn. Only fields in use are written (each pointer
// written costs a write barrier while the collector marks).
func (t *Txn) reset() {
	if len(t.changes) > 0 {
		// each change keeps its list of keys for the next update's
		for i := range t.changes {
			c := &t.changes[i]
			clear(c.Keys)
			c.Type, c.Keys, c.Seq = nil, c.Keys[:0], false
		}
		t.changes = t.changes[:0]
	}
	if len(t.seqTypes) > 0 {
		clear(t.seqTypes)
		t.seqTypes = t.seqTypes[:0]
	}
	if t.index != nil {
		t.index = nil
	}
	if t.beforeM != nil {
		t.beforeM = nil
	}
	t.before = t.before[:0]
	t.deletes = t.deletes[:0]
	t.mergeStructs = t.mergeStructs[:0]
	t.filled = t.filled[:0]
}

// Added reports whether the update integrated the struct at id: at or past its client's
// state before the update, or in the place of a Skip. A struct it did not add was there
// before it, deleted or not.
func (t *Txn) Added(id ID) bool { return t.added(t.doc, id) }

// added reports whether the struct at id was added by the transaction.
func (t *Txn) added(d *Doc, id ID) bool {
	if id.Clock >= t.beforeState(d, id.Client) {
		return true
	}
	for _, r := range t.filled {
		if r.client == id.Client && r.clock <= id.Clock && id.Clock < r.clock+r.length {
			return true
		}
	}
	return false
}

// clientClock is the state of a client before the transaction first added to it.
type clientClock struct {
	client, clock uint64
}

// linearMax is the size up to which Txn looks things up by scanning.
const linearMax = 8

// Change describes one changed type.
type Change struct {
	// Type is the changed type.
	Type *Type
	// Keys are the map keys (parentSub) that changed, sorted.
	Keys []string
	// Seq reports whether the sequence content (array elements, text) changed.
	Seq bool
}

// deleteRange is a clock range of one client.
type deleteRange struct {
	client, clock, length uint64
}

// Empty reports whether nothing changed.
func (t *Txn) Empty() bool { return len(t.changes) == 0 }

// Changes returns the changed types in the order they first changed.
func (t *Txn) Changes() []Change { return t.changes }

// SeqTypes returns the types inserted into or deleted from the sequence of an array or
// XML node during the transaction, in the order that happened; a type inserted and deleted
// again appears twice. Which ones are deleted tells Type.Deleted.
func (t *Txn) SeqTypes() []*Type { return t.seqTypes }

// Changed returns the change recorded for typ, if any.
func (t *Txn) Changed(typ *Type) (Change, bool) {
	i := t.find(typ)
	if i < 0 {
		return Change{}, false
	}
	return t.changes[i], true
}

// find returns the index of typ in changes or -1.
func (t *Txn) find(typ *Type) int {
	if t.index != nil {
		if i, ok := t.index[typ]; ok {
			return i
		}
		return -1
	}
	for i := range t.changes {
		if t.changes[i].Type == typ {
			return i
		}
	}
	return -1
}

// touch records the state of client before the transaction first adds to it.
func (t *Txn) touch(d *Doc, client uint64) {
	if len(t.before) > 0 && t.before[len(t.before)-1].client == client {
		return
	}
	if _, ok := t.beforeOf(client); ok {
		return
	}
	s := d.state(client)
	t.before = append(t.before, clientClock{client, s})
	switch {
	case t.beforeM != nil:
		t.beforeM[client] = s
	case len(t.before) > linearMax:
		t.beforeM = make(map[uint64]uint64, len(t.before))
		for _, b := range t.before {
			t.beforeM[b.client] = b.clock
		}
	}
}

func (t *Txn) beforeOf(client uint64) (uint64, bool) {
	if t.beforeM != nil {
		s, ok := t.beforeM[client]
		return s, ok
	}
	for _, b := range t.before {
		if b.client == client {
			return b.clock, true
		}
	}
	return 0, false
}

func (t *Txn) beforeState(d *Doc, client uint64) uint64 {
	if s, ok := t.beforeOf(client); ok {
		return s
	}
	return d.state(client)
}

func (t *Txn) addDelete(id ID, length uint64) {
	if n := len(t.deletes); n > 0 {
		last := &t.deletes[n-1]
		if last.client == id.Client && last.clock+last.length == id.Clock {
			last.length += length
			return
		}
	}
	t.deletes = append(t.deletes, deleteRange{id.Client, id.Clock, length})
}

// sortDeletes sorts the deleted ranges by client and clock and merges adjacent ones,
// like Yjs's sortAndMergeDeleteSet.
func (t *Txn) sortDeletes() {
	if len(t.deletes) < 2 {
		return
	}
	slices.SortFunc(t.deletes, func(a, b deleteRange) int {
		if c := cmp.Compare(a.client, b.client); c != 0 {
			return c
		}
		return cmp.Compare(a.clock, b.clock)
	})
	out := t.deletes[:0]
	for _, r := range t.deletes {
		if n := len(out); n > 0 && out[n-1].client == r.client && out[n-1].clock+out[n-1].length >= r.clock {
			out[n-1].length = max(out[n-1].length, r.clock+r.length-out[n-1].clock)
			continue
		}
		out = append(out, r)
	}
	t.deletes = out
}

// addChanged records a change of typ like Yjs's addChangedTypeToTransaction.
func (t *Txn) addChanged(d *Doc, typ *Type, key string, hasKey bool) {
	if it := typ.item; it != nil && (it.deleted() || t.added(d, it.id)) {
		return
	}
	i := t.find(typ)
	if i < 0 {
		i = len(t.changes)
		if i < cap(t.changes) {
			t.changes = t.changes[:i+1] // empty, its list of keys kept by reset
		} else {
			t.changes = append(t.changes, Change{})
		}
		t.changes[i].Type = typ
		t.reindex()
	}
	c := &t.changes[i]
	if !hasKey {
		c.Seq = true
		return
	}
	// Appended, and sorted once when the update is applied (settle): inserting each in
	// order made an update of n keys cost n² moves.
	if k := len(c.Keys); k == 0 || c.Keys[k-1] != key {
		c.Keys = append(c.Keys, key)
		t.unsorted = t.unsorted || k > 0
	}
}

// settle sorts the keys of every change and drops repeats, once the update is applied.
func (t *Txn) settle() {
	if !t.unsorted {
		return
	}
	t.unsorted = false
	for i := range t.changes {
		c := &t.changes[i]
		if len(c.Keys) > 1 {
			slices.Sort(c.Keys)
			c.Keys = slices.Compact(c.Keys)
		}
	}
}

// dropChanged forgets typ, deleted in this transaction.
func (t *Txn) dropChanged(typ *Type) {
	i := t.find(typ)
	if i < 0 {
		return
	}
	t.changes = slices.Delete(t.changes, i, i+1)
	t.index = nil
	t.reindex()
}

// reindex maintains the index once changes outgrow a linear scan.
func (t *Txn) reindex() {
	if len(t.changes) <= linearMax {
		return
	}
	if t.index == nil {
		t.index = make(map[*Type]int, len(t.changes))
		for j := range t.changes {
			t.index[t.changes[j].Type] = j
		}
		return
	}
	t.index[t.changes[len(t.changes)-1].Type] = len(t.changes) - 1
}

// itemSet is a small set of items: linear while small, hashed when large.
type itemSet struct {
	list []*item
	m    map[*item]struct{}
}

const itemSetLinear = 32

// reset empties s, keeping its storage for the next scan: a document holds at most that
// of its longest conflict scan, a few bytes per item it scanned.
func (s *itemSet) reset() {
	s.list = s.list[:0]
	if len(s.m) > 0 { // clearing costs its storage's size: not for the scans that did not use it
		clear(s.m)
	}
}

func (s *itemSet) add(it *item) {
	if len(s.list) < itemSetLinear {
		s.list = append(s.list, it)
		return
	}
	if s.m == nil {
		s.m = make(map[*item]struct{})
	}
	s.m[it] = struct{}{}
}

func (s *itemSet) has(it *item) bool {
	for _, x := range s.list {
		if x == it {
			return true
		}
	}
	_, ok := s.m[it]
	return ok
}
