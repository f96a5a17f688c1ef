package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// result is one line of bench/notebook.sh's results, written alike by bench/notebook.mjs.
type result struct {
	Engine      string  `json:"engine"`
	Workload    string  `json:"workload"` // structural, typing, corpus, load or history
	Cells       int     `json:"cells,omitempty"`
	Updates     int     `json:"updates"`
	CPUMs       float64 `json:"cpuMs"` // the fastest of the repetitions
	NsPerUpdate float64 `json:"nsPerUpdate"`
	LiveMB      float64 `json:"liveMB,omitempty"` // corpus: heap held by all documents
}

// goEngine opens a document loaded with base and returns its apply function, and the
// function that reads its content at the end of a workload.
type goEngine struct {
	name string
	open func(t *testing.T, base [][]byte) (apply func([]byte) error, read func())
}

// readDoc reads what a notebook's document holds, as each engine of bench/ratios.sh does
// at the end of its timed work (the JSON of the roots cells, meta and state): an engine
// that decodes values only when they are read pays for them.
func readDoc(d *yjs.Doc) {
	yjs.ToJSON(d.Array("cells"))
	yjs.ToJSON(d.Map("meta"))
	yjs.ToJSON(d.Map("state"))
}

var goEngines = []goEngine{
	{"go ystore/yjs", func(t *testing.T, base [][]byte) (func([]byte) error, func()) {
		d := yjs.NewDoc()
		for _, u := range base {
			must(t, func() error { _, err := d.ApplyUpdate(u); return err }())
		}
		return func(u []byte) error { _, err := d.ApplyUpdate(u); return err }, func() { readDoc(d) }
	}},
	// the notebook layer reads what each update changes as it applies it
	{"go ynotebook.Apply", func(t *testing.T, base [][]byte) (func([]byte) error, func()) {
		n := ynotebook.New()
		must(t, n.Load(base))
		return func(u []byte) error { _, err := n.Apply(u); return err }, func() {}
	}},
	{"go ynotebook.Apply+Snapshot", func(t *testing.T, base [][]byte) (func([]byte) error, func()) {
		n := ynotebook.New()
		must(t, n.Load(base))
		return func(u []byte) error {
			_, err := n.Apply(u)
			n.Snapshot()
			return err
		}, func() {}
	}},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readFrames(t *testing.T, file string) [][]byte {
	t.Helper()
	buf, err := os.ReadFile(file)
	must(t, err)
	return frames(buf)
}

// TestNotebookLayer times the Go engines on the workloads in YNBENCH and writes JSON lines
// to YNBENCH_OUT: those of testdata/ynbench/gen.mjs (size-N) and the 20 rooms (corpus),
// which bench/notebook.sh writes, and one notebook's history (history/updates.bin), which
// bench/ratios.sh adds; each workload present is timed.
func TestNotebookLayer(t *testing.T) {
	dir := os.Getenv("YNBENCH")
	if dir == "" {
		t.Skip("YNBENCH not set (run bench/notebook.sh)")
	}
	reps, _ := strconv.Atoi(os.Getenv("YNBENCH_REPS"))
	reps = max(reps, 1)
	var out []result
	sizes, err := filepath.Glob(filepath.Join(dir, "size-*"))
	must(t, err)
	for _, sd := range sizes {
		cells, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(sd), "size-"))
		base := readFrames(t, filepath.Join(sd, "base.bin"))
		for _, w := range []string{"structural", "typing"} {
			updates := readFrames(t, filepath.Join(sd, w+".bin"))
			for _, e := range goEngines {
				best := timeReps(reps, func() func() {
					apply, _ := e.open(t, base)
					return func() {
						for i, u := range updates {
							if err := apply(u); err != nil {
								t.Fatalf("%s %s %d: update %d: %v", e.name, w, cells, i, err)
							}
						}
					}
				})
				out = append(out, result{Engine: e.name, Workload: w, Cells: cells, Updates: len(updates), CPUMs: best / 1e6, NsPerUpdate: best / float64(len(updates))})
			}
		}
	}
	if history, err := os.ReadFile(filepath.Join(dir, "history", "updates.bin")); err == nil {
		// the engine on one notebook's long history, a fresh document each repetition
		updates := frames(history)
		e := goEngines[0]
		best := timeReps(reps, func() func() {
			apply, read := e.open(t, nil)
			return func() {
				for i, u := range updates {
					if err := apply(u); err != nil {
						t.Fatalf("%s history: update %d: %v", e.name, i, err)
					}
				}
				read()
			}
		})
		out = append(out, result{Engine: e.name, Workload: "history", Updates: len(updates), CPUMs: best / 1e6, NsPerUpdate: best / float64(len(updates))})
	}
	for _, w := range roomWorkloads {
		out = append(out, timeRooms(t, dir, w, reps)...)
	}
	f, err := os.Create(os.Getenv("YNBENCH_OUT"))
	must(t, err)
	defer f.Close()
	for _, r := range out {
		b, _ := json.Marshal(r)
		fmt.Fprintln(f, string(b))
		t.Logf("%s", b)
	}
}

// roomWorkloads are the workloads of many rooms, a directory of room-*.bin each: the 20
// rooms of testdata/ysessions/gen.mjs --bench (corpus), which bench/notebook.sh writes,
// and the recorded sessions merged per room (bench/sessions.mjs), all of them (sessions)
// and those ywasm reads (sessions-ywasm), which bench/ratios.sh adds.
var roomWorkloads = []string{"corpus", "sessions", "sessions-ywasm"}

// timeRooms times the engine and the notebook layer on workload w, every room in a
// document of its own, all held at once, and, on the corpus, a notebook's load; a
// workload not in dir gives nothing.
func timeRooms(t *testing.T, dir, w string, reps int) []result {
	var out []result
	rooms, err := filepath.Glob(filepath.Join(dir, w, "room-*.bin"))
	must(t, err)
	corpus := make([][][]byte, len(rooms))
	total := 0
	for i, r := range rooms {
		corpus[i] = readFrames(t, r)
		total += len(corpus[i])
	}
	if total == 0 {
		return nil
	}
	for _, e := range goEngines[:2] {
		type room struct {
			apply func([]byte) error
			read  func()
		}
		open := func() []room {
			rooms := make([]room, len(corpus))
			for i := range rooms {
				rooms[i].apply, rooms[i].read = e.open(t, nil)
			}
			return rooms
		}
		// each room's updates, then its content read
		applyAll := func(rooms []room) {
			for r, ups := range corpus {
				for i, u := range ups {
					if err := rooms[r].apply(u); err != nil {
						t.Fatalf("%s room %d: update %d: %v", e.name, r, i, err)
					}
				}
				rooms[r].read()
			}
		}
		// the live heap in a pass of its own, before the timed ones
		before := liveHeap()
		applies := open()
		applyAll(applies)
		live := float64(liveHeap()-before) / (1 << 20)
		runtime.KeepAlive(applies)
		best := timeReps(reps, func() func() {
			rooms := open()
			return func() { applyAll(rooms) }
		})
		out = append(out, result{Engine: e.name, Workload: w, Updates: total, CPUMs: best / 1e6, NsPerUpdate: best / float64(total), LiveMB: live})
	}
	if w != "corpus" {
		return out
	}
	best := timeReps(reps, func() func() {
		nbs := make([]*ynotebook.Notebook, len(corpus))
		return func() {
			for r, ups := range corpus {
				nbs[r] = ynotebook.New()
				must(t, nbs[r].Load(ups))
				nbs[r].Snapshot()
			}
		}
	})
	out = append(out, result{Engine: "go ynotebook.Load", Workload: "load", Updates: total, CPUMs: best / 1e6, NsPerUpdate: best / float64(total)})
	return out
}

// timeReps runs setup, then the function it returns, reps times and returns the least CPU
// time of the latter in nanoseconds.
func timeReps(reps int, setup func() (run func())) float64 {
	var times []float64
	for range reps {
		run := setup()
		runtime.GC()
		c0 := cpuTime()
		run()
		times = append(times, float64(cpuTime()-c0))
	}
	return slices.Min(times)
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
