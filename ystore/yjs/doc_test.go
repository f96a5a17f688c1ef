package yjs

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/lib0"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/yjstest"
)

func loadChanges(t testing.TB) [][]byte {
	t.Helper()
	b, err := os.ReadFile("testdata/golden/changes.json")
	if err != nil {
		t.Fatal(err)
	}
	var hexes []string
	if err := json.Unmarshal(b, &hexes); err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(hexes))
	for i, h := range hexes {
		out[i] = mustHex(t, h)
	}
	return out
}

func TestTxnChanges(t *testing.T) {
	ups := loadChanges(t)
	d := NewDoc()
	m := d.Map("m")
	a := d.Array("a")
	txn := mustApply(t, d, ups[0])
	if c, ok := txn.Changed(m.Type()); !ok || !reflect.DeepEqual(c.Keys, []string{"cell"}) || c.Seq {
		t.Fatalf("update 0: m change %+v %v", c, ok)
	}
	if c, ok := txn.Changed(a.Type()); !ok || !c.Seq || len(c.Keys) != 0 {
		t.Fatalf("update 0: a change %+v %v", c, ok)
	}
	if len(txn.Changes()) != 2 {
		t.Fatalf("update 0: new nested types must not be reported: %+v", txn.Changes())
	}
	v, _ := m.Get("cell")
	cell := v.(*Map)
	v, _ = cell.Get("source")
	src := v.(*Text)

	txn = mustApply(t, d, ups[1])
	if ch := txn.Changes(); len(ch) != 1 || ch[0].Type != src.Type() || !ch[0].Seq {
		t.Fatalf("update 1: %+v", ch)
	}
	if p, key, ok := src.Type().Parent(); p != cell.Type() || key != "source" || !ok {
		t.Fatalf("source parent = %v %q %v", p, key, ok)
	}
	if p, key, ok := cell.Type().Parent(); p != m.Type() || key != "cell" || !ok {
		t.Fatalf("cell parent = %v %q %v", p, key, ok)
	}
	if src.String() != "abc" || src.Len() != 3 {
		t.Fatalf("source = %q", src.String())
	}

	txn = mustApply(t, d, ups[2])
	if ch := txn.Changes(); len(ch) != 1 || ch[0].Type != cell.Type() || !reflect.DeepEqual(ch[0].Keys, []string{"x"}) {
		t.Fatalf("update 2: %+v", ch)
	}

	second, _ := a.Get(1)
	txn = mustApply(t, d, ups[3])
	if ch := txn.Changes(); len(ch) != 1 || ch[0].Type != second.(*Map).Type() {
		t.Fatalf("update 3: %+v", ch)
	}
	if i := second.(*Map).Type().Index(); i != 1 {
		t.Fatalf("index of a[1] = %d", i)
	}

	txn = mustApply(t, d, ups[4])
	if ch := txn.Changes(); len(ch) != 1 || ch[0].Type != m.Type() || !reflect.DeepEqual(ch[0].Keys, []string{"cell"}) {
		t.Fatalf("update 4: %+v", ch)
	}
	if !cell.Type().Deleted() || !src.Type().Deleted() {
		t.Fatal("deleted cell not reported deleted")
	}
	for i, u := range ups {
		if txn := mustApply(t, d, u); !txn.Empty() {
			t.Fatalf("re-applying update %d reported %+v", i, txn.Changes())
		}
	}
}

func TestPendingStructs(t *testing.T) {
	ups := loadChanges(t)
	d := NewDoc()
	// Update 1 types into the text created by update 0: it must wait.
	txn := mustApply(t, d, ups[1])
	if !txn.Empty() || !d.HasPending() {
		t.Fatalf("later update first: changes %+v, pending %v", txn.Changes(), d.HasPending())
	}
	gaps := func(want ...Gap) {
		t.Helper()
		if got := d.Gaps(); !reflect.DeepEqual(got, want) {
			t.Fatalf("gaps %+v, want %+v", got, want)
		}
	}
	gaps(Gap{Client: 7, From: 0, To: 6}) // update 0 holds clocks 0-5
	// The pending structs are part of the encoded state, like Yjs does.
	state, err := d.EncodeStateAsUpdate(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Deleting the cell before it exists leaves a pending delete set; it also covers
	// clock 7 (update 2), so something stays pending until that arrives.
	mustApply(t, d, ups[4])
	gaps(Gap{Client: 7, From: 0, To: 6}) // the deletes of pending structs wait for those
	txn = mustApply(t, d, ups[0])
	if txn.Empty() || !d.HasPending() {
		t.Fatalf("dependency arrived: changes %+v, pending %v", txn.Changes(), d.HasPending())
	}
	gaps(Gap{Client: 7, From: 7, To: 8}) // update 2, clock 7, deleted by update 4
	mustApply(t, d, ups[3])
	gaps(Gap{Client: 7, From: 7, To: 8}) // update 3, clock 8, waits for it too
	mustApply(t, d, ups[2])
	if d.HasPending() {
		t.Fatal("pending after all updates")
	}
	gaps()
	if got := ToJSON(d.Map("m")); !reflect.DeepEqual(got, map[string]any{}) {
		t.Fatalf("m = %v", got)
	}
	d2 := NewDoc()
	mustApply(t, d2, state)
	if !d2.HasPending() {
		t.Fatal("pending structs were not encoded")
	}
	mustApply(t, d2, ups[0])
	v, _ := d2.Map("m").Get("cell")
	src, _ := v.(*Map).Get("source")
	if s := src.(*Text).String(); s != "abc" {
		t.Fatalf("source after pending = %q", s)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name     string
		in       []byte
		offset   int
		expected string
		err      error
	}{
		{"empty", nil, 0, "number of clients with structs", ErrUnexpectedEOF},
		{"struct count beyond input", []byte{1, 100, 1, 0}, 1, "number of structs", ErrUnexpectedEOF},
		{"unknown struct kind", []byte{1, 1, 1, 0, 11, 0}, 4, "struct kind 0-10", ErrInvalid},
		{"empty GC", []byte{1, 1, 1, 0, 0, 0, 0}, 4, "non-empty struct", ErrInvalid},
		{"unknown type ref", []byte{1, 1, 1, 0, 7, 1, 1, 'r', 7, 0}, 8, "type ref 0-6", ErrInvalid},
		{"bad json", []byte{1, 1, 1, 0, 2, 1, 1, 'r', 1, 1, '{', 0}, 9, "JSON string", ErrInvalid},
		{"bad utf-8", []byte{1, 1, 1, 0, 4, 1, 1, 'r', 1, 0xff, 0}, 8, "string content", ErrInvalid},
		{"clock overflow", []byte{1, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 2, 0}, 13, "clock range within 2^53", ErrOverflow},
		{"varuint overflow", []byte{1, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 2, "client id", ErrOverflow},
		{"missing delete set", []byte{0}, 1, "number of clients with deletes", ErrUnexpectedEOF},
		{"delete range overflow", []byte{0, 1, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 2}, 4, "delete range within 2^53", ErrOverflow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewDoc().ApplyUpdate(tt.in)
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, tt.err) || de.Offset != tt.offset || de.Expected != tt.expected {
				t.Fatalf("err = %v, want offset %d expected %q wrapping %v", err, tt.offset, tt.expected, tt.err)
			}
		})
	}
}

// TestAtomic applies every strict prefix of every golden update to a document that
// already holds state: each must fail and leave the document byte-for-byte unchanged.
func TestAtomic(t *testing.T) {
	base := loadChanges(t)
	for _, c := range loadGolden(t) {
		u := mustHex(t, c.Update)
		d := NewDoc()
		mustApply(t, d, base[0])
		before, err := d.EncodeStateAsUpdate(nil)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(u) {
			if _, err := d.ApplyUpdate(u[:n]); err == nil {
				t.Fatalf("%s: prefix of %d bytes applied", c.Name, n)
			}
			after, _ := d.EncodeStateAsUpdate(nil)
			if !bytes.Equal(before, after) || d.HasPending() {
				t.Fatalf("%s: failed prefix of %d bytes changed the document", c.Name, n)
			}
		}
	}
}

// TestOddInput feeds well-formed updates that refer to things that do not exist.
func TestOddInput(t *testing.T) {
	tests := []struct {
		name   string
		before []byte // applied first, if any
		in     []byte
	}{
		// Item whose parent ID names a deleted struct (1:0 "x", deleted): becomes GC (Yjs
		// and yrs).
		{"parent deleted", []byte{1, 1, 1, 0, 4, 1, 1, 'r', 1, 'x', 1, 1, 1, 0, 1}, []byte{1, 1, 2, 0, 4, 0, 1, 0, 1, 'y', 0}},
		// Item whose parent ID is unknown: pending.
		{"unknown parent", nil, []byte{1, 1, 2, 0, 4, 0, 9, 9, 1, 'y', 0}},
		// Item whose origin is far in the future of another client: pending.
		{"huge origin clock", nil, []byte{1, 1, 2, 0, 0x84, 9, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 'y', 0}},
		// Client starting at a huge clock: pending.
		{"huge first clock", nil, []byte{1, 1, 2, 0xff, 0xff, 0xff, 0xff, 0x0f, 4, 1, 1, 'r', 1, 'y', 0}},
		// Delete set over unknown structs: pending deletes.
		{"unknown deletes", nil, []byte{0, 1, 5, 1, 0xff, 0xff, 0xff, 0x0f, 0xff, 0xff, 0xff, 0x0f}},
		// Map entry on a text root and an item both with parentSub and root parent.
		{"map entry on text", nil, []byte{1, 1, 3, 0, 0x28, 1, 1, 't', 1, 'k', 1, 125, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDoc()
			if tt.before != nil {
				if _, err := d.ApplyUpdate(tt.before); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := d.ApplyUpdate(tt.in); err != nil {
				t.Fatal(err)
			}
			if _, err := d.ApplyUpdate(tt.in); err != nil {
				t.Fatal(err)
			}
			state, err := d.EncodeStateAsUpdate(nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := NewDoc().ApplyUpdate(state); err != nil {
				t.Fatalf("re-encoded state does not decode: %v", err)
			}
			_ = d.Text("r").String()
			_ = ToJSON(d)
		})
	}
}

// TestParentNotAType feeds an item whose parent is a live string: Yjs drops it silently,
// yrs refuses the update (pycrdt 0.14: "block parent <1#0> must be deleted or shared ref
// type"), and so does the document, and every update after it: a store rebuilt over its
// own history under one client id holds such items, and pycrdt-store's server cannot
// load that room any more.
func TestParentNotAType(t *testing.T) {
	d := NewDoc()
	_, err := d.ApplyUpdate([]byte{2, 1, 1, 0, 4, 1, 1, 'r', 1, 'x', 1, 2, 0, 4, 0, 1, 0, 1, 'y', 0})
	var pe *ParentError
	if !errors.As(err, &pe) || !errors.Is(err, ErrBadParent) || pe.ID != (ID{2, 0}) || pe.Parent != (ID{1, 0}) {
		t.Fatalf("err %v; want a *ParentError of 2:0 in 1:0", err)
	}
	if _, err := d.ApplyUpdate([]byte{1, 1, 3, 0, 4, 1, 1, 'r', 1, 'z', 0}); !errors.Is(err, ErrBadParent) {
		t.Fatalf("the next update: %v; want it refused with ErrBadParent", err)
	}
}

// TestManyWaitingClients applies one update in which 50k clients each wait for a
// missing struct: it must stay linear (Yjs filters its client list per waiting client).
func TestManyWaitingClients(t *testing.T) {
	const n = 50000
	var e lib0.Encoder
	e.VarUint(n)
	for c := uint64(1); c <= n; c++ {
		e.VarUint(1) // one struct
		e.VarUint(c) // client
		e.VarUint(0) // clock
		e.Uint8(infoOrigin | kindString)
		e.VarUint(c + n) // origin client: never sent
		e.VarUint(0)
		e.VarString("x")
	}
	e.VarUint(0)
	d := NewDoc()
	txn := mustApply(t, d, e.Buf)
	if !txn.Empty() || !d.HasPending() {
		t.Fatalf("changes %v, pending %v", txn.Changes(), d.HasPending())
	}
	if len(d.pending) != n {
		t.Fatalf("%d clients pending, want %d", len(d.pending), n)
	}
}

// TestLongPendingChain delivers 20k typing updates before the first one: they wait
// without quadratic cost and all integrate when it arrives.
func TestLongPendingChain(t *testing.T) {
	const n = 20000
	char := func(clock uint64) []byte { return yjstest.Char(1, "t", clock) }
	d := NewDoc()
	for c := uint64(1); c <= n; c++ {
		mustApply(t, d, char(c))
	}
	if !d.HasPending() || d.Text("t").Len() != 0 {
		t.Fatal("chain applied without its first update")
	}
	txn := mustApply(t, d, char(0))
	if d.HasPending() || d.Text("t").Len() != n+1 || txn.Empty() {
		t.Fatalf("after the first update: pending %v, length %d", d.HasPending(), d.Text("t").Len())
	}
}

// TestDeletedTypeAfterMerge deletes two maps that one client inserted in a row: their
// deleted items merge, and the storage of the right one must not be reused while the
// map still refers to it.
func TestDeletedTypeAfterMerge(t *testing.T) {
	var e lib0.Encoder
	e.VarUint(1) // one client
	e.VarUint(2) // two structs
	e.VarUint(1) // client
	e.VarUint(0) // clock
	e.Uint8(kindType)
	e.VarUint(1) // parent: root name
	e.VarString("a")
	e.VarUint(typeRef(KindMap))
	e.Uint8(kindType | infoOrigin)
	e.VarUint(1)
	e.VarUint(0)
	e.VarUint(typeRef(KindMap))
	e.VarUint(0) // no deletes
	d := NewDoc()
	mustApply(t, d, e.Buf)
	vals := d.Array("a").Values()
	if len(vals) != 2 {
		t.Fatalf("%d values, want 2", len(vals))
	}
	second := vals[1].(*Map).Type()
	mustApply(t, d, []byte{0, 1, 1, 1, 0, 2}) // delete both
	// Strings of another client, integrated after the merge.
	for i := range uint64(40) {
		mustApply(t, d, yjstest.Char(2, "t", i))
	}
	if parent, _, _ := second.Parent(); !second.Deleted() || parent != d.Array("a").Type() {
		t.Fatalf("deleted map: Deleted() = %v, parent %v", second.Deleted(), parent)
	}
}

// TestLongStructs checks the 32-bit struct lengths: longer structs are refused, and
// adjacent ones whose lengths add up to more stay apart.
func TestLongStructs(t *testing.T) {
	gc := func(clock, length uint64) []byte {
		var e lib0.Encoder
		e.VarUint(1) // one client
		e.VarUint(1) // one struct
		e.VarUint(1) // client
		e.VarUint(clock)
		e.Uint8(kindGC)
		e.VarUint(length)
		e.VarUint(0) // no deletes
		return e.Buf
	}
	_, err := NewDoc().ApplyUpdate(gc(0, maxLength+1))
	var de *DecodeError
	if !errors.As(err, &de) || !errors.Is(err, ErrOverflow) || de.Expected != "struct length within 2^32" {
		t.Fatalf("err = %v, want struct length within 2^32", err)
	}
	d := NewDoc()
	mustApply(t, d, gc(0, maxLength))
	mustApply(t, d, gc(maxLength, 5))
	if got := d.StateVector()[1]; got != maxLength+5 {
		t.Fatalf("state %d, want %d", got, uint64(maxLength)+5)
	}
	if n := d.clients[1].len(); n != 2 {
		t.Fatalf("%d structs, want 2", n)
	}
	state, err := d.EncodeStateAsUpdate(nil)
	if err != nil {
		t.Fatal(err)
	}
	d2 := NewDoc()
	mustApply(t, d2, state)
	if got := d2.StateVector()[1]; got != maxLength+5 {
		t.Fatalf("re-encoded state %d, want %d", got, uint64(maxLength)+5)
	}
}

// TestMapKeys decodes map keys: invalid UTF-8 is refused like any string, and the items
// under one key share its itemExt whether the key was new or known when decoded.
func TestMapKeys(t *testing.T) {
	_, err := NewDoc().ApplyUpdate([]byte{1, 1, 3, 0, 0x28, 1, 1, 'm', 1, 0xff, 1, 125, 1, 0})
	var de *DecodeError
	if !errors.As(err, &de) || !errors.Is(err, ErrInvalid) || de.Offset != 8 || de.Expected != "parent sub" {
		t.Fatalf("err = %v, want invalid parent sub at 8", err)
	}
	d := NewDoc()
	mustApply(t, d, []byte{1, 1, 3, 0, 0x28, 1, 1, 'm', 1, 'k', 1, 125, 1, 0})
	mustApply(t, d, []byte{1, 1, 3, 1, 0x28, 1, 1, 'n', 1, 'k', 1, 125, 2, 0})
	if v, _ := d.Map("n").Get("k"); v != int64(2) && v != float64(2) {
		t.Fatalf("n.k = %v, want 2", v)
	}
	structs := d.clients[3].from(0)
	if len(structs) != 2 || structs[0].ext != structs[1].ext || structs[1].sub() != "k" {
		t.Fatal("the items under one key do not share its itemExt")
	}
}

// TestYrsQuirks decodes updates yrs (pycrdt 0.14.13) writes that Yjs never does, and
// reads them as pycrdt does: an empty string item in a full state, and an insert whose
// right origin is its own id, which never integrates (nor does anything after it from
// its client). Made with:
//
//	d = Doc(client_id=5); t = d.get("t", type=Text); t += "ab"
//	t.insert(0, "# é😀\n"); del t[0:3]   # UTF-8 offsets: ends inside "é"
//	d.get_update()                          # full state
//	t.insert(0, "Z"); d.get_update()        # pycrdt's fresh Doc reads "ab", state {5: 8}
func TestYrsQuirks(t *testing.T) {
	tests := []struct {
		name, hex, text string
		state           uint64
	}{
		{"empty item", "010305000401017402616241050006c405070500000105010206", "ab", 8},
		{"self right origin", "010405000401017402616241050006c40507050000c405070508015a0105010206", "ab", 8},
		{"self reference", "010105008405000178" + "00", "", 0},
		{"later struct after a stuck one", "01020500c4050005000178040101740179" + "00", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDoc()
			if _, err := d.ApplyUpdate(mustHex(t, tt.hex)); err != nil {
				t.Fatal(err)
			}
			if got := d.Text("t").String(); got != tt.text {
				t.Fatalf("text %q, want %q", got, tt.text)
			}
			if got := d.StateVector()[5]; got != tt.state {
				t.Fatalf("state %d, want %d", got, tt.state)
			}
		})
	}
}

// TestManyKeysLinear: an update that sets many keys of one map costs time linear in
// them (its transaction's keys were inserted sorted, one by one: 150,000 keys took 15 s).
func TestManyKeysLinear(t *testing.T) {
	apply := func(n int) time.Duration {
		u := yjstest.Keys(1, "meta", n)
		d := NewDoc()
		start := time.Now()
		txn, err := d.ApplyUpdate(u)
		if err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(start)
		c, ok := txn.Changed(d.Map("meta").Type())
		if !ok || len(c.Keys) != n || !slices.IsSorted(c.Keys) {
			t.Fatalf("%d keys changed (sorted %v), want %d", len(c.Keys), slices.IsSorted(c.Keys), n)
		}
		return elapsed
	}
	apply(1000) // warm
	small, big := apply(20_000), apply(160_000)
	if ratio := float64(big) / float64(small); ratio > 24 { // linear: 8; quadratic: 64
		t.Errorf("8× the keys took %.1f× the time (%v, %v)", ratio, small, big)
	}
}

// TestRepeatedClient: an update that lists a client twice (its last list counts, as in
// Yjs) leaves the document's reused decoding storage sound: the updates after it read
// as they read alone, each decoded into storage of its own.
func TestRepeatedClient(t *testing.T) {
	// entry writes client's two structs setting keys of the root map "m", from clock 0
	entry := func(e *lib0.Encoder, client uint64, tag string) {
		e.VarUint(2)
		e.VarUint(client)
		e.VarUint(0)
		for _, k := range []string{"a", "b"} {
			e.Uint8(kindAny | infoParentSub)
			e.VarUint(1) // parent: a root, by name
			e.VarString("m")
			e.VarString(k + tag)
			e.VarUint(1)
			e.Any(tag)
		}
	}
	encode := func(deletes bool, entries ...uint64) []byte {
		var e lib0.Encoder
		e.VarUint(uint64(len(entries)))
		for i, c := range entries {
			entry(&e, c, string(rune('p'+i))+string(rune('0'+c)))
		}
		if !deletes {
			e.VarUint(0)
			return e.Buf
		}
		e.VarUint(uint64(len(entries)))
		for _, c := range entries {
			e.VarUint(c)
			e.VarUint(1)
			e.VarUint(c % 2) // one struct of c, the first or the second
			e.VarUint(1)
		}
		return e.Buf
	}
	for _, tc := range []struct {
		name string
		us   [][]byte
	}{
		{"structs", [][]byte{encode(false, 7, 7, 9), encode(false, 1, 2, 3)}},
		{"deletes", [][]byte{encode(true, 7, 7, 9), encode(true, 1, 2, 3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, want := NewDoc(), NewDoc()
			for _, u := range tc.us {
				mustApply(t, got, u)
			}
			for _, u := range tc.us {
				want.scratch = update{}
				mustApply(t, want, u)
			}
			g, w := got.Map("m").Type().mapJSON(), want.Map("m").Type().mapJSON()
			if !reflect.DeepEqual(g, w) {
				t.Errorf("applied one by one: %v\nwant (each decoded alone): %v", g, w)
			}
			if g, w := got.StateVector(), want.StateVector(); !reflect.DeepEqual(g, w) {
				t.Errorf("state %v, want %v", g, w)
			}
		})
	}
}
