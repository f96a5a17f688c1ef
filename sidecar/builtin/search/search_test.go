package search

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

func TestRequiredLiterals(t *testing.T) {
	tests := []struct {
		re   string
		want []string
	}{
		{`read_csv`, []string{"read_csv"}},
		{`pd\.read_(csv|parquet)\(`, []string{"pd.read_"}},
		{`ab(c)+d`, []string{"abc"}},
		{`foo.*bar`, []string{"foo", "bar"}},
		{`(?i)Load Data`, []string{"LOAD DATA"}}, // lowercased when trigrams are taken
		{`(?i)kiss`, []string{"i"}[:0]},          // k and s fold to non-ASCII runes: no trigram survives
		{`Élan`, []string{"Élan"}},
		{`a|bcd`, nil},
		{`^x{3}$`, []string{"xxx"}},
	}
	for _, tt := range tests {
		re, err := syntax.Parse(tt.re, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		got := requiredLiterals(re.Simplify())
		if len(got) == 0 && len(tt.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("requiredLiterals(%q) = %q, want %q", tt.re, got, tt.want)
		}
	}
}

func snapshot(cells ...ynotebook.Cell) *ynotebook.Snapshot { return ynotebook.NewSnapshot(cells...) }

func code(id, src string, outputs ...map[string]any) ynotebook.Cell {
	return ynotebook.Cell{ID: id, CellType: "code", Source: src, Outputs: outputs}
}

func stream(text string) map[string]any {
	return map[string]any{"output_type": "stream", "name": "stdout", "text": text}
}

func search(t *testing.T, ix *Index, q string, regex bool, o Options) Result {
	t.Helper()
	cq, err := Compile(q, regex)
	if err != nil {
		t.Fatal(err)
	}
	if o.Limit == 0 {
		o.Limit = 100
	}
	if o.Paths == nil {
		o.Paths = ix.Paths()
	}
	return ix.Search(context.Background(), cq, o)
}

func summary(r Result) string {
	var parts []string
	for _, h := range r.Hits {
		for _, l := range h.Lines {
			parts = append(parts, fmt.Sprintf("%s#%s:%s%d:%d:%s", h.Path, h.CellID, l.In, l.Output, l.Line, l.Text))
		}
	}
	return strings.Join(parts, " | ")
}

func TestSearch(t *testing.T) {
	ix := NewIndex()
	ix.Update("a.ipynb", snapshot(
		code("c1", "import pandas as pd\ndf = pd.read_csv('data.csv')\n", stream("Loaded 10 rows\n")),
		ynotebook.Cell{ID: "m1", CellType: "markdown", Source: "# Where the DATA is loaded"},
		code("c2", "plot(df)", map[string]any{"output_type": "display_data", "data": map[string]any{"image/png": "ZGF0YQ==", "text/plain": "<Figure data>"}}),
	), nil)
	ix.Update("b.ipynb", snapshot(code("x", "data = 1", map[string]any{"output_type": "error", "ename": "NameError", "evalue": "name 'data' is not defined",
		"traceback": []any{"Traceback", "NameError: data"}})), nil)
	tests := []struct {
		q     string
		regex bool
		o     Options
		want  string
	}{
		{"read_csv", false, Options{}, "a.ipynb#c1:source0:2:df = pd.read_csv('data.csv')"},
		{"LOADED", false, Options{}, "a.ipynb#c1:output0:1:Loaded 10 rows | a.ipynb#m1:source0:1:# Where the DATA is loaded"},
		{"data", false, Options{In: InOutputs},
			"a.ipynb#c2:output0:1:<Figure data> | b.ipynb#x:output0:1:NameError: name 'data' is not defined | b.ipynb#x:output0:3:NameError: data"},
		{"data", false, Options{In: InSource, Paths: []string{"b.ipynb"}}, "b.ipynb#x:source0:1:data = 1"},
		{`read_(csv|parquet)\(`, true, Options{}, "a.ipynb#c1:source0:2:df = pd.read_csv('data.csv')"},
		{`^#\s+\w+`, true, Options{}, "a.ipynb#m1:source0:1:# Where the DATA is loaded"},
		{"ZGF0", false, Options{}, ""}, // images are not text
		{"pd", false, Options{}, "a.ipynb#c1:source0:1:import pandas as pd | a.ipynb#c1:source0:2:df = pd.read_csv('data.csv')"},
	}
	for _, tt := range tests {
		if got := summary(search(t, ix, tt.q, tt.regex, tt.o)); got != tt.want {
			t.Errorf("search %q %+v =\n  %s\nwant\n  %s", tt.q, tt.o, got, tt.want)
		}
	}
	r := search(t, ix, "data", false, Options{Limit: 2})
	if len(r.Hits) != 2 || !r.Truncated {
		t.Errorf("limit 2: %d hits, truncated %v", len(r.Hits), r.Truncated)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q, _ := Compile("data", false)
	if r := ix.Search(ctx, q, Options{Limit: 10, Paths: ix.Paths()}); !r.TimedOut || len(r.Hits) != 0 {
		t.Errorf("an ended context: %+v", r)
	}
	if _, err := Compile("  ", false); err == nil {
		t.Error("empty query compiled")
	}
	if _, err := Compile("(", true); err == nil {
		t.Error("bad regexp compiled")
	}
}

func TestUpdateReindexesOnlyChangedCells(t *testing.T) {
	ix := NewIndex()
	ix.Update("a.ipynb", snapshot(code("c1", "alpha"), code("c2", "beta"), code("c3", "gamma")), nil)
	before := (*ix.books.Load())["a.ipynb"].cells
	ix.Update("a.ipynb", snapshot(code("c3", "gamma"), code("c1", "alpha!"), code("c4", "delta")),
		&ynotebook.Changes{Added: []string{"c4"}, Removed: []string{"c2"}, Moved: []string{"c3"},
			Cells: map[string]ynotebook.CellChange{"c1": {Source: true}}})
	after := (*ix.books.Load())["a.ipynb"].cells
	if after[0] != before[2] || after[1] == before[0] {
		t.Fatal("the moved cell must be reused and the edited one indexed again")
	}
	if got := summary(search(t, ix, "a", false, Options{})); got != "a.ipynb#c3:source0:1:gamma | a.ipynb#c1:source0:1:alpha! | a.ipynb#c4:source0:1:delta" {
		t.Fatalf("after the update: %s", got)
	}
	ix.Move("a.ipynb", "b.ipynb")
	ix.Remove("nothing.ipynb")
	if got := ix.Paths(); len(got) != 1 || got[0] != "b.ipynb" {
		t.Fatalf("paths after a move: %v", got)
	}
	ix.Remove("b.ipynb")
	if len(ix.Paths()) != 0 {
		t.Fatal("remove")
	}
}

// FuzzFilterNeverDropsAMatch checks the trigram filter against a plain scan:
// a field with a matching line always passes it.
func FuzzFilterNeverDropsAMatch(f *testing.F) {
	f.Add("df = pd.read_csv('x')\nplot()", "read_csv", false)
	f.Add("Élan KELVIN \u212a ſs", "(?i)kelvin", true)
	f.Add("aXbXc", "a.b", true)
	f.Add("\u212aelvin \u0130mport", "kelvin", false)
	f.Add("\u212aelvin \u0130mport", "import", false)
	f.Add("ab\ncd", "b\nc", false)
	f.Fuzz(func(t *testing.T, text, query string, regex bool) {
		q, err := Compile(query, regex)
		if err != nil {
			return
		}
		fld := newField(text)
		matched := false
		for line := range strings.Lines(text) {
			if q.matchLine(strings.TrimRight(line, "\r\n")) {
				matched = true
			}
		}
		if matched && !q.mayMatch(&fld) {
			t.Fatalf("filter dropped a match: text %q query %q regex %v", text, query, regex)
		}
		if regex {
			regexp.MustCompile(query)
		}
	})
}
