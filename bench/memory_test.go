package bench

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// TestMemoryHistory measures, for docs/BENCHMARKS.md ("serve: memory against history"),
// the live heap of one notebook (ynotebook.Notebook, what serve holds per room) loaded
// from the first N updates of the corpus's history (two people editing one notebook,
// at most 60 cells kept), against its live content (the notebook's JSON) and its merged
// state (Y.encodeStateAsUpdate), and loaded again from that merged state alone: how
// memory grows with history where content does not. Run only with YMEM=1 (YMEM_PREFIXES:
// the comma-separated N; BENCH_CORPUS: the corpus directory, bench/run.sh or
// `node testdata/ysessions/gen.mjs --bench --no-state --seed 7 --updates 100000 --out DIR`).
func TestMemoryHistory(t *testing.T) {
	if os.Getenv("YMEM") == "" {
		t.Skip("set YMEM=1 to measure")
	}
	frames := corpus(t, "updates.bin")
	prefixes := []int{1_000, 3_000, 10_000, 30_000, 100_000}
	if v := os.Getenv("YMEM_PREFIXES"); v != "" {
		prefixes = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("YMEM_PREFIXES: %v", err)
			}
			prefixes = append(prefixes, n)
		}
	}
	t.Log("| updates | notebook JSON | merged state | heap, from the updates | heap, from the merged state | heap / JSON |")
	t.Log("|---|---|---|---|---|---|")
	for _, n := range prefixes {
		n = min(n, len(frames))
		nb, heap := loaded(t, frames[:n])
		js, err := nb.Snapshot().JSON()
		if err != nil {
			t.Fatal(err)
		}
		state, err := nb.Doc().EncodeStateAsUpdate(nil)
		if err != nil {
			t.Fatal(err)
		}
		nb = nil
		_, compacted := loaded(t, [][]byte{state})
		t.Logf("| %d | %.0f kB | %.0f kB | %.1f MB | %.1f MB | %.0f× |", n, float64(len(js))/1e3, float64(len(state))/1e3,
			float64(heap)/1e6, float64(compacted)/1e6, float64(heap)/float64(len(js)))
	}
}

// loaded returns a notebook loaded from updates, as serve loads a room, and the live heap
// it holds (collected before and after).
func loaded(t *testing.T, updates [][]byte) (*ynotebook.Notebook, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	nb := ynotebook.New()
	if err := nb.Load(updates); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(nb)
	return nb, after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
}
