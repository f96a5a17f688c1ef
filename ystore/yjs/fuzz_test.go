package yjs

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/yjstest"
)

func addSeeds(f *testing.F) {
	for _, depth := range []int{3, MaxDepth, MaxDepth + 1} {
		f.Add(yjstest.Nested(1, "m", "k", depth))
		f.Add(yjstest.Nested(1, "a", "", depth))
	}
	for _, c := range loadGolden(f) {
		f.Add(mustHex(f, c.Update))
		f.Add(mustHex(f, c.State))
	}
	for i, s := range loadSessions(f) {
		if i%20 == 0 {
			f.Add(mustB64(f, s.Merged))
		}
	}
}

// allocLimit bounds what decoding or applying n bytes may allocate.
func allocLimit(n int) uint64 { return 1<<20 + 256*uint64(n) }

func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func FuzzDecodeUpdate(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var u *Update
		var err error
		if n := allocated(func() { u, err = DecodeUpdate(b) }); n > allocLimit(len(b)) {
			t.Fatalf("decoding %d bytes allocated %d", len(b), n)
		}
		if err == nil && u == nil {
			t.Fatal("nil update without error")
		}
	})
}

func FuzzApplyUpdate(f *testing.F) {
	addSeeds(f)
	base := loadChanges(f)[0]
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDoc()
		mustApply(t, d, base)
		before, err := d.EncodeStateAsUpdate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := allocated(func() { _, err = d.ApplyUpdate(b) }); n > allocLimit(len(b)+len(base)) {
			t.Fatalf("applying %d bytes allocated %d", len(b), n)
		}
		checkDepths(t, d)
		if errors.Is(err, ErrTooDeep) && d.failed == nil {
			if after, _ := d.EncodeStateAsUpdate(nil); !bytes.Equal(before, after) {
				t.Fatal("a refused update changed the document")
			}
		}
		if err != nil {
			return
		}
		state, err := d.EncodeStateAsUpdate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if txn := mustApply(t, d, b); !txn.Empty() && !d.HasPending() {
			t.Fatalf("re-applying changed %+v", txn.Changes())
		}
		again, err := d.EncodeStateAsUpdate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(state, again) {
			t.Fatal("re-applying changed the state")
		}
		d2 := NewDoc()
		mustApply(t, d2, state)
		_ = ToJSON(d2)
		for _, name := range d.Roots() {
			r, _ := d.Root(name)
			_ = ToJSON(r.Value())
		}
	})
}

// FuzzDeliveryOrder applies a recorded session in a fuzzed order with duplicates, then
// every update again in order (as yrs, the document may keep structs pending until they
// are delivered again), and checks that it converges to Yjs's JSON. Only sessions that
// Yjs reads as pycrdt does, and in which no surrogate pair was split (there even Yjs
// depends on the order, yjs#248), are delivered out of order.
func FuzzDeliveryOrder(f *testing.F) {
	sessions := loadSessions(f)
	f.Add(uint16(0), uint64(1))
	f.Add(uint16(7), uint64(99))
	f.Fuzz(func(t *testing.T, which uint16, seed uint64) {
		s := sessions[int(which)%len(sessions)]
		if b, _ := json.Marshal(s.JSON); !s.yjsRight || bytes.Contains(b, []byte("\uFFFD")) {
			return
		}
		ups := s.updates(t)
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		order := rng.Perm(len(ups))
		for range rng.IntN(len(ups) + 1) {
			order = slices.Insert(order, rng.IntN(len(order)+1), rng.IntN(len(ups)))
		}
		d := NewDoc()
		for _, i := range order {
			mustApply(t, d, ups[i])
		}
		for _, u := range ups {
			mustApply(t, d, u)
		}
		if got := rootJSON(d, sessionRoots); !reflect.DeepEqual(got, s.JSON) || d.HasPending() {
			t.Fatalf("session %d in order %v diverged (pending %v)", s.Seed, order, d.HasPending())
		}
	})
}

// FuzzNestedDelivery delivers a nest of up to MaxDepth+8 maps or arrays in up to three
// updates, in any order, one by one or as one batch: a nest within the bound applies
// whole, one beyond it is refused somewhere, and the document never holds a type deeper
// than MaxDepth nor needs integration's own guard.
func FuzzNestedDelivery(f *testing.F) {
	f.Add(uint16(MaxDepth), uint32(400|700<<16), uint8(5), false)
	f.Add(uint16(MaxDepth+1), uint32(1|500<<16), uint8(3), true)
	f.Add(uint16(MaxDepth+7), uint32(0), uint8(0), false)
	f.Fuzz(func(t *testing.T, depth uint16, cuts uint32, order uint8, arrays bool) {
		n := int(depth)%(MaxDepth+8) + 1
		root, key := "m", "k"
		if arrays {
			root, key = "a", ""
		}
		u := yjstest.Nested(3, root, key, n)
		at := []int{0, int(cuts&0xffff) % (n + 1), int(cuts>>16) % (n + 1), n}
		slices.Sort(at)
		var parts [][]byte
		for i := range 3 {
			if at[i] < at[i+1] {
				parts = append(parts, part(t, u, at[i], at[i+1]))
			}
		}
		rng := rand.New(rand.NewPCG(uint64(order), 0))
		rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		d := NewDoc()
		refused := 0
		apply := func(err error) {
			if err != nil && !errors.Is(err, ErrTooDeep) {
				t.Fatal(err)
			}
			if err != nil {
				refused++
			}
		}
		for _, p := range parts {
			_, err := d.ApplyUpdate(p)
			apply(err)
		}
		checkDepths(t, d)
		if d.failed != nil {
			t.Fatalf("integration met %v", d.failed)
		}
		var v any = d.Map(root)
		if arrays {
			v = d.Array(root)
		}
		got := jsonDepth(ToJSON(v))
		switch {
		case n <= MaxDepth && (refused > 0 || got != n || d.HasPending()):
			t.Fatalf("%d levels in %d parts: %d refused, %d applied, pending %v", n, len(parts), refused, got, d.HasPending())
		case n > MaxDepth && (refused == 0 || got > MaxDepth):
			t.Fatalf("%d levels in %d parts: %d refused, %d applied", n, len(parts), refused, got)
		}
	})
}
