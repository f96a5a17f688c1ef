package yjs

import "slices"

// clientStructs holds one client's structs sorted by clock, contiguous from clock 0.
type clientStructs struct {
	structs []*item
}

// structsOf returns the struct list of client, or nil; the last lookup is cached.
func (d *Doc) structsOf(client uint64) *clientStructs {
	if d.lastCS != nil && d.lastClient == client {
		return d.lastCS
	}
	cs := d.clients[client]
	if cs != nil {
		d.lastClient, d.lastCS = client, cs
	}
	return cs
}

// state returns the next expected clock of client.
func (d *Doc) state(client uint64) uint64 {
	cs := d.structsOf(client)
	if cs == nil || len(cs.structs) == 0 {
		return 0
	}
	last := cs.structs[len(cs.structs)-1]
	return last.end()
}

// findIndex returns the index of the struct containing clock, or -1.
func findIndex(structs []*item, clock uint64) int {
	lo, hi := 0, len(structs)-1
	if hi < 0 {
		return -1
	}
	last := structs[hi]
	if last.id.Clock <= clock {
		if clock < last.end() {
			return hi
		}
		return -1
	}
	// Pivot on the clock like Yjs's findIndexSS: clocks grow roughly evenly.
	mid := min(int(float64(clock)/float64(last.end()-1)*float64(hi)), hi)
	for lo <= hi {
		s := structs[mid]
		switch {
		case clock < s.id.Clock:
			hi = mid - 1
		case clock >= s.end():
			lo = mid + 1
		default:
			return mid
		}
		mid = int(uint(lo+hi) >> 1)
	}
	return -1
}

// findIndexNear is findIndex starting from a guess: it gallops from hint to bracket
// clock, so walking sorted ranges costs little more than a scan. Any hint is correct.
func findIndexNear(structs []*item, clock uint64, hint int) int {
	if hint < 0 || hint >= len(structs) {
		return findIndex(structs, clock)
	}
	lo, hi := hint, hint
	if clock >= structs[hint].id.Clock {
		for step := 1; hi < len(structs)-1 && structs[hi].end() <= clock; step <<= 1 {
			lo = hi
			hi = min(hi+step, len(structs)-1)
		}
	} else {
		for step := 1; lo > 0 && structs[lo].id.Clock > clock; step <<= 1 {
			hi = lo
			lo = max(lo-step, 0)
		}
	}
	i := findIndex(structs[lo:hi+1], clock)
	if i < 0 {
		return -1
	}
	return lo + i
}

// getItem returns the struct containing id; the caller has checked id.Clock < state.
func (d *Doc) getItem(id ID) *item {
	cs := d.structsOf(id.Client)
	return cs.structs[findIndex(cs.structs, id.Clock)]
}

// getItemCleanStart returns the struct starting at id, splitting an item if needed.
func (d *Doc) getItemCleanStart(id ID) *item {
	cs := d.structsOf(id.Client)
	i := findIndex(cs.structs, id.Clock)
	it := cs.structs[i]
	if it.id.Clock < id.Clock && it.kind != kindGC {
		r := d.split(it, id.Clock-it.id.Clock)
		cs.structs = slices.Insert(cs.structs, i+1, r)
		return r
	}
	return it
}

// getItemCleanEnd returns the struct ending at id, splitting an item if needed.
func (d *Doc) getItemCleanEnd(id ID) *item {
	cs := d.structsOf(id.Client)
	i := findIndex(cs.structs, id.Clock)
	it := cs.structs[i]
	if id.Clock != it.end()-1 && it.kind != kindGC {
		r := d.split(it, id.Clock-it.id.Clock+1)
		cs.structs = slices.Insert(cs.structs, i+1, r)
	}
	return it
}

// split splits an integrated item and keeps its parent's key index pointing at the
// right-most part.
func (d *Doc) split(it *item, diff uint64) *item {
	r := splitItem(it, diff)
	d.txn.mergeStructs = append(d.txn.mergeStructs, r.id)
	if r.flags&flagHasParentSub != 0 && r.right == nil && r.parent != nil {
		r.parent.keys[r.ext.sub] = r
	}
	return r
}

// addStruct appends an integrated struct to its client's list.
func (d *Doc) addStruct(txn *Txn, it *item) {
	cs := d.structsOf(it.id.Client)
	if cs == nil {
		cs = &clientStructs{}
		d.clients[it.id.Client] = cs
	}
	txn.touch(d, it.id.Client)
	cs.structs = append(cs.structs, it)
}
