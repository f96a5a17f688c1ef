package postgres

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

// sessionUpdates returns a recorded session's updates and their Y.mergeUpdates.
func sessionUpdates(t testing.TB, name string) (updates [][]byte, merged []byte) {
	t.Helper()
	s := ysessions.Load(t, name)
	return s.UpdateBytes(), s.Merged
}

// notebookJSON applies rows to a new notebook and returns its nbformat JSON.
func notebookJSON(t testing.TB, rows []ystore.Row) string {
	t.Helper()
	nb := ynotebook.New()
	for _, r := range rows {
		if _, err := nb.Apply(r.Update); err != nil {
			t.Fatalf("apply row %d: %v", r.ID, err)
		}
	}
	js, err := nb.Snapshot().JSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

func TestCompact(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	conn := dial(t, cfg)
	updates, _ := sessionUpdates(t, "s0000.json.gz")
	const room = ".notebook:0f1e2d3c.y"
	for _, u := range updates {
		insert(t, conn, cfg, room, u)
	}
	insert(t, conn, cfg, "other", []byte("not touched"))
	tl, c := runTailer(t, cfg)
	ev := c.waitFor(t, "load", func(ev []ystore.Event) bool { return len(ev) == 2 })
	want := notebookJSON(t, ev[0].Rows)

	res, err := Compact(ctx, conn, cfg, room)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != len(updates) || res.MergedBytes == 0 || res.MergedBytes >= res.Bytes {
		t.Errorf("result %+v for %d rows", res, len(updates))
	}
	t.Logf("compacted %d rows: %d → %d bytes", res.Rows, res.Bytes, res.MergedBytes)
	loaded, err := tl.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 2 || len(loaded[0].Rows) != 1 || loaded[1].Room != "other" {
		t.Fatalf("after compaction:%s", describe(loaded))
	}
	if got := notebookJSON(t, loaded[0].Rows); got != want {
		t.Errorf("compacted notebook differs:\n%s\nwant:\n%s", got, want)
	}
	// The running tailer gets the merged row as an idempotent update on top.
	ev = c.waitFor(t, "merged row", func(ev []ystore.Event) bool { return len(ev) == 3 })
	if ev[2].Kind != ystore.EventUpdates || len(ev[2].Rows) != 1 {
		t.Fatalf("events after compaction:%s", describe(ev[2:]))
	}
	if got := notebookJSON(t, append(ev[0].Rows, ev[2].Rows...)); got != want {
		t.Errorf("notebook with the merged row applied on top differs")
	}
	if res, err := Compact(ctx, conn, cfg, room); err != nil || res.Rows != 0 {
		t.Errorf("second compaction: %+v, %v; want nothing to do", res, err)
	}

	insert(t, conn, cfg, "bad", []byte("x"))
	insert(t, conn, cfg, "bad", []byte{0xff, 0xff})
	if _, err := Compact(ctx, conn, cfg, "bad"); !errors.Is(err, ErrCorruptRow) {
		t.Errorf("compacting corrupt rows: %v, want ErrCorruptRow", err)
	}
}

func TestCompactStore(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	conn := dial(t, cfg)
	// c.y holds a text in which a yjs client cut a surrogate pair (s0002): one merged row
	// would not hold what its rows hold (yjs.Doc.CutPairs), so it is left as it is.
	rooms := []string{".notebook:a.y", ".notebook:b.y", ".notebook:c.y"}
	for i, room := range rooms {
		updates, _ := sessionUpdates(t, []string{"s0001.json.gz", "s0004.json.gz", "s0002.json.gz"}[i])
		for _, u := range updates {
			insert(t, conn, cfg, room, u)
		}
	}
	tl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before, err := tl.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var reported []string
	if err := CompactStore(ctx, cfg, nil, func(room string, r CompactResult) {
		switch cut := room == rooms[2]; {
		case cut && (r.Rows != 0 || r.Skipped != ErrCutPairs.Error()):
			t.Errorf("%s: %+v, want it skipped: %v", room, r, ErrCutPairs)
		case !cut && r.Rows < 2:
			t.Errorf("%s: %+v", room, r)
		}
		reported = append(reported, room)
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reported, rooms) {
		t.Fatalf("compacted %v, want %v", reported, rooms)
	}
	after, err := tl.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range before {
		rows := 1
		if before[i].Room == rooms[2] {
			rows = len(before[i].Rows)
		}
		if len(after[i].Rows) != rows || notebookJSON(t, after[i].Rows) != notebookJSON(t, before[i].Rows) {
			t.Fatalf("room %s after compaction:%s", before[i].Room, describe(after[i:i+1]))
		}
	}
}
