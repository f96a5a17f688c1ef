package ynotebook

import (
	"bufio"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// shapesDir holds what testdata/pycrdt-golden/shapes.py makes with the real stack: for
// each class of issue 40, documents written by pycrdt (rows) and .ipynb files, with
// jupyter_ydoc's YNotebook.get() of each (of a file: after the server's load into a
// room).
const shapesDir = "testdata/shapes"

type shapesFile struct {
	Name  string       `json:"name"`
	Note  string       `json:"note"`
	Cases []shapesCase `json:"cases"`
}

type shapesCase struct {
	What    string   `json:"what"`
	Rows    [][]byte `json:"rows"`
	File    *string  `json:"file"`
	Get     *string  `json:"get"`      // json.dumps of get(); null when get() cannot be saved
	MadeIDs []int    `json:"made_ids"` // get()'s cells whose id the server made up
	Refused string   `json:"refused"`  // the file nbformat.reads refuses
}

func loadShapes(t *testing.T, dir string) []shapesFile {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s: %v", dir, err)
	}
	var out []shapesFile
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sf shapesFile
		if err := json.Unmarshal(b, &sf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, sf)
	}
	return out
}

// TestShapes serves each shape of issue 40 as get() returns it: the rows applied one at
// a time and in a cold load, the files through Parse; a file the server refuses is
// refused; every cell that is not valid nbformat is named by Invalid.
func TestShapes(t *testing.T) {
	runShapes(t, loadShapes(t, shapesDir))
}

func runShapes(t *testing.T, files []shapesFile) {
	for _, sf := range files {
		t.Run(sf.Name, func(t *testing.T) {
			for _, c := range sf.Cases {
				checkShape(t, c)
			}
		})
	}
}

func checkShape(t *testing.T, c shapesCase) {
	t.Helper()
	var snaps []*Snapshot
	if c.File != nil {
		s, err := Parse([]byte(*c.File), Limits{})
		if c.Refused != "" {
			if err == nil && nbformatCrash(t, c) {
				return // docs/COMPATIBILITY.md: nbformat's validator crashes, the sidecar serves the file
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s: Parse %v; nbformat.reads refuses it (%s)", c.What, err, c.Refused)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", c.What, err)
		}
		snaps = append(snaps, s)
	} else {
		live := New()
		for i, r := range c.Rows {
			if _, err := live.Apply(r); err != nil {
				t.Fatalf("%s: row %d: %v", c.What, i, err)
			}
		}
		cold := New()
		if err := cold.Load(c.Rows); err != nil {
			t.Fatalf("%s: %v", c.What, err)
		}
		snaps = append(snaps, live.Snapshot(), cold.Snapshot())
	}
	if c.Get == nil {
		return // get() itself cannot be saved: docs/COMPATIBILITY.md
	}
	for _, s := range snaps {
		requireGet(t, c.What, s, []byte(*c.Get), c.MadeIDs)
		requireInvalidNamed(t, c.What, s)
	}
}

// nbformatCrash reports whether nbformat.reads refused c's file by crashing
// (TypeError) in its validator's message for a cell whose cell_type is not a string.
func nbformatCrash(t *testing.T, c shapesCase) bool {
	t.Helper()
	if c.Refused != "TypeError" {
		return false
	}
	var nb struct {
		Cells []map[string]any `json:"cells"`
	}
	if err := json.Unmarshal([]byte(*c.File), &nb); err != nil {
		t.Fatal(err)
	}
	for _, cell := range nb.Cells {
		if ct, ok := cell["cell_type"]; ok {
			if _, isString := ct.(string); !isString {
				return true
			}
		}
	}
	return false
}

// requireInvalidNamed checks Invalid against the cells themselves: a cell is listed
// exactly when its type is unknown or a key nbformat requires is missing or one it does
// not allow is present.
func requireInvalidNamed(t *testing.T, what string, s *Snapshot) {
	t.Helper()
	var want []int
	for i, c := range s.All() {
		obj := c.Object()
		ct, _ := obj["cell_type"].(string)
		allowed, known := allowedKeys[ct]
		bad := !known
		for _, k := range cellKeys[ct] {
			_, ok := obj[k]
			bad = bad || !ok
		}
		for k := range obj {
			bad = bad || known && !slices.Contains(allowed, k)
		}
		if id, _ := obj["id"].(string); !nbformatID.MatchString(id) && !s.pruneIDs {
			bad = true
		}
		if md, ok := obj["metadata"]; ok {
			_, isMap := md.(map[string]any)
			bad = bad || !isMap
		}
		if src, ok := obj["source"]; ok {
			bad = bad || !isMultiline(src)
		}
		if bad {
			want = append(want, i)
		}
	}
	var got []int
	for _, ic := range s.Invalid() {
		got = append(got, ic.Index)
		if len(ic.Reasons) == 0 {
			t.Fatalf("%s: cell %d invalid without a reason", what, ic.Index)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: Invalid names cells %v, want %v", what, got, want)
	}
}

// TestShapesRegenerated runs shapes.py with the pinned stack and checks its fresh output
// reads like the committed one (the rows' bytes differ from run to run).
func TestShapesRegenerated(t *testing.T) {
	python := pinnedPython(t)
	if python == "" {
		return
	}
	out := t.TempDir()
	cmd := exec.Command(python, filepath.Join("..", "..", "testdata", "pycrdt-golden", "shapes.py"), "fixtures", "--out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("shapes.py: %v\n%s", err, b)
	}
	fresh, committed := loadShapes(t, out), loadShapes(t, shapesDir)
	strip := func(fs []shapesFile) []shapesFile {
		out := slices.Clone(fs)
		for i := range out {
			out[i].Cases = slices.Clone(out[i].Cases)
			for j := range out[i].Cases {
				out[i].Cases[j].Rows = nil
				if out[i].Cases[j].MadeIDs != nil {
					out[i].Cases[j].Get = nil // ids made up at random by nbformat
				}
			}
		}
		return out
	}
	if !reflect.DeepEqual(strip(fresh), strip(committed)) {
		t.Fatalf("shapes.py reads differently from the committed fixtures: regenerate them (see %s)", shapesDir)
	}
	runShapes(t, fresh)
}

// shapeHistory is one line of shapes.py histories: a random history's rows and get() of
// them, or (with File set) the file of its notebook and get() after the server loads it.
type shapeHistory struct {
	Seed int `json:"seed"`
	shapesCase
}

// TestShapesDifferential checks random histories over issue 40's shapes (in-place cell
// type changes, extra and missing keys, unknown cell types, partial maps from concurrent
// creation, attachments on every cell type, whole numbers at and beyond 2^53 and 1e21,
// negative zero, list-form values, reloads of a file with an integer beyond int64,
// written by 2–3 pycrdt clients) and the files of every fifth history's notebook: the
// rows applied one at a time, all at once and cold then live, and the file parsed, must
// each equal get(), numbers by their text. SHAPES_DIFF_COUNT histories (default 300)
// from seed SHAPES_DIFF_SEED (default 1); docs/BENCHMARKS.md has the long run.
func TestShapesDifferential(t *testing.T) {
	python := pinnedPython(t)
	if python == "" {
		return
	}
	count, seed := envInt(t, "SHAPES_DIFF_COUNT", 300), envInt(t, "SHAPES_DIFF_SEED", 1)
	cmd := exec.Command(python, filepath.Join("..", "..", "testdata", "pycrdt-golden", "shapes.py"),
		"histories", "--seed", strconv.Itoa(seed), "--count", strconv.Itoa(count))
	shapes := testenv.StartChild(t, cmd, testenv.CleanExit)
	sc := bufio.NewScanner(shapes.Out)
	sc.Buffer(nil, 256<<20)
	var histories, rows, files, refused, crashed, unsaveable, invalid int
	for sc.Scan() {
		var h shapeHistory
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			t.Fatalf("shapes.py: %v", err)
		}
		h.What = "seed " + strconv.Itoa(h.Seed)
		switch {
		case h.File != nil && h.Refused != "" && nbformatCrash(t, h.shapesCase):
			crashed++
		case h.File != nil && h.Refused != "":
			refused++
		case h.File != nil:
			files++
		default:
			histories++
			rows += len(h.Rows)
			checkLiveAfterCold(t, h.shapesCase, h.Seed)
		}
		if h.Get == nil && h.Refused == "" {
			unsaveable++
		}
		checkShape(t, h.shapesCase)
		if h.Get != nil && h.File == nil {
			nb := New()
			if err := nb.Load(h.Rows); err != nil {
				t.Fatal(err)
			}
			invalid += len(nb.Snapshot().Invalid())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if err := shapes.Stop(); err != nil {
		t.Fatalf("shapes.py: %v", err)
	}
	if histories != count {
		t.Fatalf("checked %d histories, want %d", histories, count)
	}
	t.Logf("%d histories (%d rows, %d invalid cells served) and %d files equal get(); %d files refused as nbformat.reads refuses them; "+
		"documented differences (docs/COMPATIBILITY.md): %d histories where get() raises or json.dumps refuses it, %d files on which nbformat's validator crashes",
		histories, rows, invalid, files, refused, unsaveable, crashed)
}

// checkLiveAfterCold applies the first rows of c in a cold load and the rest one at a
// time: the result must equal get() too.
func checkLiveAfterCold(t *testing.T, c shapesCase, seed int) {
	t.Helper()
	if c.Get == nil {
		return
	}
	k := rand.New(rand.NewPCG(uint64(seed), 7)).IntN(len(c.Rows) + 1)
	nb := New()
	if err := nb.Load(c.Rows[:k]); err != nil {
		t.Fatal(err)
	}
	for i, r := range c.Rows[k:] {
		if _, err := nb.Apply(r); err != nil {
			t.Fatalf("%s: row %d: %v", c.What, k+i, err)
		}
	}
	requireGet(t, c.What+", cold load of "+strconv.Itoa(k)+" rows, then live", nb.Snapshot(), []byte(*c.Get), c.MadeIDs)
}
