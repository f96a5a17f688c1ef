package yjs

import (
	"cmp"
	"slices"
)

// dsRange is a deleted clock range of one client.
type dsRange struct {
	clock, length uint64
}

// applyDeleteSet deletes the ranges the store knows, like Yjs's readAndApplyDeleteSet,
// and returns the ranges it lacks, beyond the known state or in Skips, sorted and merged
// (nil if none). ds is sorted by client.
func (d *Doc) applyDeleteSet(txn *Txn, ds []clientRanges) map[uint64][]dsRange {
	var unapplied map[uint64][]dsRange
	for _, cr := range ds {
		d.applyDeletes(txn, cr.client, cr.rs, &unapplied)
	}
	for c, rs := range unapplied {
		unapplied[c] = sortAndMerge(rs)
	}
	return unapplied
}

// applyDeletes deletes the ranges rs of client and adds those the document lacks to
// unapplied.
func (d *Doc) applyDeletes(txn *Txn, client uint64, rs []dsRange, unapplied *map[uint64][]dsRange) {
	addUnapplied := func(clock, length uint64) {
		if *unapplied == nil {
			*unapplied = make(map[uint64][]dsRange)
		}
		(*unapplied)[client] = append((*unapplied)[client], dsRange{clock, length})
	}
	state := d.state(client)
	hint := -1
	for _, r := range rs {
		clock, end := r.clock, r.clock+r.length
		if clock >= state {
			addUnapplied(clock, r.length)
			continue
		}
		if state < end {
			addUnapplied(state, end-state)
		}
		cs := d.structsOf(client)
		i := cs.findNear(clock, hint)
		hint = i
		it := cs.at(i)
		if !it.deleted() && it.kind != kindSkip && it.id.Clock < clock {
			cs.insert(i+1, d.split(it, clock-it.id.Clock))
			i++
		}
		for i < cs.len() {
			it = cs.at(i)
			i++
			if it.id.Clock >= end {
				break
			}
			if it.kind == kindSkip {
				// clocks the document lacks: the delete waits for them, as in yrs
				from := max(it.id.Clock, clock)
				addUnapplied(from, min(it.end(), end)-from)
				continue
			}
			if !it.deleted() {
				if end < it.end() {
					cs.insert(i, d.split(it, end-it.id.Clock))
				}
				d.deleteItem(txn, it)
			}
		}
	}
}

// mergeDeleteSets unions two delete sets, sorting and merging ranges like Yjs's
// sortAndMergeDeleteSet; either may be nil.
func mergeDeleteSets(a, b map[uint64][]dsRange) map[uint64][]dsRange {
	if a == nil {
		return b
	}
	for c, rs := range b {
		a[c] = append(a[c], rs...)
	}
	for c, rs := range a {
		a[c] = sortAndMerge(rs)
	}
	return a
}

func sortAndMerge(rs []dsRange) []dsRange {
	slices.SortFunc(rs, func(x, y dsRange) int { return cmp.Compare(x.clock, y.clock) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].clock+out[n-1].length >= r.clock {
			out[n-1].length = max(out[n-1].length, r.clock+r.length-out[n-1].clock)
			continue
		}
		out = append(out, r)
	}
	return out
}

// mergePending adds rest to the pending structs: per client sorted by clock, overlaps
// trimmed, Skip structs dropped (gaps are detected again on integration). The itemExt
// of explicit parents are copied: a decoded struct's is lent by an extBuf.
func mergePending(pending, rest map[uint64][]*item) {
	for c, list := range rest {
		list = slices.DeleteFunc(list, func(it *item) bool { return it.kind == kindSkip })
		for _, it := range list {
			if it.flags&flagHasPref != 0 {
				x := *it.ext
				it.ext = &x
			}
		}
		old := pending[c]
		// The common case: the new structs follow the pending ones (each list is sorted).
		if n := len(old); len(list) > 0 && (n == 0 || list[0].id.Clock >= old[n-1].end()) {
			pending[c] = append(old, list...)
			continue
		}
		all := append(old, list...)
		slices.SortStableFunc(all, func(x, y *item) int {
			if r := cmp.Compare(x.id.Clock, y.id.Clock); r != 0 {
				return r
			}
			return cmp.Compare(y.length, x.length)
		})
		out := all[:0]
		var end uint64
		for _, it := range all {
			itEnd := it.end()
			if len(out) > 0 && itEnd <= end {
				continue
			}
			if len(out) > 0 && it.id.Clock < end {
				it = slicePending(it, end-it.id.Clock)
			}
			out = append(out, it)
			end = itEnd
		}
		if len(out) == 0 {
			delete(pending, c)
			continue
		}
		pending[c] = out
	}
}

// slicePending drops the first diff clock units of an unintegrated struct, like Yjs's
// sliceStruct followed by re-encoding (an item then refers to its left neighbour).
func slicePending(it *item, diff uint64) *item {
	r := *it
	r.flags &^= flagsOwn
	r.id.Clock += diff
	r.length -= uint32(diff)
	if r.kind == kindGC {
		return &r
	}
	r.origin = ID{r.id.Client, r.id.Clock - 1}
	r.flags |= flagHasOrigin
	r.flags &^= flagHasPref
	switch r.kind {
	case kindString:
		_, r.text = splitText(r.text, diff)
	case kindAny, kindJSON:
		r.val = &anyVals{s: r.vals()[diff:]}
	}
	return &r
}
