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
// digest only if they are equal. A change rebuilds only what it touched and shares the
// rest (snapshots are immutable), so a part whose digest took long to compute is kept by
// identity (its string's bytes, its map, its slice's elements) and not computed again:
// a tiny change of a cell holding 25 MB of source cost 0.23 s of a core to hash the cell
// whole at each version (red team of issue 39, pass 6, F7), and costs its own size now.

// partCached is the work, in bytes hashed, past which a part's digest is kept.
const partCached = 4 << 10

// part identifies a value by where it lives: its string's bytes, its map, its slice's
// elements; the pointer keeps it alive while its digest is kept.
type part struct {
	p    unsafe.Pointer
	n    int
	kind byte
}

// partSum is a part's digest and the round it was last used in.
type partSum struct {
	sum   [sha256.Size]byte
	round uint32
}

// digest returns the digest of v, a JSON value as ynotebook serves it, and the bytes its
// computation hashed (0 for a digest kept).
func (h *History) digest(v any) ([sha256.Size]byte, int) {
	var id part
	switch x := v.(type) {
	case string:
		id = part{unsafe.Pointer(unsafe.StringData(x)), len(x), 's'}
	case map[string]any:
		id = part{reflect.ValueOf(x).UnsafePointer(), len(x), 'm'}
	case []any:
		id = part{unsafe.Pointer(unsafe.SliceData(x)), len(x), 'a'}
	case []map[string]any:
		id = part{unsafe.Pointer(unsafe.SliceData(x)), len(x), 'o'}
	}
	if id.p != nil {
		if s := h.parts[id]; s != nil {
			s.round = h.round
			return s.sum, 0
		}
	}
	d := sha256.New()
	work := h.writePart(d, v)
	var sum [sha256.Size]byte
	d.Sum(sum[:0])
	if id.p != nil && work >= partCached {
		h.parts[id] = &partSum{sum: sum, round: h.round}
	}
	return sum, work
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
		for i := range count {
			e := each(i)
			if inline(e) {
				work += h.writePart(d, e)
				continue
			}
			s, w := h.digest(e)
			d.Write([]byte{'d'})
			d.Write(s[:])
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

// forgetParts drops the digests of the parts this round did not use.
func (h *History) forgetParts() {
	for id, s := range h.parts {
		if s.round != h.round {
			delete(h.parts, id)
		}
	}
}
