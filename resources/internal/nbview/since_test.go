package nbview

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/changestest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

var wide = Bounds{MaxValueBytes: DefaultMaxValueBytes, MaxAnswerBytes: DefaultMaxAnswerBytes}

// applied applies the answer of old → cur, as JSON, to old's JSON, as an agent does.
func applied(t *testing.T, old, cur *ynotebook.Snapshot, b Bounds) ([]byte, changestest.Answer, error) {
	t.Helper()
	body, err := json.Marshal(Changes("w", old, cur, b))
	if err != nil {
		t.Fatal(err)
	}
	a, err := changestest.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := old.JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := changestest.Apply(prev, a)
	return got, a, err
}

func canonical(t *testing.T, s *ynotebook.Snapshot) []byte {
	t.Helper()
	b, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	c, err := changestest.Canonical(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestChangesApplyToLastRead is the property an agent relies on: over the edit
// histories real @jupyter/ydoc clients made concurrently (testdata/ysessions: cells
// inserted, deleted, moved, sources, outputs and metadata edited), the changes from any
// earlier snapshot to a later one, applied to the earlier read, give the later read
// exactly.
func TestChangesApplyToLastRead(t *testing.T) {
	sessions := ysessions.All(t)
	if testing.Short() {
		sessions = sessions[:40]
	}
	rng := rand.New(rand.NewPCG(41, 41))
	var ok, noIDs, pairs int
	for _, s := range sessions {
		nb := ynotebook.New()
		var snaps []*ynotebook.Snapshot
		for i, u := range s.Updates {
			if _, err := nb.Apply(u.Update); err != nil {
				t.Fatalf("%s update %d: %v", s.Name, i, err)
			}
			snaps = append(snaps, nb.Snapshot())
		}
		for i := 1; i < len(snaps); i++ {
			older := []int{i - 1} // the last read, and now and then an older one
			if i%4 == 0 {
				older = append(older, rng.IntN(i))
			}
			for _, j := range older {
				pairs++
				got, a, err := applied(t, snaps[j], snaps[i], wide)
				if a.Status == StatusReadNotebook && a.Reason == ReasonNoIDs {
					noIDs++
					continue
				}
				if err != nil {
					t.Fatalf("%s: changes %d → %d: %v", s.Name, j, i, err)
				}
				if want := canonical(t, snaps[i]); !bytes.Equal(got, want) {
					t.Fatalf("%s: changes %d → %d applied:\n%s\nfresh read:\n%s", s.Name, j, i, got, want)
				}
				ok++
			}
		}
	}
	t.Logf("%d pairs: %d applied exactly, %d with cells without unique ids (read_notebook)", pairs, ok, noIDs)
	if ok < pairs/2 {
		t.Fatalf("only %d of %d pairs were applied: the property is barely tested", ok, pairs)
	}
}

// TestChangesRandomEdits is the same property over random histories of every kind of
// edit, notebook metadata and cell types included, within the answer's bounds.
func TestChangesRandomEdits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 41))
	for round := range 300 {
		cells := randomCells(rng, rng.IntN(12))
		prev := snapshotOf(cells, nil)
		for step := range 20 {
			cells = edit(rng, cells)
			var md map[string]any
			if rng.IntN(4) == 0 {
				md = map[string]any{"kernelspec": map[string]any{"name": "python3"}, "n": float64(rng.IntN(3))}
			}
			cur := snapshotOf(cells, md)
			got, _, err := applied(t, prev, cur, wide)
			if err != nil {
				t.Fatalf("round %d step %d: %v", round, step, err)
			}
			if want := canonical(t, cur); !bytes.Equal(got, want) {
				t.Fatalf("round %d step %d: applied\n%s\nwant\n%s", round, step, got, want)
			}
			prev = cur
		}
	}
}

var nextID int

func randomCells(rng *rand.Rand, n int) []ynotebook.Cell {
	out := make([]ynotebook.Cell, n)
	for i := range out {
		out[i] = randomCell(rng)
	}
	return out
}

func randomCell(rng *rand.Rand) ynotebook.Cell {
	nextID++
	c := ynotebook.Cell{ID: "c" + strings.Repeat("x", rng.IntN(3)) + string(rune('a'+nextID%26)) + itoa(nextID), CellType: []string{ynotebook.CellCode, ynotebook.CellMarkdown, ynotebook.CellRaw}[rng.IntN(3)], Source: "x = 1"}
	if c.CellType == ynotebook.CellCode {
		c.Outputs = []map[string]any{}
	}
	return c
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// edit makes one random edit of cells: insert, delete, move, or change a part.
func edit(rng *rand.Rand, cells []ynotebook.Cell) []ynotebook.Cell {
	cells = append([]ynotebook.Cell(nil), cells...)
	if len(cells) == 0 {
		return append(cells, randomCell(rng))
	}
	i := rng.IntN(len(cells))
	c := cells[i]
	switch rng.IntN(9) {
	case 0:
		return append(cells[:i], append([]ynotebook.Cell{randomCell(rng)}, cells[i:]...)...)
	case 1:
		return append(cells[:i], cells[i+1:]...)
	case 2:
		cells = append(cells[:i], cells[i+1:]...)
		j := rng.IntN(len(cells) + 1)
		return append(cells[:j], append([]ynotebook.Cell{c}, cells[j:]...)...)
	case 3:
		c.Source += "\nprint('<&>')"
	case 4:
		if c.CellType == ynotebook.CellCode {
			c.Outputs = append(append([]map[string]any(nil), c.Outputs...), map[string]any{"output_type": "stream", "name": "stdout", "text": "hi\n"})
			c.ExecutionCount = float64(rng.IntN(9))
		}
	case 5:
		c.Metadata = map[string]any{"tags": []any{"t" + itoa(rng.IntN(5))}}
	case 6:
		c.Metadata = nil
	case 7:
		c.CellType = []string{ynotebook.CellCode, ynotebook.CellMarkdown, ynotebook.CellRaw}[rng.IntN(3)]
		c.Outputs, c.ExecutionCount = nil, nil
		if c.CellType == ynotebook.CellCode {
			c.Outputs = []map[string]any{}
		}
	case 8:
		if c.CellType == ynotebook.CellCode {
			c.Outputs = nil
		}
	}
	cells[i] = c
	return cells
}

func snapshotOf(cells []ynotebook.Cell, md map[string]any) *ynotebook.Snapshot {
	s := ynotebook.NewSnapshot(cells...)
	s.Metadata = md
	return s
}

// TestChangesBounds: a value over its bound is named by the URIs to read, an answer
// over its bound gives cells by URI (truncated), and one whose URIs alone exceed it says
// read_notebook; cells without unique ids say read_notebook too.
func TestChangesBounds(t *testing.T) {
	big := strings.Repeat("y", 100)
	code := func(id, src string, outs ...map[string]any) ynotebook.Cell {
		return ynotebook.Cell{ID: id, CellType: ynotebook.CellCode, Source: src, Outputs: append([]map[string]any{}, outs...)}
	}
	img := map[string]any{"output_type": "display_data", "data": map[string]any{"image/png": big}, "metadata": map[string]any{}}
	a := ynotebook.NewSnapshot(code("c1", "x"), code("c2", "y"))
	tests := []struct {
		name       string
		cur        *ynotebook.Snapshot
		b          Bounds
		status     string
		reason     string
		truncated  bool
		wantRead   []string
		applyError error
	}{
		{"large output named by URI", ynotebook.NewSnapshot(code("c1", "x", img), code("c2", "y")), Bounds{64, 4096}, StatusOK, "", false,
			[]string{"notebook://w/cells/c1", "notebook://w/cells/c1/outputs/0"}, changestest.ErrRead},
		{"large added cell named by URI", ynotebook.NewSnapshot(code("c1", "x"), code("c2", "y"), code("c3", big)), Bounds{64, 4096}, StatusOK, "", false,
			[]string{"notebook://w/cells/c3"}, changestest.ErrRead},
		{"answer over its bound", ynotebook.NewSnapshot(code("c1", big), code("c2", big)), Bounds{1024, 500}, StatusOK, "", true,
			[]string{"notebook://w/cells/c2"}, changestest.ErrRead},
		{"URIs alone over the bound", ynotebook.NewSnapshot(code("c1", "x1"), code("c2", "y2")), Bounds{1024, 200}, StatusReadNotebook, ReasonTooLarge, false, nil, changestest.ErrRead},
		{"cells without ids", ynotebook.NewSnapshot(code("", "x"), code("c2", "y")), wide, StatusReadNotebook, ReasonNoIDs, false, nil, changestest.ErrRead},
		{"within bounds", ynotebook.NewSnapshot(code("c2", "y"), code("c1", "x", img)), wide, StatusOK, "", false, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := Changes("w", a, tt.cur, tt.b)
			if doc.Status != tt.status || doc.Reason != tt.reason || doc.Truncated != tt.truncated {
				t.Fatalf("status %s reason %q truncated %v; want %s %q %v: %+v", doc.Status, doc.Reason, doc.Truncated, tt.status, tt.reason, tt.truncated, doc)
			}
			var read []string
			for _, c := range doc.Added {
				read = append(read, c.Read...)
			}
			for _, c := range doc.Changed {
				read = append(read, c.Read...)
			}
			if strings.Join(read, " ") != strings.Join(tt.wantRead, " ") {
				t.Fatalf("URIs to read %q; want %q", read, tt.wantRead)
			}
			doc.Version, doc.Since = "v1."+strings.Repeat("A", 22), "v1."+strings.Repeat("B", 22)
			if body, _ := json.Marshal(doc); len(body) > tt.b.MaxAnswerBytes && doc.Status == StatusOK {
				t.Fatalf("answer of %d bytes over its bound %d", len(body), tt.b.MaxAnswerBytes)
			}
			_, _, err := applied(t, a, tt.cur, tt.b)
			if !errors.Is(err, tt.applyError) {
				t.Fatalf("apply: %v; want %v", err, tt.applyError)
			}
		})
	}
}

func TestParseChangesURI(t *testing.T) {
	long := strings.Repeat("v", 5000)
	tests := []struct {
		uri, name, since string
		bad              bool
	}{
		{"notebook://w/changes?since=v1.abc", "w", "v1.abc", false},
		{"notebook://w/changes", "w", "", false},
		{"notebook://w/changes?since=a%2Fb", "w", "a/b", false},
		{"notebook://w/changes?since=a&x=1", "w", "since=a&x=1", false},
		{"notebook://w/changes?since=" + long, "w", ("since=" + long)[:maxSinceBytes], false},
		{"notebook://w/changes/x", "", "", true},
		{"notebook://../changes?since=x", "", "", true},
		{"file://w/changes", "", "", true},
	}
	for _, tt := range tests {
		name, since, err := ParseChangesURI(tt.uri)
		if (err != nil) != tt.bad || name != tt.name || since != tt.since {
			t.Errorf("ParseChangesURI(%.60q) = %q, %.40q, %v", tt.uri, name, since, err)
		}
	}
}

// benchSnapshots are the notebook of n code cells of testdata/changesbench/gen.py (a
// 20-line source and a 50-line stream output each, as jupyter_ydoc writes them) after
// its output edit, and the same after one keystroke: two snapshots of one document,
// sharing the cells the keystroke did not touch, as a room's do.
func benchSnapshots(b *testing.B, n int) (*ynotebook.Snapshot, *ynotebook.Snapshot) {
	b.Helper()
	py := jupytertest.Need(b)
	out, err := exec.Command(py, "../../../testdata/changesbench/gen.py", "1", itoa(n)).Output()
	if err != nil {
		b.Fatalf("gen.py: %v", err)
	}
	var gen struct {
		Initial string     `json:"initial"`
		Output  []string   `json:"output"`
		Keys    [][]string `json:"keys"`
	}
	if err := json.Unmarshal(out, &gen); err != nil {
		b.Fatal(err)
	}
	nb := ynotebook.New()
	apply := func(updates ...string) *ynotebook.Snapshot {
		for _, u := range updates {
			raw, err := base64.StdEncoding.DecodeString(u)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := nb.Apply(raw); err != nil {
				b.Fatal(err)
			}
		}
		return nb.Snapshot()
	}
	old := apply(append([]string{gen.Initial}, gen.Output...)...)
	return old, apply(gen.Keys[0]...)
}

// BenchmarkChanges is the CPU of one changes answer after one keystroke, the diff, its
// rendering and its JSON, at 30, 300 and 1,500 cells (docs/BENCHMARKS.md).
func BenchmarkChanges(b *testing.B) {
	for _, n := range []int{30, 300, 1500} {
		b.Run(itoa(n)+"cells", func(b *testing.B) {
			old, cur := benchSnapshots(b, n)
			for b.Loop() {
				doc := Changes("w", old, cur, wide)
				if doc.Status != StatusOK || len(doc.Changed) != 1 {
					b.Fatalf("%+v", doc)
				}
				if _, err := json.Marshal(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestChangesOfKeysOutsideNBFormat: a cell key outside nbformat that appears (here with
// a null value, which get() shows as well) is told, with the whole cell, so that the
// agent's copy has it too.
func TestChangesOfKeysOutsideNBFormat(t *testing.T) {
	raw, err := os.ReadFile("../../../ystore/ynotebook/testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name    string   `json:"name"`
		Updates [][]byte `json:"updates"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	nb := ynotebook.New()
	for _, c := range cases {
		if c.Name != "create" {
			continue
		}
		for _, u := range c.Updates {
			if _, err := nb.Apply(u); err != nil {
				t.Fatal(err)
			}
		}
	}
	old := nb.Snapshot()
	// the raw cell gains the key "0000" with a null value (FuzzApply's 1878e328c466a0dc)
	if _, err := nb.Apply([]byte("\x01\x03\a/(0\a!\x040000\x01\x7f#000\x0500000\x03000C00\x010\x00")); err != nil {
		t.Fatal(err)
	}
	cur := nb.Snapshot()
	if bytes.Equal(canonical(t, old), canonical(t, cur)) {
		t.Fatal("the update changed nothing served: the test no longer tests a new key")
	}
	got, a, err := applied(t, old, cur, wide)
	if err != nil {
		t.Fatal(err)
	}
	if want := canonical(t, cur); !bytes.Equal(got, want) {
		t.Fatalf("changes applied (%+v):\n%s\nfresh read:\n%s", a, got, want)
	}
}
