package bench

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// corpus is where bench/run.sh writes updates.bin and state.bin (BENCH_CORPUS overrides).
func corpus(b testing.TB, name string) [][]byte {
	b.Helper()
	dir := os.Getenv("BENCH_CORPUS")
	if dir == "" {
		dir = "out"
	}
	buf, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		b.Skipf("no corpus (run bench/run.sh): %v", err)
	}
	return frames(buf)
}

// frames splits u32le length-prefixed frames.
func frames(buf []byte) [][]byte {
	var out [][]byte
	for len(buf) >= 4 {
		n := binary.LittleEndian.Uint32(buf)
		out = append(out, buf[4:4+n])
		buf = buf[4+n:]
	}
	return out
}

// applier is one engine under test: a fresh document, its apply function, the function
// that reads its content at the end (readDoc; the notebook layer reads as it applies,
// as bench/node.mjs's engines do) and its state vector.
type applier struct {
	name string
	open func() (apply func([]byte) error, read func(), sv func() map[uint64]uint64)
}

var appliers = []applier{
	{"yjs", func() (func([]byte) error, func(), func() map[uint64]uint64) {
		d := yjs.NewDoc()
		return func(u []byte) error { _, err := d.ApplyUpdate(u); return err }, func() { readDoc(d) }, d.StateVector
	}},
	{"ynotebook", func() (func([]byte) error, func(), func() map[uint64]uint64) {
		n := ynotebook.New()
		return func(u []byte) error { _, err := n.Apply(u); return err }, func() {}, n.Doc().StateVector
	}},
}

func BenchmarkHistory(b *testing.B) { run(b, corpus(b, "updates.bin")) }

func BenchmarkState(b *testing.B) { run(b, corpus(b, "state.bin")) }

// run applies every frame to a fresh document per iteration, then reads its content, and
// reports CPU time (per run and per update) and allocations, the live heap of the last
// document, peak RSS and the state vector.
func run(b *testing.B, frames [][]byte) {
	for _, a := range appliers {
		b.Run(a.name, func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var sv func() map[uint64]uint64
			cpu0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				var apply func([]byte) error
				var read func()
				apply, read, sv = a.open()
				for i, f := range frames {
					if err := apply(f); err != nil {
						b.Fatalf("update %d: %v", i, err)
					}
				}
				read()
			}
			b.StopTimer()
			cpu := cpuTime() - cpu0
			runtime.ReadMemStats(&after)
			n := float64(b.N * len(frames))
			b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(cpu)/n, "cpu-ns/update")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/update")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/update")
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc)/(1<<20), "live-MB")
			var ru syscall.Rusage
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
				b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB")
			}
			b.Logf("state vector %s", formatSV(sv()))
		})
	}
}

// cpuTime is the CPU time, user and system, the process has used so far, in nanoseconds:
// unlike wall time it hardly depends on what else the machine runs.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func formatSV(sv map[uint64]uint64) string {
	parts := make([]string, 0, len(sv))
	for c, clock := range sv {
		parts = append(parts, fmt.Sprintf("%d:%d", c, clock))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// BenchmarkSessions applies the recorded sessions merged per room ($YNBENCH/sessions, which
// bench/ratios.sh writes through bench/corpus.sh), each room to a fresh document, each
// update alone, then its content read (readDoc): the engine's per-update path as a
// follower takes it, for -cpuprofile.
func BenchmarkSessions(b *testing.B) {
	rooms, _ := filepath.Glob(filepath.Join(os.Getenv("YNBENCH"), "sessions", "room-*.bin"))
	if len(rooms) == 0 {
		b.Skip("no sessions in $YNBENCH (run bench/ratios.sh)")
	}
	var corpus [][][]byte
	for _, r := range rooms {
		buf, err := os.ReadFile(r)
		if err != nil {
			b.Fatal(err)
		}
		corpus = append(corpus, frames(buf))
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for range b.N {
		for _, ups := range corpus {
			d := yjs.NewDoc()
			for i, u := range ups {
				if _, err := d.ApplyUpdate(u); err != nil {
					b.Fatalf("update %d: %v", i, err)
				}
			}
			readDoc(d)
		}
	}
	// the process's CPU time, as bench/ratios.sh counts it: the collector's work included
	b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
}
