package versions

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"reflect"
	"slices"
	"unsafe"
)

// A cell's sum, and the notebook-level members', is a digest of its JSON value built from
// the digests of its parts: a string by its bytes, a number, boolean or null by its JSON,
// an array by its elements' digests in order, an object by its keys and their values'
// digests in key order (short strings, numbers, booleans and null written in place of
// their digests); each tagged and length-prefixed, so that two values have the same
// digest only if they are equal. A container of at least runMin elements is written by
// the digests of its runs of runLen elements: a run whose elements are all shared with
// the last version (by identity) is not hashed again, so that a version of a cell of
// 6,000 outputs, one appended, hashes one run, not 6,000 outputs (red team of issue 42,
// pass 19b, N1: that was quadratic). The digests of a run's elements are kept as long as
// the run is, so that a run made anew, its boundaries moved by an output inserted or
// deleted before it, hashes their digests, not their content (pass 20, R1). A change
// rebuilds only what it touched and shares the rest (snapshots are immutable), so a part
// whose digest took long to compute is kept by
// identity (its string's bytes, its map, its slice's elements) and not computed again:
// a tiny change of a cell holding 25 MB of source cost 0.23 s of a core to hash the cell
// whole at each version (red team of issue 39, pass 6, F7), and costs its own size now.

// partCached is the work, in bytes hashed, past which a part's digest is kept.
const partCached = 4 << 10

// runMin is the number of elements from which a container is written by runs of runLen.
const (
	runMin = 16
	runLen = 32
)

// part identifies a value by where it lives: its string's bytes, its map, its slice's
// elements; the pointer keeps it alive while its digest is kept.
type part struct {
	p    unsafe.Pointer
	n    int
	kind byte
}

// partSum is a part's digest, the round it was last used in and the bytes its
// computation hashed (about the memory its value holds).
type partSum struct {
	sum   [sha256.Size]byte
	round uint32
	work  int
}

// use marks ps used this round, counting its work once a round (forgetParts).
func (h *History) use(ps *partSum) {
	if ps.round != h.round {
		ps.round = h.round
		h.usedWork += ps.work
	}
}

// runSum is a run's digest, the round it was last used in, and its elements' digests
// (nil for an element written in place), used whenever the run is.
type runSum struct {
	partSum
	elems [runLen]*partSum
}

// identity returns the part v is (no pointer for a value that has none).
func identity(v any) part {
	switch x := v.(type) {
	case string:
		return part{unsafe.Pointer(unsafe.StringData(x)), len(x), 's'}
	case map[string]any:
		return part{reflect.ValueOf(x).UnsafePointer(), len(x), 'm'}
	case []any:
		return part{unsafe.Pointer(unsafe.SliceData(x)), len(x), 'a'}
	case []map[string]any:
		return part{unsafe.Pointer(unsafe.SliceData(x)), len(x), 'o'}
	}
	return part{}
}

// runKey is a run of a container's elements by identity (zero past a short run's end);
// the pointers keep the elements alive while the run's digest is kept.
type runKey [runLen]part

// run returns the digest of the elements [lo, hi) of a container and the bytes its
// computation hashed (0 for a digest kept). A run is kept when each of its elements has
// an identity (no number, boolean, null or empty value among them).
func (h *History) run(each func(i int) any, lo, hi int) ([sha256.Size]byte, int) {
	var key runKey
	keyed := true
	for i := lo; i < hi && keyed; i++ {
		key[i-lo] = identity(each(i))
		keyed = key[i-lo].p != nil
	}
	if keyed {
		if s := h.runs[key]; s != nil {
			s.round = h.round
			for _, e := range s.elems[:hi-lo] {
				if e != nil {
					h.use(e)
				}
			}
			return s.sum, 0
		}
	}
	d := sha256.New()
	s := &runSum{partSum: partSum{round: h.round}}
	work := 0
	for i := lo; i < hi; i++ {
		var w int
		s.elems[i-lo], w = h.writeElem(d, each(i), true)
		work += w
	}
	d.Sum(s.sum[:0])
	if keyed {
		h.runs[key] = s
		h.added++
	}
	return s.sum, work
}

// digest returns the digest of v, a JSON value as ynotebook serves it, and the bytes its
// computation hashed (0 for a digest kept); it is kept when it took long, or if keep.
func (h *History) digest(v any, keep bool) (*partSum, int) {
	id := identity(v)
	if id.p != nil {
		if s := h.parts[id]; s != nil {
			h.use(s)
			return s, 0
		}
	}
	d := sha256.New()
	work := h.writePart(d, v)
	s := &partSum{round: h.round, work: work}
	d.Sum(s.sum[:0])
	if id.p != nil && (keep || work >= partCached) {
		h.parts[id] = s
		h.added++
		h.keptWork += work
		h.usedWork += work
	}
	return s, work
}

// writePart writes v's tagged encoding to d, its parts by their digests, and returns the
// bytes hashed.
func (h *History) writePart(d hash.Hash, v any) int {
	var n [binary.MaxVarintLen64]byte
	length := func(k int) { d.Write(n[:binary.PutUvarint(n[:], uint64(k))]) }
	elems := func(tag byte, count int, each func(i int) any) int {
		d.Write([]byte{tag})
		length(count)
		work := 1 + count
		if count < runMin {
			for i := range count {
				_, w := h.writeElem(d, each(i), false)
				work += w
			}
			return work
		}
		for lo := 0; lo < count; lo += runLen {
			s, w := h.run(each, lo, min(lo+runLen, count))
			h.writeSum(d, 'r', &s)
			work += sha256.Size + w
		}
		return work
	}
	switch x := v.(type) {
	case string:
		d.Write([]byte{'s'})
		length(len(x))
		d.Write(unsafe.Slice(unsafe.StringData(x), len(x)))
		return 1 + len(x)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		work := 0
		for _, k := range keys {
			length(len(k))
			d.Write([]byte(k))
			work += len(k)
		}
		return work + elems('m', len(keys), func(i int) any { return x[keys[i]] })
	case []any:
		return elems('a', len(x), func(i int) any { return x[i] })
	case []map[string]any:
		return elems('a', len(x), func(i int) any { return x[i] })
	}
	b, err := json.Marshal(v) // a number, a boolean, null
	if err != nil {
		b = []byte(err.Error())
	}
	d.Write([]byte{'j'})
	length(len(b))
	d.Write(b)
	return 1 + len(b)
}

// writeElem writes e, an element of a container, to d: in place when inline (no digest
// returned), by its digest otherwise, kept if keep (digest); it returns the bytes hashed.
func (h *History) writeElem(d hash.Hash, e any, keep bool) (*partSum, int) {
	if inline(e) {
		return nil, h.writePart(d, e)
	}
	s, w := h.digest(e, keep)
	h.writeSum(d, 'd', &s.sum)
	return s, sha256.Size + w
}

// writeSum writes a digest to d after its tag, through h's scratch (a slice made for a
// call through the hash.Hash interface is allocated: twice a run, at every version).
func (h *History) writeSum(d hash.Hash, tag byte, sum *[sha256.Size]byte) {
	h.scratch[0] = tag
	copy(h.scratch[1:], sum[:])
	d.Write(h.scratch[:])
}

// inlineMax is the longest string written in its container's encoding rather than by
// its digest.
const inlineMax = 64

// inline reports whether v is written in its container's encoding: a number, a boolean,
// null or a short string (their tags set them apart from a digest's 'd').
func inline(v any) bool {
	switch x := v.(type) {
	case string:
		return len(x) <= inlineMax
	case map[string]any, []any, []map[string]any:
		return false
	}
	return true
}

// sumOf is the digest of a JSON value made for it (a cell's object, a notebook's head),
// which no later snapshot shares: its parts' digests are kept, not its own.
func (h *History) sumOf(v any) [sha256.Size]byte {
	d := sha256.New()
	h.writePart(d, v)
	var sum [sha256.Size]byte
	d.Sum(sum[:0])
	return sum
}

// The digests kept but not used by the last round are dropped once those kept since the
// last sweep outnumber the ones it left (and at least sweepCount), or the values of the
// unused ones took sweepWork bytes to hash (a kept digest keeps its value alive): a sweep
// walks every digest kept, so that a version of a cell of 6,000 outputs, one changed,
// sweeps once in about 20 versions, not at each; a source of 25 MB typed into, or an
// output of 10 MB cleared, is let go at once (TestGoneValuesNotKept; red team of issue
// 42, pass 20c: a room kept its last cleared outputs); and what a room's unused digests
// keep alive stays about sweepWork.
const (
	sweepCount = 64
	sweepWork  = 256 << 10
)

// forgetParts drops the digests of the parts and runs this round did not use, when a
// sweep is due.
func (h *History) forgetParts() {
	if h.added < max(sweepCount, h.kept) && h.keptWork-h.usedWork < sweepWork {
		return
	}
	h.added = 0
	defer func() { h.kept = len(h.parts) + len(h.runs) }()
	for id, s := range h.parts {
		if s.round != h.round {
			delete(h.parts, id)
			h.keptWork -= s.work
		}
	}
	for k, s := range h.runs {
		if s.round != h.round {
			delete(h.runs, k)
		}
	}
}
