package ynotebook

import (
	"runtime"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

// flatFixture is testdata/flat.json.gz (written by testdata/ynbench/gen.mjs --fixture): for
// each size, the state of a notebook of that many cells and structural edits on it.
type flatFixture map[string]struct {
	Base  []byte   `json:"base"`
	Edits [][]byte `json:"edits"`
}

// warmup is the number of edits not counted: the first insert grows the cells slice.
const warmup = 3

// editCost applies the edits to a notebook loaded with base, reading the snapshot after
// each when read is set, and returns the allocations and bytes allocated per edit.
func editCost(t *testing.T, base []byte, edits [][]byte, read bool) (allocs, bytes float64) {
	t.Helper()
	nb := New()
	if err := nb.Load([][]byte{base}); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	for i, u := range edits {
		if i == warmup {
			runtime.GC()
			runtime.ReadMemStats(&before)
		}
		if _, err := nb.Apply(u); err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
		if read {
			nb.Snapshot()
		}
	}
	runtime.ReadMemStats(&after)
	n := float64(len(edits) - warmup)
	return float64(after.Mallocs-before.Mallocs) / n, float64(after.TotalAlloc-before.TotalAlloc) / n
}

// TestStructuralEditsFlat requires a structural edit (insert, move or delete a cell, one
// update each) in a notebook of 5000 cells to cost at most a small constant times the
// same edit at 50 cells, counted in allocations and in bytes allocated, with and without a
// read of the snapshot after each edit (an edit after a read copies the path to the
// edited cell in the cell tree, O(log n) nodes).
func TestStructuralEditsFlat(t *testing.T) {
	var fx flatFixture
	if err := ysessions.ReadGzipJSON("testdata/flat.json.gz", &fx); err != nil {
		t.Fatal(err)
	}
	small, large := fx["50"], fx["5000"]
	for _, read := range []bool{false, true} {
		a50, b50 := editCost(t, small.Base, small.Edits, read)
		a5000, b5000 := editCost(t, large.Base, large.Edits, read)
		t.Logf("read %v: %.0f allocs, %.0f B per edit at 50 cells; %.0f allocs, %.0f B at 5000", read, a50, b50, a5000, b5000)
		if a5000 > 2*a50+20 {
			t.Errorf("read %v: %.0f allocations per edit at 5000 cells, %.0f at 50", read, a5000, a50)
		}
		if b5000 > 2*b50+4096 {
			t.Errorf("read %v: %.0f bytes allocated per edit at 5000 cells, %.0f at 50", read, b5000, b50)
		}
	}
}
