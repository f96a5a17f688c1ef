package yjs

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/lib0"
)

// anyStruct returns an update of one struct of client at clock: Any values inserted
// after origin, or at the start of the root array "a" when origin is nil.
func anyStruct(client, clock uint64, origin *ID, vals ...any) []byte {
	var e lib0.Encoder
	e.VarUint(1) // clients
	e.VarUint(1) // structs
	e.VarUint(client)
	e.VarUint(clock)
	if origin != nil {
		e.Uint8(kindAny | infoOrigin)
		e.VarUint(origin.Client)
		e.VarUint(origin.Clock)
	} else {
		e.Uint8(kindAny)
		e.VarUint(1)
		e.VarString("a")
	}
	e.VarUint(uint64(len(vals)))
	for _, v := range vals {
		e.Any(v)
	}
	e.VarUint(0) // no deletes
	return e.Buf
}

// TestDeferredValues: Any values kept as encoded until read (decodeContent) read the
// same whether they are read before, between or after the updates that cut them: parts
// set aside as pending and cut against each other (slicePending), a struct integrated
// past its known start (integrate's offset), merges, and the state encoded from a clock
// inside a struct.
func TestDeferredValues(t *testing.T) {
	v := make([]any, 7)
	for i := range v {
		v[i] = map[string]any{"n": float64(i), "s": fmt.Sprint("é", i), "a": []any{true, nil}}
	}
	x := &ID{2, 0}
	// client 2's value at the start; client 1's six after it, in two overlapping parts
	head := anyStruct(2, 0, nil, v[0])
	first := anyStruct(1, 0, x, v[1], v[2], v[3], v[4])
	second := anyStruct(1, 2, &ID{1, 1}, v[3], v[4], v[5], v[6])
	want := asJSON(v)
	prefix := NewDoc() // client 2's value and client 1's first three
	mustApply(t, prefix, head)
	mustApply(t, prefix, anyStruct(1, 0, x, v[1], v[2], v[3]))
	for _, tt := range []struct {
		name  string
		order [][]byte
		read  []bool // read the array after each update
	}{
		{"in order", [][]byte{head, first, second}, []bool{false, false, false}},
		{"in order, read between", [][]byte{head, first, second}, []bool{true, true, false}},
		{"pending, cut", [][]byte{second, first, head}, []bool{false, false, false}},
		{"pending, read at the end", [][]byte{second, first, head}, []bool{true, true, true}},
		{"overlap after", [][]byte{head, second, first}, []bool{false, false, false}},
		{"overlap after, read between", [][]byte{head, second, first}, []bool{true, true, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDoc()
			for i, u := range tt.order {
				mustApply(t, d, u)
				if tt.read[i] {
					d.Array("a").Values()
				}
			}
			if d.HasPending() {
				t.Fatal("pending after all updates")
			}
			if got := asJSON(ToJSON(d.Array("a"))); !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			// the state from inside client 1's values, encoded
			diff, err := d.EncodeStateAsUpdate(prefix.EncodeStateVector())
			if err != nil {
				t.Fatal(err)
			}
			u, err := DecodeUpdate(diff)
			if err != nil {
				t.Fatal(err)
			}
			var got []any
			for _, s := range u.Structs[1] {
				got = append(got, s.Content.([]any)...)
			}
			if !reflect.DeepEqual(asJSON(got), asJSON(v[4:])) {
				t.Fatalf("state from clock 3: %v, want %v", asJSON(got), asJSON(v[4:]))
			}
		})
	}
}
