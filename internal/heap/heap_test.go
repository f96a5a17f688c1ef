package heap

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestReleaseAtBoundedRate: a release collects twice (a pool's buffers outlive one
// collection) and returns the garbage; another within
// Every does nothing, however many ask (every user's large loads and reads ask).
func TestReleaseAtBoundedRate(t *testing.T) {
	last.Store(0)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	Release()
	runtime.ReadMemStats(&after)
	if after.NumForcedGC != before.NumForcedGC+2 {
		t.Fatalf("forced collections %d -> %d, want two", before.NumForcedGC, after.NumForcedGC)
	}
	for range 100 {
		Release()
	}
	runtime.ReadMemStats(&before)
	if before.NumForcedGC != after.NumForcedGC {
		t.Fatalf("forced collections %d -> %d within %v, want none", after.NumForcedGC, before.NumForcedGC, Every)
	}
}

// TestReleaseEmptiesPools: the buffer encoding/json keeps in its pool after encoding a
// large answer (twice its size at most) is returned by one release; one collection left
// it in the pool's victim cache.
func TestReleaseEmptiesPools(t *testing.T) {
	last.Store(0)
	Release()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	if _, err := json.Marshal(strings.Repeat("x", 32<<20)); err != nil {
		t.Fatal(err)
	}
	last.Store(0)
	Release()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if held := int64(after.HeapAlloc) - int64(base.HeapAlloc); held > 8<<20 {
		t.Fatalf("%d MB still held after a release", held>>20)
	}
}
