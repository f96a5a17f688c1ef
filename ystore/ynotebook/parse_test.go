package ynotebook

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

// storeSnapshots are snapshots built from store rows: the table cases, the recorded
// sessions' final states and resources' fixture notebook, by name.
func storeSnapshots(t *testing.T) map[string]*Snapshot {
	out := map[string]*Snapshot{}
	for _, tc := range loadCases(t) {
		out["case "+tc.Name] = applyAll(t, tc.Updates).Snapshot()
	}
	for _, s := range ysessions.All(t) {
		out["session "+s.Name] = applyAll(t, s.UpdateBytes()).Snapshot()
	}
	b, err := os.ReadFile("../../resources/testdata/notebooks.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Initial string `json:"initial"`
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	u, err := base64.StdEncoding.DecodeString(fx.Initial)
	if err != nil {
		t.Fatal(err)
	}
	out["resources initial"] = applyAll(t, [][]byte{u}).Snapshot()
	return out
}

// loadedShape reports whether s is what YNotebook.set stores: nbformat 4 with its
// metadata, cells (set gives a notebook without any one), every one a valid cell with
// an id and metadata.
func loadedShape(s *Snapshot) bool {
	if s.NBFormat != 4 || s.NBFormatMinor == 0 || s.Metadata == nil || s.Len() == 0 {
		return false
	}
	for _, c := range s.All() {
		if !c.hasID || c.Metadata == nil || c.Metadata["trusted"] != nil || len(c.Invalid()) > 0 {
			return false
		}
	}
	return true
}

// TestParseRoundTrip parses the JSON of store-built snapshots: the result is the same
// notebook, the same cells, and Diff finds nothing.
func TestParseRoundTrip(t *testing.T) {
	tested := 0
	for name, want := range storeSnapshots(t) {
		if !loadedShape(want) {
			continue
		}
		tested++
		b, err := want.JSON()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(b, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !Equivalent(want, got) {
			t.Errorf("%s: not Equivalent", name)
		}
		if want.pruneIDs {
			continue // nbformat 4.0–4.4: the file has no cell ids, so only the JSON matches
		}
		if ch := DiffContent(want, got); !ch.Empty() {
			t.Errorf("%s: DiffContent(store, parsed) = %+v", name, ch)
		}
	}
	if tested < 5 {
		t.Fatalf("only %d store snapshots in the loaded shape", tested)
	}
}

// TestParseNBFormat: multi-line strings joined as nbformat.read does, transient fields
// stripped, YNotebook.set's defaults, a cell of an unknown type kept; want is get() of
// the room the server loads this file into (testdata/pycrdt-golden/shapes.py load_file).
func TestParseNBFormat(t *testing.T) {
	file := `{"cells":[
 {"cell_type":"code","id":"a","source":["x = 1\n","x"],"metadata":{"trusted":true,"tags":["t"]},
  "execution_count":3,"outputs":[
   {"output_type":"stream","name":"stdout","text":["1\n","2\n"]},
   {"output_type":"execute_result","execution_count":3,"metadata":{},
    "data":{"text/plain":["1","2"],"application/json":["k"],"application/vnd.x+json":{"a":1}}}]},
 {"cell_type":"markdown","id":"b","source":"# t","attachments":{},"metadata":{}},
 {"cell_type":"markdown","id":"c","source":"img","attachments":{"p.png":{"image/png":["aGk=","aGk="]}},"metadata":{}},
 {"cell_type":"heading","id":"d","source":"kept","metadata":{}},
 {"cell_type":"code","id":"e","source":"","execution_count":0,"metadata":{}}
],"metadata":{"orig_nbformat":3,"kernelspec":{"name":"python3"}},"nbformat":4,"nbformat_minor":5}`
	s, err := Parse([]byte(file), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cells":[{"cell_type":"code","execution_count":3,"id":"a","metadata":{"tags":["t"]},"outputs":[{"name":"stdout","output_type":"stream","text":"1\n2\n"},{"data":{"application/json":["k"],"application/vnd.x+json":{"a":1},"text/plain":"12"},"execution_count":3,"metadata":{},"output_type":"execute_result"}],"source":"x = 1\nx"},{"cell_type":"markdown","id":"b","metadata":{},"source":"# t"},{"attachments":{"p.png":{"image/png":"aGk=aGk="}},"cell_type":"markdown","id":"c","metadata":{},"source":"img"},{"cell_type":"heading","id":"d","metadata":{},"source":"kept"},{"cell_type":"code","execution_count":0,"id":"e","metadata":{},"outputs":[],"source":""}],"metadata":{"kernelspec":{"name":"python3"},"language_info":{"name":""}},"nbformat":4,"nbformat_minor":5}`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if s.Len() != 5 || s.At(2).Attachments == nil {
		t.Fatalf("cells: %d, attachments %v", s.Len(), s.At(2).Attachments)
	}
}

func TestParseErrors(t *testing.T) {
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	for _, tc := range []struct {
		name, in string
		lim      Limits
		want     error
	}{
		{"not json", `{`, Limits{}, ErrInvalid},
		{"not object", `[1]`, Limits{}, ErrInvalid},
		{"cells not array", `{"cells":{}}`, Limits{}, ErrInvalid},
		{"cell not object", `{"cells":[1]}`, Limits{}, ErrInvalid},
		{"nbformat 3", `{"nbformat":3,"worksheets":[]}`, Limits{}, ErrInvalid},
		{"nbformat string", `{"nbformat":"4","cells":[]}`, Limits{}, ErrInvalid},
		{"no nbformat (version 1 to nbformat)", `{"cells":[],"metadata":{}}`, Limits{}, ErrInvalid},
		{"no metadata", `{"nbformat":4,"cells":[]}`, Limits{}, ErrInvalid},
		{"cell without metadata", `{"nbformat":4,"metadata":{},"cells":[{"cell_type":"code","source":""}]}`, Limits{}, ErrInvalid},
		{"attachments null", `{"nbformat":4,"metadata":{},"cells":[{"cell_type":"markdown","source":"","metadata":{},"attachments":null}]}`, Limits{}, ErrInvalid},
		{"infinite float", `{"nbformat":4,"metadata":{"x":1e999},"cells":[]}`, Limits{}, ErrInvalid},
		{"too large", `{"cells":[]}`, Limits{MaxBytes: 5}, ErrTooLarge},
		{"too many cells", `{"cells":[{},{},{}]}`, Limits{MaxCells: 2}, ErrTooManyCells},
		{"too deep", `{"metadata":{"a":` + deep + `}}`, Limits{}, ErrTooDeep},
	} {
		_, err := Parse([]byte(tc.in), tc.lim)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
	// Brackets inside strings do not count.
	if _, err := Parse([]byte(`{"nbformat":4,"cells":[],"metadata":{"s":"`+deep+`\\\"["}}`), Limits{}); err != nil {
		t.Errorf("brackets in strings: %v", err)
	}
}

// TestDiff compares Diff with the change sets Apply reports over the table cases and
// sessions, update by update.
func TestDiff(t *testing.T) {
	for _, s := range ysessions.All(t) {
		nb := New()
		for i, u := range s.UpdateBytes() {
			prev := nb.Snapshot()
			if _, err := nb.Apply(u); err != nil {
				t.Fatal(err)
			}
			requireChanges(t, i, Diff(prev, nb.Snapshot()), prev, nb.Snapshot())
		}
	}
	a := NewSnapshot(Cell{ID: "x", CellType: CellCode, Source: "1"}, Cell{ID: "y", CellType: CellMarkdown})
	b := NewSnapshot(Cell{ID: "y", CellType: CellMarkdown, Source: "s"}, Cell{ID: "z", CellType: CellRaw},
		Cell{ID: "x", CellType: CellCode, Source: "1", Outputs: []map[string]any{{"output_type": "stream"}}})
	ch := Diff(a, b)
	if len(ch.Added) != 1 || ch.Added[0] != "z" || len(ch.Removed) != 0 || len(ch.Moved) != 1 ||
		!ch.Cells["y"].Source || !ch.Cells["x"].Outputs || ch.Cells["x"].OutputIndexes[0] != 0 || ch.Metadata {
		t.Fatalf("Diff = %+v", ch)
	}
	if !Diff(nil, nil).Empty() || Diff(nil, a).Empty() {
		t.Fatal("nil snapshots")
	}
}

func TestEquivalentIgnoresTrust(t *testing.T) {
	a := NewSnapshot(Cell{ID: "x", CellType: CellCode, Metadata: map[string]any{"trusted": true, "k": 1.0}})
	b := NewSnapshot(Cell{ID: "x", CellType: CellCode, Metadata: map[string]any{"k": 1.0}})
	c := NewSnapshot(Cell{ID: "x", CellType: CellCode, Metadata: map[string]any{"k": 2.0}})
	if !Equivalent(a, b) || Equivalent(a, c) || Diff(a, b).Empty() {
		t.Fatal("Equivalent")
	}
	if !DiffContent(a, b).Empty() || !DiffContent(b, a).Empty() || !DiffContent(a, c).Cells["x"].Metadata {
		t.Fatalf("DiffContent: %+v, %+v", DiffContent(a, b), DiffContent(a, c))
	}
	// jupyter_ydoc's placeholders for metadata a file lacks.
	room := NewSnapshot(Cell{ID: "x", CellType: CellCode})
	room.Metadata = map[string]any{"language_info": map[string]any{"name": ""}, "kernelspec": map[string]any{"name": "", "display_name": ""}}
	file := NewSnapshot(Cell{ID: "x", CellType: CellCode})
	named := NewSnapshot(Cell{ID: "x", CellType: CellCode})
	named.Metadata = map[string]any{"language_info": map[string]any{"name": "python"}}
	if !Equivalent(room, file) || !DiffContent(file, room).Empty() || Equivalent(room, named) || !DiffContent(room, named).Metadata {
		t.Fatal("placeholders")
	}
}

// FuzzParse: Parse never panics, and a notebook it accepts whose cells are all valid
// nbformat encodes and parses again to an equivalent notebook (the trust mark the
// server gives the empty cell of a file without cells is stripped by nbformat.reads, as
// on the server; a half-built or invalid cell may make the file one the server refuses).
func FuzzParse(f *testing.F) {
	for _, tc := range loadCases(f) {
		nb := New()
		for _, u := range tc.Updates {
			_, _ = nb.Apply(u)
		}
		if b, err := nb.Snapshot().JSON(); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"cells":[{"cell_type":"code","source":["a","b"],"outputs":[{"output_type":"stream","text":["x"]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b, Limits{MaxBytes: 1 << 20, MaxCells: 1000, MaxDepth: 32})
		if err != nil {
			return
		}
		out, err := s.JSON()
		if err != nil || len(s.Invalid()) > 0 || s.Len() == 0 { // no cells: set() gives one
			return
		}
		again, err := Parse(out, Limits{})
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		if p, x, y, differ := FirstDifference(s, again); differ {
			t.Fatalf("re-parse differs at %s: %s vs %s\n%s", p, x, y, out)
		}
		if d := DiffContent(s, again); !s.pruneIDs && !d.Empty() {
			t.Fatalf("re-parse differs: %+v", d)
		}
	})
}
