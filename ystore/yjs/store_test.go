package yjs

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestClientStructs checks the chunked list of a client's structs against a plain slice
// under random inserts, removals and pushes, across chunk splits, merges and removals
// spanning chunks: the same structs in the same order, found by clock from any hint.
func TestClientStructs(t *testing.T) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 1))
		var cs clientStructs
		var want []*item
		check := func(op string) {
			t.Helper()
			got := slices.Collect(cs.all())
			if cs.len() != len(want) || !slices.Equal(got, want) {
				t.Fatalf("seed %d, %s: %d structs, want %d", seed, op, cs.len(), len(want))
			}
			for i, w := range want {
				if cs.at(i) != w {
					t.Fatalf("seed %d, %s: at(%d) is another struct", seed, op, i)
				}
			}
			if len(cs.chunks) != len(cs.starts) {
				t.Fatalf("seed %d, %s: %d chunks, %d starts", seed, op, len(cs.chunks), len(cs.starts))
			}
			for c, ch := range cs.chunks {
				if len(ch) == 0 || len(ch) > chunkMax {
					t.Fatalf("seed %d, %s: chunk %d holds %d", seed, op, c, len(ch))
				}
			}
		}
		// the structs are items of length 1 at clocks 0, 1, 2, … renumbered after each
		// operation, so that clocks stay contiguous
		renumber := func() {
			for i, it := range want {
				it.id.Clock, it.length = uint64(i), 1
			}
		}
		longest := 0
		for step := range 5000 {
			switch op := r.IntN(10); {
			case op < 5:
				it := &item{}
				cs.push(it)
				want = append(want, it)
			case op < 8:
				i := r.IntN(len(want) + 1)
				it := &item{}
				cs.insert(i, it)
				want = slices.Insert(want, i, it)
			case len(want) > 0:
				i := r.IntN(len(want))
				k := 1 + r.IntN(min(len(want)-i, 3))
				if r.IntN(50) == 0 {
					k = 1 + r.IntN(min(len(want)-i, 300)) // across chunks
				}
				cs.remove(i, k)
				want = slices.Delete(want, i, i+k)
			}
			renumber()
			check(fmt.Sprintf("step %d", step))
			longest = max(longest, len(want))
			if len(want) == 0 {
				continue
			}
			clock := uint64(r.IntN(len(want) + 2))
			wantI := -1
			if clock < uint64(len(want)) {
				wantI = int(clock)
			}
			hint := r.IntN(len(want)+2) - 1
			if got := cs.find(clock); got != wantI {
				t.Fatalf("seed %d: find(%d) = %d, want %d", seed, clock, got, wantI)
			}
			if got := cs.findNear(clock, hint); got != wantI {
				t.Fatalf("seed %d: findNear(%d, %d) = %d, want %d", seed, clock, hint, got, wantI)
			}
		}
		if longest < 3*chunkMax {
			t.Fatalf("seed %d: at most %d structs, not enough for several chunks", seed, longest)
		}
	}
}
