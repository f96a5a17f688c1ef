package yjs

import (
	"iter"
	"slices"
)

// chunkMax is the most structs a chunk of a client's list holds.
const chunkMax = 128

// clientStructs holds one client's structs sorted by clock, contiguous from clock 0, in
// chunks of at most chunkMax: a split or a merge in the middle of a long history moves
// the pointers of one chunk, not of every later struct (moving pointers costs a write
// barrier each while the collector marks). Structs are addressed by their index in the
// whole list.
type clientStructs struct {
	chunks [][]*item
	starts []int // starts[c] is the index of chunks[c][0]
	n      int
	cur    int    // the chunk last located: indexes are mostly near the previous one
	end    uint64 // the clock after the last struct
	// skipped are the clock ranges of its Skip structs, sorted: clocks the document
	// lacks below end. yrs integrates a struct past a gap in its client's clocks when
	// nothing it depends on is missing, and holds the gap as a Skip until the structs in
	// it arrive.
	skipped []dsRange
}

// len returns the number of structs.
func (cs *clientStructs) len() int { return cs.n }

// locate returns the chunk holding index i (0 <= i < len) and i's offset in it.
func (cs *clientStructs) locate(i int) (c, off int) {
	if c := cs.cur; c < len(cs.chunks) && cs.starts[c] <= i && i < cs.starts[c]+len(cs.chunks[c]) {
		return c, i - cs.starts[c]
	}
	lo, hi := 0, len(cs.starts) // the last chunk starting at or before i
	for lo < hi {
		if m := int(uint(lo+hi) >> 1); cs.starts[m] <= i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	c = lo - 1
	cs.cur = c
	return c, i - cs.starts[c]
}

// at returns the struct at index i.
func (cs *clientStructs) at(i int) *item {
	c, off := cs.locate(i)
	return cs.chunks[c][off]
}

// push appends it.
func (cs *clientStructs) push(it *item) {
	if k := len(cs.chunks) - 1; k >= 0 && len(cs.chunks[k]) < chunkMax {
		cs.chunks[k] = append(cs.chunks[k], it)
	} else {
		// A client's first chunk grows as it fills (most clients of a notebook write a
		// few structs; a writer making a client per struct made each take a whole
		// chunk's kilobyte); later ones are made whole.
		capacity := chunkMax
		if len(cs.chunks) == 0 {
			capacity = 1
		}
		ch := make([]*item, 1, capacity)
		ch[0] = it
		cs.chunks = append(cs.chunks, ch)
		cs.starts = append(cs.starts, cs.n)
	}
	cs.n++
	cs.end = it.end() // splits and merges keep it: only push adds clocks
}

// insert puts it at index i (0 <= i <= len).
func (cs *clientStructs) insert(i int, it *item) {
	if i == cs.n {
		cs.push(it)
		return
	}
	c, off := cs.locate(i)
	cs.chunks[c] = slices.Insert(cs.chunks[c], off, it)
	cs.shift(c+1, 1)
	cs.n++
	if ch := cs.chunks[c]; len(ch) > chunkMax {
		half := len(ch) / 2
		right := make([]*item, len(ch)-half, chunkMax)
		copy(right, ch[half:])
		clear(ch[half:])
		cs.chunks[c] = ch[:half]
		cs.chunks = slices.Insert(cs.chunks, c+1, right)
		cs.starts = slices.Insert(cs.starts, c+1, cs.starts[c]+half)
	}
}

// set replaces the struct at index i by it.
func (cs *clientStructs) set(i int, it *item) {
	c, off := cs.locate(i)
	cs.chunks[c][off] = it
}

// skip appends a Skip over the clocks from end up to clock (at most maxLength of them).
func (cs *clientStructs) skip(client, clock uint64) {
	cs.skipped = append(cs.skipped, dsRange{cs.end, clock - cs.end})
	cs.push(skipItem(ID{client, cs.end}, clock-cs.end))
}

// skipAt returns the index in skipped of the range holding clock, or -1.
func (cs *clientStructs) skipAt(clock uint64) int {
	k, _ := slices.BinarySearchFunc(cs.skipped, clock, func(r dsRange, c uint64) int {
		switch {
		case r.clock+r.length <= c:
			return -1
		case r.clock > c:
			return 1
		}
		return 0
	})
	if k < len(cs.skipped) && cs.skipped[k].clock <= clock && clock < cs.skipped[k].clock+cs.skipped[k].length {
		return k
	}
	return -1
}

// skipFrom returns the first Skip range that ends after clock, if any.
func (cs *clientStructs) skipFrom(clock uint64) (dsRange, bool) {
	k, _ := slices.BinarySearchFunc(cs.skipped, clock, func(r dsRange, c uint64) int {
		if r.clock+r.length <= c {
			return -1
		}
		return 1
	})
	if k == len(cs.skipped) {
		return dsRange{}, false
	}
	return cs.skipped[k], true
}

// lacks reports whether a Skip holds a clock from from up to to.
func (cs *clientStructs) lacks(from, to uint64) bool {
	r, ok := cs.skipFrom(from)
	return ok && r.clock < to
}

// fill puts it in the place of the clocks it holds, which a Skip holds: what the Skip
// held before and after it stays a Skip.
func (cs *clientStructs) fill(it *item) {
	k := cs.skipAt(it.id.Clock)
	r := cs.skipped[k]
	var keep []dsRange
	if before := it.id.Clock - r.clock; before > 0 {
		keep = append(keep, dsRange{r.clock, before})
	}
	if after := r.clock + r.length - it.end(); after > 0 {
		keep = append(keep, dsRange{it.end(), after})
	}
	cs.skipped = slices.Replace(cs.skipped, k, k+1, keep...)

	i := cs.find(it.id.Clock)
	s := cs.at(i)
	if after := s.end() - it.end(); after > 0 {
		cs.insert(i+1, skipItem(ID{it.id.Client, it.end()}, after))
	}
	if before := it.id.Clock - s.id.Clock; before > 0 {
		s.length = uint32(before)
		cs.insert(i+1, it)
		return
	}
	cs.set(i, it)
}

// skipItem returns a Skip over length clocks from id (at most maxLength).
func skipItem(id ID, length uint64) *item {
	return &item{id: id, length: uint32(length), kind: kindSkip}
}

// remove takes out the k structs from index i on.
func (cs *clientStructs) remove(i, k int) {
	for k > 0 {
		c, off := cs.locate(i)
		m := min(k, len(cs.chunks[c])-off)
		cs.chunks[c] = slices.Delete(cs.chunks[c], off, off+m)
		cs.shift(c+1, -m)
		cs.n -= m
		k -= m
		switch ch := cs.chunks[c]; {
		case len(ch) == 0:
			cs.chunks = slices.Delete(cs.chunks, c, c+1)
			cs.starts = slices.Delete(cs.starts, c, c+1)
		case len(ch) < chunkMax/4 && c+1 < len(cs.chunks) && len(ch)+len(cs.chunks[c+1]) <= chunkMax:
			// a small chunk takes in its right neighbour, so chunks stay few
			cs.chunks[c] = append(ch, cs.chunks[c+1]...)
			cs.chunks = slices.Delete(cs.chunks, c+1, c+2)
			cs.starts = slices.Delete(cs.starts, c+1, c+2)
		}
	}
}

// shift adds d to the starts of the chunks from c on.
func (cs *clientStructs) shift(c, d int) {
	for k := c; k < len(cs.starts); k++ {
		cs.starts[k] += d
	}
}

// find returns the index of the struct containing clock, or -1.
func (cs *clientStructs) find(clock uint64) int {
	if cs.n == 0 {
		return -1
	}
	c := min(cs.cur, len(cs.chunks)-1)
	holds := func(c int) bool { // whether chunk c is the last starting at or before clock
		return cs.chunks[c][0].id.Clock <= clock && (c+1 == len(cs.chunks) || cs.chunks[c+1][0].id.Clock > clock)
	}
	switch {
	case holds(c):
	case c+1 < len(cs.chunks) && holds(c+1):
		c++
		cs.cur = c
	case c > 0 && holds(c-1):
		c--
		cs.cur = c
	default:
		lo, hi := 0, len(cs.chunks) // the last chunk starting at or before clock
		for lo < hi {
			if m := int(uint(lo+hi) >> 1); cs.chunks[m][0].id.Clock <= clock {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if c = lo - 1; c < 0 {
			return -1
		}
		cs.cur = c
	}
	if i := findIndex(cs.chunks[c], clock); i >= 0 {
		return cs.starts[c] + i
	}
	return -1
}

// findNear is find starting from a guess: the chunk of index hint is tried first, so
// walking sorted ranges costs little more than a scan. Any hint is correct.
func (cs *clientStructs) findNear(clock uint64, hint int) int {
	if hint >= 0 && hint < cs.n {
		c, _ := cs.locate(hint)
		if ch := cs.chunks[c]; ch[0].id.Clock <= clock && clock < ch[len(ch)-1].end() {
			return cs.starts[c] + findIndex(ch, clock)
		}
	}
	return cs.find(clock)
}

// all yields the structs in order.
func (cs *clientStructs) all() iter.Seq[*item] {
	return func(yield func(*item) bool) {
		for _, ch := range cs.chunks {
			for _, it := range ch {
				if !yield(it) {
					return
				}
			}
		}
	}
}

// from returns a copy of the structs from index i on.
func (cs *clientStructs) from(i int) []*item {
	out := make([]*item, 0, cs.n-i)
	for it := range cs.all() {
		out = append(out, it)
	}
	return out[i:]
}

// structsOf returns the struct list of client, or nil; the last two lookups are cached
// (two replicas editing take turns).
func (d *Doc) structsOf(client uint64) *clientStructs {
	c := &d.csCache
	switch {
	case c[0].cs != nil && c[0].client == client:
		return c[0].cs
	case c[1].cs != nil && c[1].client == client:
		c[0], c[1] = c[1], c[0]
		return c[0].cs
	}
	cs := d.clients[client]
	if cs != nil {
		c[1], c[0] = c[0], csEntry{client, cs}
	}
	return cs
}

// csEntry is a client's struct list, cached by Doc.structsOf.
type csEntry struct {
	client uint64
	cs     *clientStructs
}

// state returns the clock after client's last struct.
func (d *Doc) state(client uint64) uint64 {
	if cs := d.structsOf(client); cs != nil {
		return cs.end
	}
	return 0
}

// known returns client's clock as the state vector gives it, as yrs does: the first
// clock the document lacks, the start of a Skip or its state.
func (d *Doc) known(client uint64) uint64 {
	cs := d.structsOf(client)
	switch {
	case cs == nil:
		return 0
	case len(cs.skipped) > 0:
		return cs.skipped[0].clock
	}
	return cs.end
}

// missing reports whether the document lacks the struct holding id: past its client's
// last struct, or in a Skip (yrs's is_missing).
func (d *Doc) missing(id ID) bool {
	cs := d.structsOf(id.Client)
	if cs == nil || id.Clock >= cs.end {
		return true
	}
	return len(cs.skipped) > 0 && cs.skipAt(id.Clock) >= 0
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
	first := structs[0].id.Clock
	if clock < first {
		return -1
	}
	// Pivot on the clock like Yjs's findIndexSS: clocks grow roughly evenly.
	mid := min(int(float64(clock-first)/float64(last.end()-1-first)*float64(hi)), hi)
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

// getItem returns the struct containing id; the caller has checked id.Clock < state.
func (d *Doc) getItem(id ID) *item {
	cs := d.structsOf(id.Client)
	return cs.at(cs.find(id.Clock))
}

// getItemCleanStart returns the struct starting at id, splitting an item if needed.
func (d *Doc) getItemCleanStart(id ID) *item {
	cs := d.structsOf(id.Client)
	i := cs.find(id.Clock)
	it := cs.at(i)
	if it.id.Clock < id.Clock && it.kind != kindGC {
		r := d.split(it, id.Clock-it.id.Clock)
		cs.insert(i+1, r)
		return r
	}
	return it
}

// getItemCleanEnd returns the struct ending at id, splitting an item if needed.
func (d *Doc) getItemCleanEnd(id ID) *item {
	cs := d.structsOf(id.Client)
	i := cs.find(id.Clock)
	it := cs.at(i)
	if id.Clock != it.end()-1 && it.kind != kindGC {
		cs.insert(i+1, d.split(it, id.Clock-it.id.Clock+1))
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

// addStruct adds an integrated struct to its client's list: appended, past a Skip over
// the clocks missing before it, or in the place of clocks a Skip held.
func (d *Doc) addStruct(txn *Txn, it *item) {
	cs := d.structsOf(it.id.Client)
	if cs == nil {
		cs = &clientStructs{}
		d.clients[it.id.Client] = cs
	}
	txn.touch(d, it.id.Client)
	skips := len(cs.skipped)
	if it.id.Clock < cs.end {
		cs.fill(it)
		d.unblocked = true // a pending struct may need what the Skip held
		d.skipping += len(cs.skipped) - skips
		txn.filled = append(txn.filled, deleteRange{it.id.Client, it.id.Clock, uint64(it.length)})
		return
	}
	if it.id.Clock > cs.end { // integrateStructs bounds the gap by maxLength
		cs.skip(it.id.Client, it.id.Clock)
		d.skipping++
	}
	cs.push(it)
}
