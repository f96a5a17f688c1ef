package yjs

import "slices"

// Txn reports what one ApplyUpdate changed, like the changed map of a Yjs transaction:
// every type that existed before the update, is not deleted, and gained or lost content.
// Re-applying known structs reports nothing.
type Txn struct {
	changes []Change
	index   map[*Type]int
	before  map[uint64]uint64
	deletes []deleteRange
}

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

// Changed returns the change recorded for typ, if any.
func (t *Txn) Changed(typ *Type) (Change, bool) {
	i, ok := t.index[typ]
	if !ok {
		return Change{}, false
	}
	return t.changes[i], true
}

// touch records the state of client before the transaction first adds to it.
func (t *Txn) touch(d *Doc, client uint64) {
	if _, ok := t.before[client]; ok {
		return
	}
	if t.before == nil {
		t.before = make(map[uint64]uint64)
	}
	t.before[client] = d.state(client)
}

func (t *Txn) beforeState(d *Doc, client uint64) uint64 {
	if s, ok := t.before[client]; ok {
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

// addChanged records a change of typ like Yjs's addChangedTypeToTransaction.
func (t *Txn) addChanged(d *Doc, typ *Type, key string, hasKey bool) {
	if it := typ.item; it != nil && (it.id.Clock >= t.beforeState(d, it.id.Client) || it.deleted()) {
		return
	}
	i, ok := t.index[typ]
	if !ok {
		if t.index == nil {
			t.index = make(map[*Type]int)
		}
		i = len(t.changes)
		t.index[typ] = i
		t.changes = append(t.changes, Change{Type: typ})
	}
	c := &t.changes[i]
	if !hasKey {
		c.Seq = true
		return
	}
	if j, found := slices.BinarySearch(c.Keys, key); !found {
		c.Keys = slices.Insert(c.Keys, j, key)
	}
}

// dropChanged forgets typ, deleted in this transaction.
func (t *Txn) dropChanged(typ *Type) {
	i, ok := t.index[typ]
	if !ok {
		return
	}
	t.changes = slices.Delete(t.changes, i, i+1)
	delete(t.index, typ)
	for j := i; j < len(t.changes); j++ {
		t.index[t.changes[j].Type] = j
	}
}

// itemSet is a small set of items: linear while small, hashed when large.
type itemSet struct {
	list []*item
	m    map[*item]struct{}
}

const itemSetLinear = 32

func (s *itemSet) reset() {
	s.list = s.list[:0]
	s.m = nil
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
