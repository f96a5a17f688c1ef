package outline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

func TestHeadings(t *testing.T) {
	tests := []struct {
		src  string
		want []Heading
	}{
		{"# Title", []Heading{{Level: 1, Text: "Title"}}},
		{"intro\n## Data ##\n   ### Load  \n", []Heading{{Level: 2, Text: "Data"}, {Level: 3, Text: "Load"}}},
		{"#tag\n####### seven\n    # indented code", nil},
		{"```python\n# a comment\n```\n# After", []Heading{{Level: 1, Text: "After"}}},
		{"~~~~\n# inside\n~~~\n# still inside\n~~~~\n#", []Heading{{Level: 1, Text: ""}}},
	}
	for _, tt := range tests {
		if got := Headings(tt.src); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Headings(%q) = %+v, want %+v", tt.src, got, tt.want)
		}
	}
}

func testSnapshot() *ynotebook.Snapshot {
	return ynotebook.NewSnapshot([]ynotebook.Cell{
		{ID: "m1", CellType: "markdown", Source: "# Analysis\n\nSome words.\n## Load"},
		{ID: "c1", CellType: "code", Source: "\n  import pandas as pd  \ndf = pd.read_csv('x')", Outputs: []map[string]any{
			{"output_type": "stream", "name": "stdout", "text": "ok\n"},
			{"output_type": "display_data", "data": map[string]any{"image/png": "iVBO", "text/plain": "<Figure>"}},
			{"output_type": "error", "ename": "E"},
		}},
	}...)
}

func TestOf(t *testing.T) {
	o := Of("nb", "work/a.ipynb", testSnapshot())
	body, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"nb","path":"work/a.ipynb",` +
		`"headings":[{"level":1,"text":"Analysis","cell_id":"m1","uri":"notebook://nb/cells/m1"},{"level":2,"text":"Load","cell_id":"m1","uri":"notebook://nb/cells/m1"}],` +
		`"cells":[{"id":"m1","index":0,"cell_type":"markdown","first_line":"# Analysis","output_count":0,"uri":"notebook://nb/cells/m1"},` +
		`{"id":"c1","index":1,"cell_type":"code","first_line":"import pandas as pd","output_count":3,"output_types":["stream","display_data:image/png","error"],"uri":"notebook://nb/cells/c1"}]}`
	if string(body) != want {
		t.Fatalf("outline =\n%s\nwant\n%s", body, want)
	}
}

// lib is a Library of one notebook bound as "nb", whose snapshot tests replace.
type lib struct {
	mu   sync.Mutex
	snap *ynotebook.Snapshot
}

func (l *lib) Notebooks() []extensions.Notebook {
	return []extensions.Notebook{{Path: "a.ipynb", Names: []string{"nb"}}}
}

func (l *lib) Snapshot(path string) (*ynotebook.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if path != "a.ipynb" || l.snap == nil {
		return nil, fmt.Errorf("%w: %s", extensions.ErrNotFound, path)
	}
	return l.snap, nil
}

func (l *lib) Resolve(name string) (string, bool) { return "a.ipynb", name == "nb" }

// edit replaces the notebook with the cells f makes of a copy of its cells.
func (l *lib) edit(f func(c []ynotebook.Cell) []ynotebook.Cell) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var cells []ynotebook.Cell
	for _, c := range l.snap.All() {
		cells = append(cells, *c)
	}
	l.snap = ynotebook.NewSnapshot(f(cells)...)
}

func unchanged(c []ynotebook.Cell) []ynotebook.Cell { return c }

func TestChangedOnlyWhenTheOutlineChanges(t *testing.T) {
	l := &lib{snap: testSnapshot()}
	e := &Extension{lib: l, digests: map[string]uint64{}}
	res, err := e.read(context.Background(), "notebook://nb/outline")
	if err != nil {
		t.Fatal(err)
	}
	if text := res[0].(mcp.TextResourceContents).Text; !json.Valid([]byte(text)) {
		t.Fatalf("read: %s", text)
	}
	src := func(id string) ynotebook.Changes {
		return ynotebook.Changes{Cells: map[string]ynotebook.CellChange{id: {Source: true}}}
	}
	steps := []struct {
		what   string
		edit   func(c []ynotebook.Cell) []ynotebook.Cell
		ch     ynotebook.Changes
		notify bool
	}{
		{"typing below a code cell's first line", func(c []ynotebook.Cell) []ynotebook.Cell { c[1].Source += "\ndf.head()"; return c }, src("c1"), false},
		{"a new output text, same types", func(c []ynotebook.Cell) []ynotebook.Cell {
			c[1].Outputs = append([]map[string]any{{"output_type": "stream", "text": "other\n"}}, c[1].Outputs[1:]...)
			return c
		}, ynotebook.Changes{Cells: map[string]ynotebook.CellChange{"c1": {Outputs: true, OutputIndexes: []int{0}}}}, false},
		{"metadata", unchanged, ynotebook.Changes{Metadata: true, Cells: map[string]ynotebook.CellChange{"c1": {ExecutionCount: true}}}, false},
		{"a cell inserted", func(c []ynotebook.Cell) []ynotebook.Cell {
			return append(c, ynotebook.Cell{ID: "c2", CellType: "code", Source: "x = 1"})
		}, ynotebook.Changes{Added: []string{"c2"}}, true},
		{"a heading typed", func(c []ynotebook.Cell) []ynotebook.Cell { c[0].Source += "\n### Plot"; return c }, src("m1"), true},
		{"typing a first line", func(c []ynotebook.Cell) []ynotebook.Cell { c[2].Source = "x = 12"; return c }, src("c2"), true},
		{"an output added", func(c []ynotebook.Cell) []ynotebook.Cell {
			c[2].Outputs = []map[string]any{{"output_type": "execute_result", "data": map[string]any{"text/plain": "12"}}}
			return c
		}, ynotebook.Changes{Cells: map[string]ynotebook.CellChange{"c2": {Outputs: true, OutputIndexes: []int{0}}}}, true},
		{"nothing new", unchanged, src("c2"), false},
	}
	for _, s := range steps {
		l.edit(s.edit)
		got := e.changed("nb", "a.ipynb", s.ch)
		if want := s.notify; (len(got) == 1 && got[0] == "notebook://nb/outline") != want || (!want && len(got) != 0) {
			t.Errorf("%s: changed URIs = %v, want notified=%v", s.what, got, want)
		}
	}
}

func TestReadErrors(t *testing.T) {
	e := &Extension{lib: &lib{}, digests: map[string]uint64{}}
	for _, uri := range []string{"notebook://other/outline", "notebook://nb/outline", "notebook://a/b/outline"} {
		if _, err := e.read(context.Background(), uri); !errors.Is(err, extensions.ErrNotFound) {
			t.Errorf("read %s = %v, want not found", uri, err)
		}
	}
}

// TestFirstLineCostsItsLength: the first line of a cell of one line of 32 MB is cut
// without building more than what is returned; it built four times the line in runes.
func TestFirstLineCostsItsLength(t *testing.T) {
	src := "\n  " + strings.Repeat("é", 16<<20)
	var got string
	if n := testing.AllocsPerRun(1, func() { got = firstLine(src) }); n > 2 {
		t.Errorf("%v allocations", n)
	}
	if want := strings.Repeat("é", firstLineRunes) + "…"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_ = firstLine(src)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<10 {
		t.Errorf("the first line of %d MB allocated %d bytes", len(src)>>20, n)
	}
}

// TestOutlineHoldsNoCellWhole: what the outline shows of a cell is bounded whatever the
// store holds: a heading, a cell type, an output type and an output's MIME key of 8 MB
// each make an outline of a few hundred bytes (a heading of 60 MB was copied whole into
// each outline read, and 16 reads at once killed the process: red team of issue 39,
// pass 10, H1).
func TestOutlineHoldsNoCellWhole(t *testing.T) {
	huge := strings.Repeat("h", 8<<20)
	snap := ynotebook.NewSnapshot(
		ynotebook.Cell{ID: "m1", CellType: "markdown", Source: "# " + huge + "\n## short\n"},
		ynotebook.Cell{ID: "c1", CellType: huge},
		ynotebook.Cell{ID: "c2", CellType: ynotebook.CellCode, Outputs: []map[string]any{
			{"output_type": "display_data", "data": map[string]any{huge: "x"}, "metadata": map[string]any{}},
			{"output_type": huge},
		}},
	)
	body, err := json.Marshal(Of("nb", "nb.ipynb", snap))
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > 4<<10 {
		t.Fatalf("an outline of %d bytes: %.300s", len(body), body)
	}
	if !strings.Contains(string(body), `"text":"short"`) {
		t.Fatalf("the short heading is missing: %s", body)
	}
}
