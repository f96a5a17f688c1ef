package ynotebook

import (
	"os"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite/sqlitetest"
)

// divergenceDir holds a store the real Jupyter server wrote (jupyter-collaboration 5.0.4,
// pycrdt 0.14.13: two pycrdt clients typing concurrently) on which Yjs's reading, one row
// at a time, loses text that the server keeps; README.md there tells the story.
const divergenceDir = "testdata/yjs-order-divergence/"

// TestServerStoreDivergence reads the room of c0.ipynb one row at a time (the live tail),
// all at once (a cold start) and cold then live, and compares each with what the server
// saved. Yjs drops an item whose neighbour was collected with its deleted type (here the
// second 日本, inserted next to text of a cell moved away meanwhile); yrs keeps it.
func TestServerStoreDivergence(t *testing.T) {
	rows := sqlitetest.Rows(t, divergenceDir+"ystore.db", ".notebook:b8f289fb-62ea-44da-8b68-ed10c4d0d74c.y")
	if len(rows) != 45 {
		t.Fatalf("%d rows", len(rows))
	}
	b, err := os.ReadFile(divergenceDir + "c0-as-saved-by-the-server.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	saved, err := Parse(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	live := New()
	for i, u := range rows {
		if _, err := live.Apply(u); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	cold := New()
	if err := cold.Load(rows); err != nil {
		t.Fatal(err)
	}
	mid := New()
	if err := mid.Load(rows[:28]); err != nil {
		t.Fatal(err)
	}
	for _, u := range rows[28:] {
		if _, err := mid.Apply(u); err != nil {
			t.Fatal(err)
		}
	}
	for name, nb := range map[string]*Notebook{"one row at a time": live, "all at once": cold, "cold then live": mid} {
		s := nb.Snapshot()
		if got, want := cellList(s)[1].Source, "note🎉s日本a 🎉a日本éaa"; got != want {
			t.Errorf("%s: cell 1 is %q, the server holds %q", name, got, want)
		}
		if !Equivalent(s, saved) {
			got, _ := s.JSON()
			t.Errorf("%s: differs from the server's saved file:\n%s\nsaved:\n%s", name, got, b)
		}
	}
}
