package yjs

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/lib0"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/yjstest"
)

// gcUpdate is an update of one GC struct of client over length clocks from clock, as a
// squashed store row writes deleted content.
func gcUpdate(client, clock, length uint64) []byte {
	var e lib0.Encoder
	e.VarUint(1)
	e.VarUint(1)
	e.VarUint(client)
	e.VarUint(clock)
	e.Uint8(kindGC)
	e.VarUint(length)
	e.VarUint(0)
	return e.Buf
}

// TestSkips: updates of a client with earlier clocks missing read as pycrdt 0.14.13 reads
// them (each step's map, text, state vector and pending state were read by pycrdt from
// the same bytes): a struct that depends on nothing missing integrates past the gap, the
// state vector stops at the gap, the missing structs fill it, a struct whose origin is
// in it waits, a delete of clocks in it waits for them, and a GC struct over a gap and
// known clocks fills only the gap.
func TestSkips(t *testing.T) {
	a, b, c := yjstest.MapSetAt(1, 0, "m", "a", 1.0), yjstest.MapSetAt(1, 1, "m", "b", 2.0), yjstest.MapSetAt(1, 2, "m", "c", 3.0)
	type step struct {
		update  []byte
		m       string
		text    string
		sv      map[uint64]uint64
		pending bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"map keys past a gap", []step{
			{c, `{"c":3}`, "", map[uint64]uint64{1: 0}, true},
			{b, `{"b":2,"c":3}`, "", map[uint64]uint64{1: 0}, true},
			{a, `{"a":1,"b":2,"c":3}`, "", map[uint64]uint64{1: 3}, false},
		}},
		{"text waits for its origin", []step{
			{yjstest.Char(1, "t", 2), `{}`, "", map[uint64]uint64{}, true},
			{yjstest.Char(1, "t", 0), `{}`, "x", map[uint64]uint64{1: 1}, true},
			{yjstest.Char(1, "t", 1), `{}`, "xxx", map[uint64]uint64{1: 3}, false},
		}},
		{"a delete of skipped clocks waits", []step{
			{c, `{"c":3}`, "", map[uint64]uint64{1: 0}, true},
			{yjstest.Deletes(1, 1, 1, 1), `{"c":3}`, "", map[uint64]uint64{1: 0}, true},
			{b, `{"c":3}`, "", map[uint64]uint64{1: 0}, true},
			{a, `{"a":1,"c":3}`, "", map[uint64]uint64{1: 3}, false},
		}},
		{"a GC struct over a gap and known clocks", []step{
			{c, `{"c":3}`, "", map[uint64]uint64{1: 0}, true},
			{gcUpdate(1, 0, 3), `{"c":3}`, "", map[uint64]uint64{1: 3}, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDoc()
			for i, s := range tc.steps {
				if dump := os.Getenv("SKIPS_DUMP"); dump != "" {
					t.Logf("%s %d %s", tc.name, i, hex.EncodeToString(s.update))
				}
				mustApply(t, d, s.update)
				m, _ := json.Marshal(asJSON(ToJSON(d.Map("m"))))
				if string(m) != s.m || d.Text("t").String() != s.text || !reflect.DeepEqual(d.StateVector(), s.sv) || d.HasPending() != s.pending {
					t.Fatalf("step %d: map %s, text %q, state vector %v, pending %v; want %s, %q, %v, %v",
						i, m, d.Text("t").String(), d.StateVector(), d.HasPending(), s.m, s.text, s.sv, s.pending)
				}
			}
			// The document encodes as it reads: a fresh one reads the same from its state.
			state, err := d.EncodeStateAsUpdate(nil)
			if err != nil {
				t.Fatal(err)
			}
			d2 := NewDoc()
			mustApply(t, d2, state)
			if !reflect.DeepEqual(d2.StateVector(), d.StateVector()) || d2.Text("t").String() != d.Text("t").String() {
				t.Fatalf("re-read: state vector %v, text %q", d2.StateVector(), d2.Text("t").String())
			}
		})
	}
}
