// Package lib0 implements the lib0 binary primitives used by Yjs: varuint (LEB128),
// lib0's sign-magnitude varint, varstring, varuint8array and the Any encoding.
//
// Decoding is allocation-free for numbers, bounds every length prefix by the bytes that
// remain before allocating, and caps nesting depth. The package is pure: no I/O, no logging.
package lib0

import (
	"errors"
	"fmt"
)

// Sentinel errors wrapped by *DecodeError.
var (
	// ErrUnexpectedEOF reports input that ends in the middle of a value.
	ErrUnexpectedEOF = errors.New("unexpected end of input")
	// ErrOverflow reports a number wider than 53 bits (JavaScript's safe integer range).
	ErrOverflow = errors.New("integer overflow")
	// ErrInvalid reports a value that is well framed but not allowed (unknown tag, bad UTF-8, …).
	ErrInvalid = errors.New("invalid value")
	// ErrBudget reports input whose decoded values would take more memory than the
	// decoder's limit (SetLimit).
	ErrBudget = errors.New("decoded values past the memory limit")
)

// MaxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER, the cap for varuint and varint.
const MaxSafeInteger = 1<<53 - 1

// MaxDepth bounds the nesting of Any arrays and objects.
const MaxDepth = 1000

// DecodeError names the byte offset at which decoding failed and what was expected there.
type DecodeError struct {
	Offset   int
	Expected string
	Err      error
}

// Error implements error.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode at offset %d: expected %s: %v", e.Offset, e.Expected, e.Err)
}

// Unwrap returns the sentinel.
func (e *DecodeError) Unwrap() error { return e.Err }

// UndefinedType is the type of Undefined.
type UndefinedType struct{}

// Undefined is JavaScript's undefined as decoded from Any tag 127 or ContentJSON "undefined".
var Undefined = UndefinedType{}

// MarshalJSON renders undefined as null, the way JSON.stringify renders it inside arrays.
func (UndefinedType) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// Decoder reads lib0 values from a byte slice. The first error is sticky: later reads
// return zero values and Err reports the first failure.
type Decoder struct {
	buf []byte
	pos int
	err *DecodeError
	// spent is the memory the values decoded so far take (Spend), limit its bound
	// (0: none).
	spent, limit int64
}

// NewDecoder returns a decoder over buf.
func NewDecoder(buf []byte) *Decoder { return &Decoder{buf: buf} }

// Err returns the first decoding error or nil.
func (d *Decoder) Err() error {
	if d.err == nil {
		return nil
	}
	return d.err
}

// Pos returns the current byte offset.
func (d *Decoder) Pos() int { return d.pos }

// Remaining returns the number of unread bytes.
func (d *Decoder) Remaining() int { return len(d.buf) - d.pos }

// SetLimit bounds the memory the decoded values may take (Spent) at n bytes; 0: no
// bound. Past it the decoder fails with ErrBudget, before the value that would pass it
// is built.
func (d *Decoder) SetLimit(n int64) { d.limit = max(n, 0) }

// Spent returns the memory the values decoded so far take, as the callers of Spend and
// Any count it (Size's model).
func (d *Decoder) Spent() int64 { return d.spent }

// Spend counts n bytes of memory that a value decoded at offset off takes, and fails
// the decoder with ErrBudget when they pass its limit. It reports whether decoding may
// go on.
func (d *Decoder) Spend(off int, n int64, expected string) bool {
	d.spent += n
	if d.limit > 0 && d.spent > d.limit && d.err == nil {
		d.Fail(off, expected, ErrBudget)
	}
	return d.err == nil
}

// Fail records err at offset off unless an error is already recorded.
func (d *Decoder) Fail(off int, expected string, err error) {
	if d.err == nil {
		d.err = &DecodeError{Offset: off, Expected: expected, Err: err}
		d.pos = len(d.buf)
	}
}

// Uint8 reads one byte.
func (d *Decoder) Uint8(expected string) uint8 {
	if d.pos >= len(d.buf) {
		d.Fail(d.pos, expected, ErrUnexpectedEOF)
		return 0
	}
	b := d.buf[d.pos]
	d.pos++
	return b
}

// PeekUint8 returns the next byte without reading it; 0 at the end of the input.
func (d *Decoder) PeekUint8() uint8 {
	if d.pos >= len(d.buf) {
		return 0
	}
	return d.buf[d.pos]
}

// VarUint reads an unsigned LEB128 number of at most 53 bits.
func (d *Decoder) VarUint(expected string) uint64 {
	// most numbers (lengths, counts, small clocks) take one byte: inlined
	if p := d.pos; p < len(d.buf) && d.buf[p] < 0x80 {
		d.pos = p + 1
		return uint64(d.buf[p])
	}
	return d.varUint(expected)
}

// varUint is VarUint for a number of more than one byte, or at the end of the input.
func (d *Decoder) varUint(expected string) uint64 {
	start := d.pos
	var num uint64
	for shift := uint(0); ; shift += 7 {
		if d.pos >= len(d.buf) {
			d.Fail(start, expected, ErrUnexpectedEOF)
			return 0
		}
		b := d.buf[d.pos]
		d.pos++
		if shift > 49 {
			d.Fail(start, expected, ErrOverflow)
			return 0
		}
		num |= uint64(b&0x7f) << shift
		if num > MaxSafeInteger {
			d.Fail(start, expected, ErrOverflow)
			return 0
		}
		if b < 0x80 {
			return num
		}
	}
}

// VarInt reads a lib0 varint: the first byte holds a continue bit, a sign bit and six
// data bits, later bytes seven data bits each. It returns the magnitude and the sign
// separately so that -0 survives.
func (d *Decoder) VarInt(expected string) (mag uint64, negative bool) {
	start := d.pos
	if d.pos >= len(d.buf) {
		d.Fail(start, expected, ErrUnexpectedEOF)
		return 0, false
	}
	b := d.buf[d.pos]
	d.pos++
	num := uint64(b & 0x3f)
	negative = b&0x40 != 0
	if b&0x80 == 0 {
		return num, negative
	}
	for shift := uint(6); ; shift += 7 {
		if d.pos >= len(d.buf) {
			d.Fail(start, expected, ErrUnexpectedEOF)
			return 0, false
		}
		b = d.buf[d.pos]
		d.pos++
		if shift > 48 {
			d.Fail(start, expected, ErrOverflow)
			return 0, false
		}
		num |= uint64(b&0x7f) << shift
		if num > MaxSafeInteger {
			d.Fail(start, expected, ErrOverflow)
			return 0, false
		}
		if b < 0x80 {
			return num, negative
		}
	}
}

// Bytes reads n raw bytes without copying; the result aliases the input.
func (d *Decoder) Bytes(n uint64, expected string) []byte {
	if n > uint64(len(d.buf)-d.pos) {
		d.Fail(d.pos, expected, ErrUnexpectedEOF)
		return nil
	}
	b := d.buf[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return b
}

// VarUint8Array reads a varuint length and that many bytes, copied.
func (d *Decoder) VarUint8Array(expected string) []byte {
	n := d.VarUint(expected)
	b := d.Bytes(n, expected)
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// VarStringBytes reads a varstring and returns its UTF-8 bytes without copying or
// validation; the result aliases the input.
func (d *Decoder) VarStringBytes(expected string) []byte {
	n := d.VarUint(expected)
	return d.Bytes(n, expected)
}

// VarString reads a varuint length and that many bytes of UTF-8. Like lib0's fatal
// TextDecoder it rejects invalid UTF-8 with ErrInvalid.
func (d *Decoder) VarString(expected string) string {
	start := d.pos
	b := d.VarStringBytes(expected)
	if !validUTF8(b) {
		d.Fail(start, expected, ErrInvalid)
		return ""
	}
	return string(b)
}

// CountAtMost reads a varuint element count and rejects it with ErrUnexpectedEOF when
// fewer than count*minSize bytes remain, so callers can allocate count elements safely.
func (d *Decoder) CountAtMost(minSize int, expected string) int {
	start := d.pos
	n := d.VarUint(expected)
	if d.err != nil {
		return 0
	}
	if n > uint64(d.Remaining()/minSize) {
		d.Fail(start, expected, ErrUnexpectedEOF)
		return 0
	}
	return int(n)
}

// Float32 reads a big-endian IEEE 754 float32.
func (d *Decoder) Float32(expected string) float32 {
	b := d.Bytes(4, expected)
	if b == nil {
		return 0
	}
	return float32frombits(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
}

// Uint64BE reads a big-endian 64-bit word.
func (d *Decoder) Uint64BE(expected string) uint64 {
	b := d.Bytes(8, expected)
	if b == nil {
		return 0
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
