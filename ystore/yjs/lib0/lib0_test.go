package lib0

import (
	"errors"
	"math"
	"reflect"
	"runtime"
	"testing"
)

func TestVarUint(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want uint64
		err  error
		pos  int
	}{
		{"zero", []byte{0}, 0, nil, 1},
		{"one byte max", []byte{0x7f}, 127, nil, 1},
		{"two bytes", []byte{0x80, 0x01}, 128, nil, 2},
		{"non-minimal", []byte{0x81, 0x80, 0x00}, 1, nil, 3},
		{"max safe", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f}, MaxSafeInteger, nil, 8},
		{"2^53", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10}, 0, ErrOverflow, 0},
		{"nine bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 0, ErrOverflow, 0},
		{"empty", nil, 0, ErrUnexpectedEOF, 0},
		{"truncated", []byte{0x80}, 0, ErrUnexpectedEOF, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(tt.in)
			got := d.VarUint("n")
			if !errors.Is(d.Err(), tt.err) || (tt.err == nil) != (d.Err() == nil) {
				t.Fatalf("err = %v, want %v", d.Err(), tt.err)
			}
			if tt.err != nil {
				var de *DecodeError
				if !errors.As(d.Err(), &de) || de.Offset != tt.pos || de.Expected != "n" {
					t.Fatalf("error %#v, want offset %d", d.Err(), tt.pos)
				}
				return
			}
			if got != tt.want || d.Pos() != tt.pos {
				t.Fatalf("got %d at %d, want %d at %d", got, d.Pos(), tt.want, tt.pos)
			}
			var e Encoder
			e.VarUint(got)
			if back := NewDecoder(e.Buf).VarUint("n"); back != got {
				t.Fatalf("round trip %d -> %x -> %d", got, e.Buf, back)
			}
		})
	}
}

func TestVarInt(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		mag  uint64
		neg  bool
		err  error
	}{
		{"zero", []byte{0x00}, 0, false, nil},
		{"negative zero", []byte{0x40}, 0, true, nil},
		{"63", []byte{0x3f}, 63, false, nil},
		{"-63", []byte{0x7f}, 63, true, nil},
		{"64", []byte{0x80, 0x01}, 64, false, nil},
		{"-64", []byte{0xc0, 0x01}, 64, true, nil},
		{"2^31-1", []byte{0xbf, 0xff, 0xff, 0xff, 0x0f}, math.MaxInt32, false, nil},
		{"max safe", []byte{0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f}, MaxSafeInteger, false, nil},
		{"2^55-1", []byte{0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, 0, false, ErrOverflow},
		{"2^53", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 0, false, ErrOverflow},
		{"empty", nil, 0, false, ErrUnexpectedEOF},
		{"truncated", []byte{0xc0}, 0, false, ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(tt.in)
			mag, neg := d.VarInt("i")
			if !errors.Is(d.Err(), tt.err) || (tt.err == nil) != (d.Err() == nil) {
				t.Fatalf("err = %v, want %v", d.Err(), tt.err)
			}
			if tt.err != nil {
				return
			}
			if mag != tt.mag || neg != tt.neg || d.Remaining() != 0 {
				t.Fatalf("got %d,%v (rest %d), want %d,%v", mag, neg, d.Remaining(), tt.mag, tt.neg)
			}
			var e Encoder
			e.VarInt(mag, neg)
			if string(e.Buf) != string(tt.in) {
				t.Fatalf("encode: got %x want %x", e.Buf, tt.in)
			}
		})
	}
}

func TestVarString(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
		err  error
	}{
		{"empty", []byte{0}, "", nil},
		{"ascii", []byte{2, 'h', 'i'}, "hi", nil},
		{"emoji", []byte{4, 0xf0, 0x9f, 0x98, 0x80}, "😀", nil},
		{"bom kept", []byte{3, 0xef, 0xbb, 0xbf}, "\ufeff", nil},
		{"length beyond input", []byte{5, 'a'}, "", ErrUnexpectedEOF},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, "", ErrUnexpectedEOF},
		{"invalid utf-8", []byte{1, 0xff}, "", ErrInvalid},
		{"surrogate", []byte{3, 0xed, 0xa0, 0x80}, "", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(tt.in)
			got := d.VarString("s")
			if !errors.Is(d.Err(), tt.err) || (tt.err == nil) != (d.Err() == nil) {
				t.Fatalf("err = %v, want %v", d.Err(), tt.err)
			}
			if got != tt.want {
				t.Fatalf("got %q want %q", got, tt.want)
			}
		})
	}
}

func TestAny(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want any
		err  error
	}{
		{"undefined", []byte{127}, Undefined, nil},
		{"null", []byte{126}, nil, nil},
		{"int", []byte{125, 0x2a}, 42.0, nil},
		{"negative zero", []byte{125, 0x40}, math.Copysign(0, -1), nil},
		{"float32", []byte{124, 0x3f, 0x00, 0x00, 0x00}, 0.5, nil},
		{"float64", []byte{123, 0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a}, 0.1, nil},
		{"bigint", []byte{122, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}, int64(-2), nil},
		{"false", []byte{121}, false, nil},
		{"true", []byte{120}, true, nil},
		{"string", []byte{119, 1, 'x'}, "x", nil},
		{"object", []byte{118, 1, 1, 'k', 126}, map[string]any{"k": nil}, nil},
		{"array", []byte{117, 2, 120, 121}, []any{true, false}, nil},
		{"uint8array", []byte{116, 2, 1, 2}, []byte{1, 2}, nil},
		{"unknown tag", []byte{115}, nil, ErrInvalid},
		{"array longer than input", []byte{117, 100, 120}, nil, ErrUnexpectedEOF},
		{"object longer than input", []byte{118, 3, 1, 'k', 126}, nil, ErrUnexpectedEOF},
		{"truncated float64", []byte{123, 0}, nil, ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(tt.in)
			got := d.Any("v")
			if !errors.Is(d.Err(), tt.err) || (tt.err == nil) != (d.Err() == nil) {
				t.Fatalf("err = %v, want %v", d.Err(), tt.err)
			}
			if tt.err != nil {
				return
			}
			if !reflect.DeepEqual(got, tt.want) || math.Signbit(asFloat(got)) != math.Signbit(asFloat(tt.want)) {
				t.Fatalf("got %#v want %#v", got, tt.want)
			}
			var e Encoder
			e.Any(got)
			if string(e.Buf) != string(tt.in) {
				t.Fatalf("encode: got %x want %x", e.Buf, tt.in)
			}
		})
	}
}

func asFloat(v any) float64 {
	f, _ := v.(float64)
	return f
}

func TestAnyDepth(t *testing.T) {
	deep := make([]byte, 0, 2*MaxDepth+3)
	for range MaxDepth + 1 {
		deep = append(deep, TagArray, 1)
	}
	deep = append(deep, TagNull)
	d := NewDecoder(deep)
	d.Any("v")
	if !errors.Is(d.Err(), ErrOverflow) {
		t.Fatalf("err = %v, want ErrOverflow", d.Err())
	}
}

// TestAnyAllocation decodes nested arrays and objects that each claim more elements than
// the input holds: what is allocated stays linear in the input, not depth × input.
func TestAnyAllocation(t *testing.T) {
	const n = 1600
	claimAll := func(tag byte) []byte {
		b := make([]byte, 0, n)
		for len(b) < n {
			b = append(b, tag, 0x7f) // 127 elements, then the next nested container
		}
		return b
	}
	objects := make([]byte, 0, n)
	for len(objects) < n {
		objects = append(objects, TagObject, 0x7f, 1, 'k') // 127 entries, key "k"
	}
	for _, tt := range []struct {
		name string
		in   []byte
	}{
		{"arrays", claimAll(TagArray)},
		{"objects", objects},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		d := NewDecoder(tt.in)
		d.Any("v")
		runtime.ReadMemStats(&after)
		if d.Err() == nil {
			t.Fatalf("%s: a truncated value decoded", tt.name)
		}
		if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(96*len(tt.in)); got > limit {
			t.Errorf("%s: decoding %d bytes allocated %d, more than %d", tt.name, len(tt.in), got, limit)
		}
	}
}

func TestEncodeNumbers(t *testing.T) {
	tests := []struct {
		in  float64
		tag byte
	}{
		{1, TagInteger},
		{-2147483647, TagInteger},
		{2147483648, TagFloat32},
		{1 << 40, TagFloat32},
		{1<<40 + 1, TagFloat64},
		{0.1, TagFloat64},
		{math.NaN(), TagFloat64},
	}
	for _, tt := range tests {
		var e Encoder
		e.Any(tt.in)
		if e.Buf[0] != tt.tag {
			t.Errorf("%v: tag %d want %d", tt.in, e.Buf[0], tt.tag)
		}
	}
}
