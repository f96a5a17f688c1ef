package lib0

import (
	"errors"
	"testing"
)

// FuzzDecoder reads arbitrary bytes as each lib0 value: it never panics, stops at the
// end of the input, and what decodes re-encodes to something that decodes the same.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{125, 0x40})
	f.Add([]byte{118, 1, 1, 'k', 117, 2, 120, 116, 1, 7})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{123, 0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(b)
		v := d.Any("v")
		if err := d.Err(); err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset < 0 || de.Offset > len(b) {
				t.Fatalf("error %v", err)
			}
		} else {
			var e Encoder
			e.Any(v)
			d2 := NewDecoder(e.Buf)
			v2 := d2.Any("v")
			if d2.Err() != nil || d2.Remaining() != 0 {
				t.Fatalf("re-encoded %#v does not decode: %v", v, d2.Err())
			}
			var e2 Encoder
			e2.Any(v2)
			if string(e.Buf) != string(e2.Buf) {
				t.Fatalf("unstable encoding %x vs %x", e.Buf, e2.Buf)
			}
		}
		for _, read := range []func(*Decoder){
			func(d *Decoder) { d.VarUint("n") },
			func(d *Decoder) { d.VarInt("n") },
			func(d *Decoder) { d.VarString("s") },
			func(d *Decoder) { d.VarUint8Array("b") },
		} {
			d := NewDecoder(b)
			for d.Remaining() > 0 && d.Err() == nil {
				read(d)
			}
			if d.Pos() > len(b) {
				t.Fatal("read past the end")
			}
		}
	})
}
