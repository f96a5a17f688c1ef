package ynotebook

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// pycrdtDir holds the fixtures testdata/pycrdt-golden/gen.py made with the real writer:
// updates from pycrdt (yrs) through jupyter_ydoc and pycrdt-store, with what pycrdt and
// jupyter_ydoc read from them.
const pycrdtDir = "testdata/pycrdt"

// venvVar names the virtual environment with the pinned Jupyter stack
// (scripts/jupyter-venv.sh), which TestPycrdtRegenerated runs the generator with.
const venvVar = "SIDECAR_TEST_JUPYTER_VENV"

type pycrdtCase struct {
	Name  string       `json:"name"`
	Note  string       `json:"note"`
	Steps []pycrdtStep `json:"steps"`
}

type pycrdtStep struct {
	What   string          `json:"what"`
	Update []byte          `json:"update"`
	Doc    json.RawMessage `json:"doc"`  // pycrdt's to_py of the roots cells, meta, state
	Get    json.RawMessage `json:"get"`  // jupyter_ydoc's YNotebook.get()
	Reid   []int           `json:"reid"` // indexes of get()'s cells with a new uuid4
	// Refused is pycrdt's error for a row it refuses (the last of its case; no reads).
	Refused string `json:"refused"`
}

func loadPycrdt(t testing.TB, dir string) []pycrdtCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s: %v", dir, err)
	}
	var cases []pycrdtCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c pycrdtCase
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cases = append(cases, c)
	}
	return cases
}

// TestPycrdt applies the real writer's rows one by one and compares, after each, the
// Yjs document with pycrdt's to_py and the snapshot with YNotebook.get(); change sets are
// checked against an independent diff, and a cold Load of all rows gives the same.
func TestPycrdt(t *testing.T) {
	runPycrdt(t, loadPycrdt(t, pycrdtDir))
}

func runPycrdt(t *testing.T, cases []pycrdtCase) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			nb := New()
			var rows [][]byte
			for i, st := range c.Steps {
				if st.Refused != "" {
					requireRefused(t, nb, rows, st)
					return
				}
				before := peek(nb)
				ch, err := nb.Apply(st.Update)
				if err != nil {
					t.Fatalf("step %d (%s): %v", i, st.What, err)
				}
				rows = append(rows, st.Update)
				checkTree(t, nb)
				after := peek(nb)
				requireSnapshotsEqual(t, i, after, fullSnapshot(nb))
				requireChanges(t, i, ch, before, after)
				requirePyDoc(t, fmt.Sprintf("step %d (%s)", i, st.What), nb.Doc(), st.Doc)
				requireGet(t, fmt.Sprintf("step %d (%s)", i, st.What), nb.Snapshot(), st.Get, st.Reid)
			}
			cold := New()
			if err := cold.Load(rows); err != nil {
				t.Fatal(err)
			}
			requireSnapshotsEqual(t, len(rows), cold.Snapshot(), nb.Snapshot())
		})
	}
}

// pinnedPython returns the Python of the pinned Jupyter stack ($SIDECAR_TEST_JUPYTER_VENV),
// or "" when the test cannot run (testenv.Need: a failure on CI; -short skips it).
func pinnedPython(t *testing.T) string {
	t.Helper()
	venv := os.Getenv(venvVar)
	if venv == "" {
		testenv.Need(t, errors.New(venvVar+" is not set"), "scripts/jupyter-venv.sh makes the pinned virtual environment")
		return ""
	}
	if testing.Short() {
		t.Skip("runs Python")
	}
	return filepath.Join(venv, "bin", "python")
}

// TestPycrdtRegenerated runs the generator with the pinned stack and checks its fresh
// output like the committed one: yrs orders map entries differently from run to run, so
// the updates differ while what pycrdt and jupyter_ydoc read from them must not.
func TestPycrdtRegenerated(t *testing.T) {
	python := pinnedPython(t)
	if python == "" {
		return
	}
	out := t.TempDir()
	cmd := exec.Command(python, filepath.Join("..", "..", "testdata", "pycrdt-golden", "gen.py"), "--out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.py: %v\n%s", err, b)
	}
	fresh, committed := loadPycrdt(t, out), loadPycrdt(t, pycrdtDir)
	strip := func(cs []pycrdtCase) []pycrdtCase {
		out := slices.Clone(cs)
		for i := range out {
			out[i].Steps = slices.Clone(out[i].Steps)
			for j := range out[i].Steps {
				out[i].Steps[j].Update = nil
			}
		}
		return out
	}
	if !reflect.DeepEqual(strip(fresh), strip(committed)) {
		t.Fatalf("gen.py reads differently from the committed fixtures: regenerate them (see %s)", pycrdtDir)
	}
	runPycrdt(t, fresh)
}

// requireRefused checks that a row pycrdt refuses for a parent that is not a type is
// refused by Apply and by a cold Load of the rows so far and it, and that nb, which
// applied the rows so far, then refuses every row.
func requireRefused(t *testing.T, nb *Notebook, rows [][]byte, st pycrdtStep) {
	t.Helper()
	if !strings.Contains(st.Refused, "must be deleted or shared ref type") {
		t.Fatalf("%s: pycrdt refused it for another reason than its parent: %s", st.What, st.Refused)
	}
	if _, err := nb.Apply(st.Update); !errors.Is(err, yjs.ErrBadParent) {
		t.Fatalf("%s: Apply %v; pycrdt refuses it (%s)", st.What, err, st.Refused)
	}
	if _, err := nb.Apply(rows[0]); !errors.Is(err, yjs.ErrBadParent) {
		t.Fatalf("%s: the next row applied (%v): the document is no longer the writer's", st.What, err)
	}
	if err := New().Load(append(slices.Clone(rows), st.Update)); !errors.Is(err, yjs.ErrBadParent) {
		t.Fatalf("%s: cold Load %v; pycrdt refuses it (%s)", st.What, err, st.Refused)
	}
}

// requirePyDoc compares the roots of doc with pycrdt's to_py, types included: a Yjs
// number is a Python float, a BigInt an int, bytes {"$bytes": base64}.
func requirePyDoc(t *testing.T, what string, doc *yjs.Doc, want json.RawMessage) {
	t.Helper()
	got := map[string]any{
		"cells": pyJSON(yjs.ToJSON(doc.Array("cells"))),
		"meta":  pyJSON(yjs.ToJSON(doc.Map("meta"))),
		"state": pyJSON(yjs.ToJSON(doc.Map("state"))),
	}
	w := decodeNumbers(t, want)
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("%s: Yjs document differs from pycrdt at %s", what, firstDiff("$", got, w))
	}
}

// pyNum is a number as Python holds it: an int or a float.
type pyNum struct {
	float bool
	val   string // exact value (big.Rat)
}

func rat(s string) string {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return "NaN:" + s
	}
	return r.RatString()
}

// pyJSON turns a value of the Yjs document into what pycrdt's to_py, dumped by gen.py,
// holds.
func pyJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = pyJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = pyJSON(e)
		}
		return out
	case float64:
		return pyNum{float: true, val: rat(strconv.FormatFloat(x, 'g', -1, 64))}
	case int64:
		return pyNum{val: rat(fmt.Sprint(x))}
	case []byte:
		return map[string]any{"$bytes": base64.StdEncoding.EncodeToString(x)}
	case yjs.UndefinedType:
		return nil
	}
	return v
}

// decodeNumbers decodes JSON with each number a pyNum: a float when written with a
// fraction or an exponent (Python's json.dumps of a float), an int otherwise.
func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var conv func(any) any
	conv = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = conv(e)
			}
		case []any:
			for i, e := range x {
				x[i] = conv(e)
			}
		case json.Number:
			return pyNum{float: strings.ContainsAny(string(x), ".eE"), val: rat(string(x))}
		}
		return v
	}
	return conv(v)
}

var nbformatID = regexp.MustCompile(`^[a-zA-Z0-9-_]{1,64}$`)

// requireGet compares the snapshot with YNotebook.get(), key for key and value for value,
// numbers by their text (Python's json.dumps): the cells get() gave a new uuid4 (reid)
// must be served under an id of their own, unique and valid, and are compared by
// position and content.
func requireGet(t *testing.T, what string, s *Snapshot, want json.RawMessage, reid []int) {
	t.Helper()
	b, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, w := decodeExact(t, b), decodeExact(t, want)
	gm, _ := got.(map[string]any)
	wm, _ := w.(map[string]any)
	gc, _ := gm["cells"].([]any)
	wc, _ := wm["cells"].([]any)
	if len(gc) != len(wc) {
		t.Fatalf("%s: %d cells, get() has %d\n got: %s\nwant: %s", what, len(gc), len(wc), b, want)
	}
	ids := map[any]int{}
	for i, c := range gc {
		if id, ok := c.(map[string]any)["id"]; ok && pyTruthyJSON(id) { // get() keeps falsy ids as they are
			ids[id]++
			if n := ids[id]; n > 1 {
				t.Fatalf("%s: cell id %v served %d times", what, id, n)
			}
		}
		if slices.Contains(reid, i) {
			id, _ := c.(map[string]any)["id"].(string)
			if !nbformatID.MatchString(id) {
				t.Fatalf("%s: stand-in id %q of cell %d is not an nbformat id", what, id, i)
			}
			wc[i].(map[string]any)["id"] = id
		}
	}
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("%s: snapshot differs from YNotebook.get() at %s\n got: %s\nwant: %s", what, firstDiff("$", got, w), b, want)
	}
}

// decodeExact decodes JSON keeping each number's text (json.Number), so that numbers
// compare as Python wrote them.
func decodeExact(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}
