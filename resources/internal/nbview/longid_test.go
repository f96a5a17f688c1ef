package nbview

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// TestLongCellIDsHaveNoURI: a cell whose id is longer than any URI the server accepts
// could name has no URI: none is built for it (a store's id of 60 MB made each change
// build its URIs, escaped, 3 times over: red team of issue 39, pass 9), none parses to
// it, and what changed since a version is answered by the notebook.
func TestLongCellIDsHaveNoURI(t *testing.T) {
	long := strings.Repeat("%", MaxCellIDBytes+1)
	edge := strings.Repeat("a", MaxCellIDBytes)
	if CellURI("nb", long) != "" || OutputURI("nb", long, 0) != "" {
		t.Fatal("a URI for a cell id longer than MaxCellIDBytes")
	}
	if ref, err := ParseURI("notebook://nb/cells/" + edge); err != nil || ref.CellID != edge {
		t.Fatalf("an id of MaxCellIDBytes: %v %v", ref, err)
	}
	if _, err := ParseURI("notebook://nb/cells/" + strings.Repeat("a", MaxCellIDBytes+1)); !errors.Is(err, ErrBadURI) {
		t.Fatalf("an id past MaxCellIDBytes parsed: %v", err)
	}

	huge := strings.Repeat("<", 32<<20)
	ch := ynotebook.Changes{Added: []string{huge, "c1"}, Cells: map[string]ynotebook.CellChange{huge: {OutputIndexes: []int{0}}}}
	var got []string
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got = ChangedURIs("nb", ch)
	runtime.ReadMemStats(&after)
	if want := []string{"notebook://nb", "notebook://nb/cells/c1"}; !slices.Equal(got, want) {
		t.Fatalf("changed URIs %q, want %q", got, want)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("the URIs of a change to a cell with an id of 32 MB allocated %d MB", n>>20)
	}

	old := ynotebook.NewSnapshot(ynotebook.Cell{ID: "c1", CellType: ynotebook.CellCode})
	cur := ynotebook.NewSnapshot(ynotebook.Cell{ID: "c1", CellType: ynotebook.CellCode}, ynotebook.Cell{ID: long, CellType: ynotebook.CellCode})
	if doc := Changes("nb", old, cur, Bounds{MaxAnswerBytes: 1 << 20, MaxValueBytes: 1 << 16}); doc.Status != StatusReadNotebook || doc.Reason != ReasonNoIDs {
		t.Fatalf("changes to a notebook with a cell no URI names: %s %s, want %s %s", doc.Status, doc.Reason, StatusReadNotebook, ReasonNoIDs)
	}
}
