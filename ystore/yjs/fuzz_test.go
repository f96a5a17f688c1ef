package yjs

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"testing"
)

func addSeeds(f *testing.F) {
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
		var err error
		if n := allocated(func() { _, err = d.ApplyUpdate(b) }); n > allocLimit(len(b)+len(base)) {
			t.Fatalf("applying %d bytes allocated %d", len(b), n)
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

// FuzzDeliveryOrder applies a recorded session in a fuzzed order with duplicates and
// checks that the document converges to Yjs's JSON. Sessions in which a surrogate pair
// was split are left out: there even Yjs depends on the order (yjs#248).
func FuzzDeliveryOrder(f *testing.F) {
	sessions := loadSessions(f)
	f.Add(uint16(0), uint64(1))
	f.Add(uint16(7), uint64(99))
	f.Fuzz(func(t *testing.T, which uint16, seed uint64) {
		s := sessions[int(which)%len(sessions)]
		if b, _ := json.Marshal(s.JSON); bytes.Contains(b, []byte("\uFFFD")) {
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
		if got := rootJSON(d, sessionRoots); !reflect.DeepEqual(got, s.JSON) {
			t.Fatalf("session %d in order %v diverged", s.Seed, order)
		}
	})
}
