package lib0

import (
	"maps"
	"math"
	"slices"
	"unicode/utf8"
)

// Any tags as written by lib0's writeAny.
const (
	TagUndefined  = 127
	TagNull       = 126
	TagInteger    = 125
	TagFloat32    = 124
	TagFloat64    = 123
	TagBigInt     = 122
	TagFalse      = 121
	TagTrue       = 120
	TagString     = 119
	TagObject     = 118
	TagArray      = 117
	TagUint8Array = 116
)

// smallInts are the values of integers 0 to 1023 boxed once: such numbers (counts,
// sizes, indexes) are most of those decoded, and each would cost an allocation.
var smallInts = func() (t [1024]any) {
	for i := range t {
		t[i] = float64(i)
	}
	return t
}()

// maxPrealloc is the most elements an array or object is given room for before they
// are decoded.
const maxPrealloc = 8

// What a decoded Any value takes in memory, as Size and Any count it: a model of the Go
// values built (64-bit), an upper estimate within a small factor. A value held in a slice
// or a map takes a slot there (SlotBytes), counted by its container.
const (
	SlotBytes     = 16 // an interface value
	boxedBytes    = 8  // a float64 or int64 boxed (integers 0-1023 are not: smallInts)
	stringBytes   = 16 // a string's header, boxed
	sliceBytes    = 24 // a slice's header, boxed
	mapBytes      = 48 // a map's header
	mapEntryBytes = 48 // a map entry: key header, value slot, control and load factor
)

// Size returns what the decoded Any value v takes in memory beyond its slot, by the
// model Any counts with; the values of JSON (encoding/json's any) are measured the same
// way. It recurses as deep as v nests (Any bounds it at MaxDepth).
func Size(v any) int64 {
	switch v := v.(type) {
	case float64:
		if v >= 0 && v < float64(len(smallInts)) && v == math.Trunc(v) {
			return 0
		}
		return boxedBytes
	case int64:
		return boxedBytes
	case string:
		return stringBytes + int64(len(v))
	case []byte:
		return sliceBytes + int64(len(v))
	case []any:
		n := sliceBytes + SlotBytes*int64(len(v))
		for _, e := range v {
			n += Size(e)
		}
		return n
	case map[string]any:
		n := int64(mapBytes)
		for k, e := range v {
			n += mapEntryBytes + int64(len(k)) + Size(e)
		}
		return n
	}
	return 0 // nil, Undefined, bool: no memory of their own
}

// prealloc returns the capacity to make a container of n elements with: n under a
// limit, which counted them; else at most maxPrealloc.
func (d *Decoder) prealloc(n int) int {
	if d.limit > 0 {
		return n
	}
	return min(n, maxPrealloc)
}

func validUTF8(b []byte) bool { return utf8.Valid(b) }

func float32frombits(b uint32) float32 { return math.Float32frombits(b) }

// Any reads one lib0 Any value. Results: Undefined, nil, float64 (tags 125, 124, 123),
// int64 (bigint), bool, string, map[string]any, []any, []byte.
func (d *Decoder) Any(expected string) any {
	return d.anyDepth(expected, 0)
}

func (d *Decoder) anyDepth(expected string, depth int) any {
	start := d.pos
	tag := d.Uint8(expected)
	if d.err != nil {
		return nil
	}
	switch tag {
	case TagUndefined:
		return Undefined
	case TagNull:
		return nil
	case TagInteger:
		mag, neg := d.VarInt(expected)
		if !neg && mag < uint64(len(smallInts)) {
			return smallInts[mag]
		}
		f := float64(mag)
		if neg {
			f = -f
		}
		d.Spend(start, boxedBytes, expected)
		return f
	case TagFloat32:
		f := float64(d.Float32(expected))
		d.Spend(start, Size(f), expected)
		return f
	case TagFloat64:
		f := math.Float64frombits(d.Uint64BE(expected))
		d.Spend(start, Size(f), expected)
		return f
	case TagBigInt:
		d.Spend(start, boxedBytes, expected)
		return int64(d.Uint64BE(expected))
	case TagFalse:
		return false
	case TagTrue:
		return true
	case TagString:
		b := d.VarStringBytes(expected)
		if !d.Spend(start, stringBytes+int64(len(b)), expected) {
			return nil
		}
		if !validUTF8(b) {
			d.Fail(start, expected, ErrInvalid)
			return nil
		}
		return string(b)
	case TagObject, TagArray:
		if depth >= MaxDepth {
			d.Fail(start, expected, ErrOverflow)
			return nil
		}
		// The count bounds what is allocated up front only loosely (each element takes
		// at least one byte): nested containers that each claim the rest of the input
		// would allocate depth × input. Under a limit (SetLimit) a container's memory is
		// counted whole before it is made, so it is made whole: growing it would leave
		// garbage of its size several times over, past what is counted. Without one,
		// its capacity grows with what is decoded. Decoding stops at the first error.
		if tag == TagArray {
			n := d.CountAtMost(1, expected)
			if !d.Spend(start, sliceBytes+SlotBytes*int64(n), expected) {
				return nil
			}
			arr := make([]any, 0, d.prealloc(n))
			for range n {
				v := d.anyDepth(expected, depth+1)
				if d.err != nil {
					return nil
				}
				arr = append(arr, v)
			}
			return arr
		}
		n := d.CountAtMost(2, expected)
		if !d.Spend(start, mapBytes+mapEntryBytes*int64(n), expected) {
			return nil
		}
		obj := make(map[string]any, d.prealloc(n))
		for range n {
			kstart := d.pos
			kb := d.VarStringBytes(expected)
			if !d.Spend(kstart, int64(len(kb)), expected) {
				return nil
			}
			if !validUTF8(kb) {
				d.Fail(kstart, expected, ErrInvalid)
				return nil
			}
			k := string(kb)
			v := d.anyDepth(expected, depth+1)
			if d.err != nil {
				return nil
			}
			obj[k] = v
		}
		return obj
	case TagUint8Array:
		b := d.VarUint8Array(expected)
		d.Spend(start, sliceBytes+int64(len(b)), expected)
		return b
	}
	d.Fail(start, expected, ErrInvalid)
	return nil
}

// Encoder appends lib0 values to a byte slice.
type Encoder struct {
	Buf []byte
}

// Uint8 appends one byte.
func (e *Encoder) Uint8(b uint8) { e.Buf = append(e.Buf, b) }

// VarUint appends an unsigned LEB128 number.
func (e *Encoder) VarUint(n uint64) {
	for n >= 0x80 {
		e.Buf = append(e.Buf, byte(n)|0x80)
		n >>= 7
	}
	e.Buf = append(e.Buf, byte(n))
}

// VarInt appends a lib0 varint with magnitude mag and the given sign (-0 allowed).
func (e *Encoder) VarInt(mag uint64, negative bool) {
	b := byte(mag & 0x3f)
	if negative {
		b |= 0x40
	}
	mag >>= 6
	if mag > 0 {
		b |= 0x80
	}
	e.Buf = append(e.Buf, b)
	for mag > 0 {
		c := byte(mag & 0x7f)
		mag >>= 7
		if mag > 0 {
			c |= 0x80
		}
		e.Buf = append(e.Buf, c)
	}
}

// VarString appends a varuint byte length and the UTF-8 bytes of s.
func (e *Encoder) VarString(s string) {
	e.VarUint(uint64(len(s)))
	e.Buf = append(e.Buf, s...)
}

// VarUint8Array appends a varuint length and b.
func (e *Encoder) VarUint8Array(b []byte) {
	e.VarUint(uint64(len(b)))
	e.Buf = append(e.Buf, b...)
}

func (e *Encoder) uint64BE(v uint64) {
	e.Buf = append(e.Buf, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// Any appends v with lib0's writeAny rules. Numbers follow JavaScript: integers with
// magnitude up to 2^31-1 as varint, values exact in float32 as float32, else float64.
// Accepted types: Undefined, nil, bool, float64, float32, int, int64 (bigint), string,
// []byte, []any, map[string]any (keys in sorted order). Other types encode as undefined.
func (e *Encoder) Any(v any) {
	switch x := v.(type) {
	case nil:
		e.Uint8(TagNull)
	case bool:
		if x {
			e.Uint8(TagTrue)
		} else {
			e.Uint8(TagFalse)
		}
	case float64:
		e.number(x)
	case float32:
		e.number(float64(x))
	case int:
		e.number(float64(x))
	case int64:
		e.Uint8(TagBigInt)
		e.uint64BE(uint64(x))
	case string:
		e.Uint8(TagString)
		e.VarString(x)
	case []byte:
		e.Uint8(TagUint8Array)
		e.VarUint8Array(x)
	case []any:
		e.Uint8(TagArray)
		e.VarUint(uint64(len(x)))
		for _, el := range x {
			e.Any(el)
		}
	case map[string]any:
		e.Uint8(TagObject)
		e.VarUint(uint64(len(x)))
		for _, k := range sortedKeys(x) {
			e.VarString(k)
			e.Any(x[k])
		}
	default:
		e.Uint8(TagUndefined)
	}
}

func (e *Encoder) number(f float64) {
	switch {
	case f == math.Trunc(f) && math.Abs(f) <= math.MaxInt32:
		e.Uint8(TagInteger)
		e.VarInt(uint64(math.Abs(f)), math.Signbit(f))
	case float64(float32(f)) == f:
		e.Uint8(TagFloat32)
		b := math.Float32bits(float32(f))
		e.Buf = append(e.Buf, byte(b>>24), byte(b>>16), byte(b>>8), byte(b))
	default:
		e.Uint8(TagFloat64)
		e.uint64BE(math.Float64bits(f))
	}
}

func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}
