package heap

import (
	"runtime"
	"testing"
)

// TestReleaseAtBoundedRate: a release collects and returns the garbage; another within
// Every does nothing, however many ask (every user's large loads and reads ask).
func TestReleaseAtBoundedRate(t *testing.T) {
	last.Store(0)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	Release()
	runtime.ReadMemStats(&after)
	if after.NumForcedGC != before.NumForcedGC+1 {
		t.Fatalf("forced collections %d -> %d, want one", before.NumForcedGC, after.NumForcedGC)
	}
	for range 100 {
		Release()
	}
	runtime.ReadMemStats(&before)
	if before.NumForcedGC != after.NumForcedGC {
		t.Fatalf("forced collections %d -> %d within %v, want none", after.NumForcedGC, before.NumForcedGC, Every)
	}
}
