package ynotebook

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// tableCase is one document from testdata/cases.json (written by testdata/ysessions/cases.mjs).
type tableCase struct {
	Name     string          `json:"name"`
	Updates  [][]byte        `json:"updates"`
	Notebook json.RawMessage `json:"notebook"` // YNotebook.toJSON(); null when YNotebook cannot render it
}

func loadCases(t testing.TB) []tableCase {
	t.Helper()
	b, err := os.ReadFile("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []tableCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// caseGet is jupyter_ydoc's YNotebook.get() of a table case (testdata/cases-get.json,
// written by testdata/pycrdt-golden/shapes.py cases): null where json.dumps refuses it
// (bytes: the server cannot save it either).
type caseGet struct {
	Name    string  `json:"name"`
	Get     *string `json:"get"` // json.dumps of get(), numbers as Python writes them
	MadeIDs []int   `json:"made_ids"`
}

// TestCases applies each case's updates, compares the snapshot with YNotebook.get() of
// the same updates and the snapshot, state and change sets with the golden file.
func TestCases(t *testing.T) {
	b, err := os.ReadFile("testdata/cases-get.json")
	if err != nil {
		t.Fatal(err)
	}
	var gets []caseGet
	if err := json.Unmarshal(b, &gets); err != nil {
		t.Fatal(err)
	}
	byName := map[string]caseGet{}
	for _, g := range gets {
		byName[g.Name] = g
	}
	for _, tc := range loadCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			nb := New()
			changes := make([]Changes, 0, len(tc.Updates))
			for i, u := range tc.Updates {
				ch, err := nb.Apply(u)
				if err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
				changes = append(changes, ch)
			}
			g, ok := byName[tc.Name]
			if !ok {
				t.Fatalf("no get() of %s in testdata/cases-get.json: regenerate it", tc.Name)
			}
			if g.Get != nil {
				requireGet(t, tc.Name, nb.Snapshot(), []byte(*g.Get), g.MadeIDs)
			}
			snap, err := nb.Snapshot().JSON()
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(map[string]any{"changes": changes, "state": nb.State(), "snapshot": json.RawMessage(snap)}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "golden", tc.Name+".json"), got)
		})
	}
}

func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	got = append(got, '\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (go test -update rewrites it)\n got: %s\nwant: %s", file, got, want)
	}
}

func TestSnapshotCell(t *testing.T) {
	var create tableCase
	for _, tc := range loadCases(t) {
		if tc.Name == "create" {
			create = tc
		}
	}
	nb := applyAll(t, create.Updates)
	tests := []struct {
		id        string
		wantIndex int
		wantType  string
		wantOK    bool
	}{
		{"md", 0, CellMarkdown, true},
		{"code", 1, CellCode, true},
		{"raw", 2, CellRaw, true},
		{"nope", -1, "", false},
	}
	for _, tt := range tests {
		c, i, ok := nb.Snapshot().Cell(tt.id)
		if i != tt.wantIndex || ok != tt.wantOK || c.CellType != tt.wantType {
			t.Errorf("Cell(%q) = %q, %d, %v; want %q, %d, %v", tt.id, c.CellType, i, ok, tt.wantType, tt.wantIndex, tt.wantOK)
		}
	}
}

// TestApplyMalformed checks that a bad update returns the engine's typed error and leaves
// the notebook as it was.
func TestApplyMalformed(t *testing.T) {
	var create tableCase
	for _, tc := range loadCases(t) {
		if tc.Name == "stream-grows" {
			create = tc
		}
	}
	nb := applyAll(t, create.Updates[:2])
	before, err := nb.Snapshot().JSON()
	if err != nil {
		t.Fatal(err)
	}
	good := create.Updates[2]
	for _, bad := range [][]byte{good[:len(good)/2], {0xff, 0xff, 0xff}, append(bytes.Clone(good[:len(good)-1]), 0x7f)} {
		_, err := nb.Apply(bad)
		var de *yjs.DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("Apply(% x): error %v, want a *yjs.DecodeError", bad, err)
		}
		after, _ := nb.Snapshot().JSON()
		if !bytes.Equal(before, after) {
			t.Fatalf("Apply(% x) changed the notebook", bad)
		}
	}
	if ch, err := nb.Apply(good); err != nil || ch.Empty() {
		t.Fatalf("the good update after the bad ones: %+v, %v", ch, err)
	}
}

func TestChangesMerge(t *testing.T) {
	tests := []struct {
		name string
		a, b Changes
		want Changes
	}{
		{"empty", Changes{}, Changes{}, Changes{}},
		{"flags and ids", Changes{Added: []string{"a"}, Moved: []string{"m"}}, Changes{Metadata: true, Added: []string{"b", "a"}, Removed: []string{"r"}},
			Changes{Metadata: true, Added: []string{"a", "b"}, Removed: []string{"r"}, Moved: []string{"m"}}},
		{"cells", Changes{Cells: map[string]CellChange{"x": {Source: true, Outputs: true, OutputIndexes: []int{0, 3}}}},
			Changes{Cells: map[string]CellChange{"x": {Metadata: true, Outputs: true, OutputIndexes: []int{1, 3}}, "y": {CellType: true}}},
			Changes{Cells: map[string]CellChange{"x": {Source: true, Metadata: true, Outputs: true, OutputIndexes: []int{0, 1, 3}}, "y": {CellType: true}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.a
			got.Merge(tt.b)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if got.Empty() != reflect.DeepEqual(tt.want, Changes{}) {
				t.Fatalf("Empty() = %v for %+v", got.Empty(), got)
			}
		})
	}
}

func TestNewSnapshot(t *testing.T) {
	s := NewSnapshot(Cell{ID: "a", CellType: CellMarkdown, Source: "# A"}, Cell{CellType: CellCode}, Cell{ID: "c", CellType: CellRaw})
	if s.Len() != 3 || s.At(2).ID != "c" || s.At(1).ID != "" {
		t.Fatalf("Len %d, At(2) %q", s.Len(), s.At(2).ID)
	}
	if c, i, ok := s.Cell("c"); !ok || i != 2 || c.CellType != CellRaw {
		t.Fatalf("Cell(c) = %+v, %d, %v", c, i, ok)
	}
	if _, _, ok := s.Cell(""); ok {
		t.Fatal("Cell(\"\") found a cell without an id")
	}
	got, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cells":[{"cell_type":"markdown","id":"a","source":"# A"},{"cell_type":"code","execution_count":null,"outputs":[],"source":""},{"cell_type":"raw","id":"c","source":""}],"metadata":{},"nbformat":0,"nbformat_minor":0}`
	if string(got) != want {
		t.Fatalf("JSON = %s\nwant %s", got, want)
	}
	var ids []string
	for i, c := range s.All() {
		if i == 2 {
			break
		}
		ids = append(ids, c.ID)
	}
	if !reflect.DeepEqual(ids, []string{"a", ""}) {
		t.Fatalf("All stopped early yields %q", ids)
	}
}
