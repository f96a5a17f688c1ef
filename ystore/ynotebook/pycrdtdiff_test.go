package ynotebook

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// history is one concurrent history of testdata/pycrdt-golden/differential.py: the rows a
// store receives from several pycrdt clients, and what the Jupyter server (a pycrdt Doc
// applying them one by one, jupyter_ydoc's YNotebook) reads from them.
type history struct {
	Seed int             `json:"seed"`
	Rows [][]byte        `json:"rows"`
	Doc  json.RawMessage `json:"doc"`
	Get  json.RawMessage `json:"get"`
	Reid []int           `json:"reid"`
	// ClientsDiverged counts the writing clients that read otherwise with every update:
	// yrs's reading depends on the order a document receives updates in.
	ClientsDiverged int `json:"clients_diverged"`
	// Lost are the rows a store lost; Gapped is what a fresh pycrdt document reads from
	// the others in order (with its state vector, [client, clock] pairs), Refilled what
	// it reads once the lost rows arrive after them.
	Lost     []int     `json:"lost"`
	Gapped   pyReading `json:"gapped"`
	Refilled pyReading `json:"refilled"`
}

// pyReading is what a pycrdt document reads: to_py of its roots, YNotebook.get() and the
// cells get() gave a new id, and its state vector.
type pyReading struct {
	Doc  json.RawMessage `json:"doc"`
	Get  json.RawMessage `json:"get"`
	Reid []int           `json:"reid"`
	SV   [][2]uint64     `json:"sv"`
}

// defaultDiffSeed starts the 300 histories CI checks at a range that holds a code cell
// copied without an execution_count (seed 5564), which jupyter_ydoc reads without one.
const defaultDiffSeed = 5401

// envInt reads a positive integer from the environment, or returns def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestPycrdtDifferential checks the engine and the notebook layer against pycrdt, the
// Jupyter server's engine, on concurrent histories that several pycrdt clients write
// (multi-byte text inserted and deleted at random offsets, cells inserted, moved and
// deleted, metadata, outputs) and exchange late, in random orders and groupings: the
// rows applied one at a time, all at once (a cold load) and a cold load followed by the
// rest one at a time must each read what the server reads; and with about 8 % of the rows
// lost (a store's writer dropping writes), what a fresh pycrdt document reads from the
// rest, then once the lost ones arrive late.
// PYCRDT_DIFF_COUNT histories (default 300) from seed PYCRDT_DIFF_SEED (default
// defaultDiffSeed); docs/BENCHMARKS.md has the long run.
func TestPycrdtDifferential(t *testing.T) {
	python := pinnedPython(t)
	if python == "" {
		return
	}
	count, seed := envInt(t, "PYCRDT_DIFF_COUNT", 300), envInt(t, "PYCRDT_DIFF_SEED", defaultDiffSeed)
	cmd := exec.Command(python, filepath.Join("..", "..", "testdata", "pycrdt-golden", "differential.py"),
		"histories", "--seed", strconv.Itoa(seed), "--count", strconv.Itoa(count))
	differential := testenv.StartChild(t, cmd, testenv.CleanExit)
	sc := bufio.NewScanner(differential.Out)
	sc.Buffer(nil, 256<<20)
	n, rows, lost, diverged := 0, 0, 0, 0
	for sc.Scan() {
		var h history
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			t.Fatalf("differential.py: %v", err)
		}
		checkHistory(t, &h)
		n, rows, lost = n+1, rows+len(h.Rows), lost+len(h.Lost)
		if h.ClientsDiverged > 0 {
			diverged++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if err := differential.Stop(); err != nil {
		t.Fatalf("differential.py: %v", err)
	}
	if n != count {
		t.Fatalf("checked %d histories, want %d", n, count)
	}
	t.Logf("%d histories (%d rows) equal pycrdt's reading one at a time, all at once, cold then live, and with %d rows lost, then late; in %d the writing clients themselves read otherwise", n, rows, lost, diverged)
}

func checkHistory(t *testing.T, h *history) {
	t.Helper()
	what := func(how string) string { return "seed " + strconv.Itoa(h.Seed) + ", " + how }
	rng := rand.New(rand.NewPCG(uint64(h.Seed), 3))

	live := New()
	for i, r := range h.Rows {
		if _, err := live.Apply(r); err != nil {
			t.Fatalf("%s: %v", what("row "+strconv.Itoa(i)), err)
		}
	}
	requirePyDoc(t, what("one at a time"), live.Doc(), h.Doc)
	requireGet(t, what("one at a time"), live.Snapshot(), h.Get, h.Reid)

	cold := New()
	if err := cold.Load(h.Rows); err != nil {
		t.Fatalf("%s: %v", what("cold load"), err)
	}
	requirePyDoc(t, what("all at once"), cold.Doc(), h.Doc)
	requireGet(t, what("all at once"), cold.Snapshot(), h.Get, h.Reid)

	k := rng.IntN(len(h.Rows) + 1)
	mid := New()
	if err := mid.Load(h.Rows[:k]); err != nil {
		t.Fatalf("%s: %v", what("cold load"), err)
	}
	for _, r := range h.Rows[k:] {
		if _, err := mid.Apply(r); err != nil {
			t.Fatalf("%s: %v", what("live after a cold load"), err)
		}
	}
	requireGet(t, what("cold load of "+strconv.Itoa(k)+" rows, then live"), mid.Snapshot(), h.Get, h.Reid)

	// Rows lost: the document reads the others as pycrdt does, then the lost ones late.
	lost := map[int]bool{}
	for _, i := range h.Lost {
		lost[i] = true
	}
	gapped := New()
	for i, r := range h.Rows {
		if !lost[i] {
			if _, err := gapped.Apply(r); err != nil {
				t.Fatalf("%s: %v", what("row "+strconv.Itoa(i)+" with rows lost"), err)
			}
		}
	}
	lostWhat := what(fmt.Sprintf("rows %v lost", h.Lost))
	requirePyDoc(t, lostWhat, gapped.Doc(), h.Gapped.Doc)
	requireGet(t, lostWhat, gapped.Snapshot(), h.Gapped.Get, h.Gapped.Reid)
	want := map[uint64]uint64{}
	for _, p := range h.Gapped.SV {
		want[p[0]] = p[1]
	}
	if sv := gapped.Doc().StateVector(); !reflect.DeepEqual(sv, want) {
		t.Fatalf("%s: state vector %v, pycrdt's %v", lostWhat, sv, want)
	}
	for _, i := range h.Lost {
		if _, err := gapped.Apply(h.Rows[i]); err != nil {
			t.Fatalf("%s: %v", what("lost row "+strconv.Itoa(i)+" late"), err)
		}
	}
	requirePyDoc(t, lostWhat+", then them late", gapped.Doc(), h.Refilled.Doc)
	requireGet(t, lostWhat+", then them late", gapped.Snapshot(), h.Refilled.Get, h.Refilled.Reid)
}
