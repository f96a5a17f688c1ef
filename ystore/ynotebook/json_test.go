package ynotebook

import (
	"runtime"
	"strings"
	"testing"
)

// TestJSONHoldsItsSizeOnce: a notebook of 32 MB of source is encoded into one buffer of
// its size; encoding/json allocated about 3 times that (a buffer grown by doubling, then
// copied out), for each read and twice for each comparison with the file (red team of
// issue 39, pass 9). Comparing two such notebooks builds neither's JSON.
func TestJSONHoldsItsSizeOnce(t *testing.T) {
	const size = 32 << 20
	a := NewSnapshot(Cell{ID: "c1", CellType: CellCode, Source: strings.Repeat("x", size)})
	b := NewSnapshot(Cell{ID: "c1", CellType: CellCode, Source: strings.Repeat("x", size)})
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	var body []byte
	if n := allocated(func() {
		var err error
		if body, err = a.JSON(); err != nil {
			t.Error(err)
		}
	}); n > size+size/8 {
		t.Errorf("the JSON of %d MB allocated %d MB", size>>20, n>>20)
	}
	if len(body) < size {
		t.Fatalf("JSON of %d bytes", len(body))
	}
	equal := true
	if n := allocated(func() { equal = Equivalent(a, b) }); n > 1<<20 {
		t.Errorf("comparing two notebooks of %d MB allocated %d MB", size>>20, n>>20)
	}
	if !equal {
		t.Error("two notebooks of the same cell are not equivalent")
	}
}
