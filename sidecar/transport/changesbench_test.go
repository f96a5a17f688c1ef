//lint:file-ignore SA1019 the 2025-11-25 era (resources/subscribe) is measured on purpose; mcp-go deprecates its client API

package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/versions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// benchNotebook is one notebook of testdata/changesbench/gen.py: jupyter_ydoc's updates.
type benchNotebook struct {
	Cells   int        `json:"cells"`
	Initial string     `json:"initial"`
	Output  []string   `json:"output"`
	Keys    [][]string `json:"keys"`
}

// benchNotebooks runs gen.py in the real Jupyter stack's environment.
func benchNotebooks(t *testing.T, keys int, cells ...int) []benchNotebook {
	t.Helper()
	py := jupytertest.Need(t)
	args := []string{filepath.Join("..", "..", "testdata", "changesbench", "gen.py"), strconv.Itoa(keys)}
	for _, n := range cells {
		args = append(args, strconv.Itoa(n))
	}
	out, err := exec.Command(py, args...).Output()
	if err != nil {
		t.Fatalf("gen.py: %v", err)
	}
	var nbs []benchNotebook
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		var nb benchNotebook
		if err := json.Unmarshal(sc.Bytes(), &nb); err != nil {
			t.Fatal(err)
		}
		nbs = append(nbs, nb)
	}
	return nbs
}

// TestChangesBytes measures what an agent reads to catch up after one edit, a
// keystroke or an output, against a full read, at 30, 300 and 1,500 cells
// (docs/BENCHMARKS.md); it holds the goal of ≥ 100× fewer bytes at 300 cells.
func TestChangesBytes(t *testing.T) {
	const keys = 1
	for _, nb := range benchNotebooks(t, keys, 30, 300, 1500) {
		lib := roomsOf(t, "", nb.Initial)
		r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}}, lib)
		c := dialGo(t, r.url, true)
		// gen.py made the output, then the keystrokes: they are applied in that order.
		full, v0 := readVersioned(t, c, "notebook://work")
		lib.rows(t, ystore.EventUpdates, nb.Output...)
		out, _ := readVersioned(t, c, changesURI(v0))
		_, v1 := readVersioned(t, c, "notebook://work")
		lib.rows(t, ystore.EventUpdates, nb.Keys[0]...)
		key, v2 := readVersioned(t, c, changesURI(v1))
		if v0 == v1 || v1 == v2 {
			t.Fatalf("an edit left the version as it was: %s", key)
		}
		ratio := float64(len(full)) / float64(len(key))
		t.Logf("%4d cells: full read %8d B; changes after a keystroke %4d B (%.0f×), after an output %4d B (%.0f×)",
			nb.Cells, len(full), len(key), ratio, len(out), float64(len(full))/float64(len(out)))
		if nb.Cells == 300 && ratio < 100 {
			t.Errorf("300 cells: %.0f× fewer bytes, want ≥ 100×", ratio)
		}
	}
}

// TestChangesMemory measures the memory a kept version costs at 30, 300 and 1,500 cells:
// the same keystrokes, each a version, applied to a room that keeps them all and to one
// that keeps one; the difference of their live heaps, the smallest of three rounds, is
// the versions'. Run with CHANGES_BENCH=1, alone (no server in the process).
func TestChangesMemory(t *testing.T) {
	if os.Getenv("CHANGES_BENCH") == "" {
		t.Skip("CHANGES_BENCH=1 runs it")
	}
	const keys = 1000
	for _, nb := range benchNotebooks(t, keys, 30, 300, 1500) {
		best := int64(math.MaxInt64)
		for range 3 {
			best = min(best, heapAfterKeys(t, nb, versions.DefaultMaxVersions)-heapAfterKeys(t, nb, 1))
		}
		t.Logf("%4d cells: %.2f kB per kept version (live heap, %d versions kept)", nb.Cells, float64(best)/float64(len(nb.Keys))/1000, len(nb.Keys))
	}
}

// heapAfterKeys is the live heap a room of nb's notebook adds by applying its
// keystrokes, keeping maxVersions versions.
func heapAfterKeys(t *testing.T, nb benchNotebook, maxVersions int) int64 {
	t.Helper()
	l := &roomsLibrary{Set: rooms.New(rooms.Config{Versions: versions.Config{MaxVersions: maxVersions}}), key: "json:notebook:" + testPath}
	l.w = l.Writer(l)
	l.rows(t, ystore.EventReset, nb.Initial)
	l.rows(t, ystore.EventUpdates, nb.Output...) // before the keystrokes, as gen.py made them
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, k := range nb.Keys {
		l.rows(t, ystore.EventUpdates, k...)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(l)
	if s, err := l.Served(testPath); err != nil || s.Version == "" {
		t.Fatalf("no version after the keystrokes: %v", err)
	}
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// TestChangesReadLatency measures a changes read at 300 cells with 100 sessions
// connected (50 of each era, subscribed to the notebook, told of every keystroke): an
// agent asks, after each keystroke, what changed since its last version (the first ask
// of a version: no cached answer), and since a version 20 keystrokes back; then every
// session asks at once after each keystroke (one answer made, the others from the
// cache), which on 2 cores measures the queue more than the read. Run with
// CHANGES_BENCH=1; the goal is p99 ≤ 5 ms for the agent's read.
func TestChangesReadLatency(t *testing.T) {
	if os.Getenv("CHANGES_BENCH") == "" {
		t.Skip("CHANGES_BENCH=1 runs it")
	}
	const sessions, edits = 100, 400
	nb := benchNotebooks(t, edits, 300)[0]
	lib := roomsOf(t, "", nb.Initial)
	lib.rows(t, ystore.EventUpdates, nb.Output...) // before the keystrokes, as gen.py made them
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}}, lib)
	lib.serve(r.srv)
	cs := make([]*goClient, sessions)
	for i := range cs {
		cs[i] = dialGo(t, r.url, i%2 == 0)
		if i%2 == 0 {
			if _, err := cs[i].ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: []string{"notebook://work"}}, nil); err != nil {
				t.Fatal(err)
			}
		} else {
			sub := mcp.SubscribeRequest{}
			sub.Params.URI = "notebook://work"
			if err := cs[i].Subscribe(context.Background(), sub); err != nil {
				t.Fatal(err)
			}
		}
	}
	agent := dialGo(t, r.url, true)
	read := func(c *goClient, since string) time.Duration {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = changesURI(since)
		start := time.Now()
		res, err := c.ReadResource(context.Background(), req)
		d := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if text := res.Contents[0].(mcp.TextResourceContents).Text; !bytes.Contains([]byte(text), []byte(`"status":"ok"`)) {
			t.Fatalf("changes since %s: %s", since, text)
		}
		return d
	}
	floor := func() time.Duration { // the same round trip, nothing to compute: capabilities://
		start := time.Now()
		readText(t, agent, "capabilities://")
		return time.Since(start)
	}
	var last, back, burst, trivial []time.Duration
	var versions []string
	_, v := readVersioned(t, agent, "notebook://work")
	for i, k := range nb.Keys {
		versions = append(versions, v)
		lib.rows(t, ystore.EventUpdates, k...)
		for _, c := range cs { // every session told: the read does not race the fan-out
			c.waitVersion(t, "notebook://work")
		}
		last = append(last, read(agent, v))
		trivial = append(trivial, floor())
		if i >= 20 {
			back = append(back, read(agent, versions[i-20]))
		}
		if i < 20 {
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, c := range cs {
				wg.Go(func() {
					d := read(c, v)
					mu.Lock()
					burst = append(burst, d)
					mu.Unlock()
				})
			}
			wg.Wait()
		}
		_, v = readVersioned(t, agent, "notebook://work")
	}
	p := func(ds []time.Duration, q float64) time.Duration {
		slices.Sort(ds)
		return ds[min(len(ds)-1, int(q*float64(len(ds))))]
	}
	t.Logf("300 cells, %d sessions connected: since the last version p50 %v p99 %v (%d reads); since 20 keystrokes back p50 %v p99 %v (%d); capabilities:// (the floor) p50 %v p99 %v; all %d asking at once p50 %v p99 %v (%d)",
		sessions, p(last, 0.5), p(last, 0.99), len(last), p(back, 0.5), p(back, 0.99), len(back), p(trivial, 0.5), p(trivial, 0.99), sessions, p(burst, 0.5), p(burst, 0.99), len(burst))
}
