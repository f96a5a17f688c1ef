package store

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// TestNotebookFileOnDisk: the .ipynb is part of the truth where no room is open. A file
// equal to the store (the server's own save), at start and rewritten later, changes
// nothing. The file rewritten out of band while no room writes is served, marked as from
// the file (notebook and cell reads), and announced: to subscribers of both eras with the
// notebook and changed cell URIs only (the default publisher), and as an event with
// source "file" (the webhook). The room reopening and writing what the file holds makes
// the store live again, unmarked, with nothing announced: the next announcement is the
// barrier edit's.
func TestNotebookFileOnDisk(t *testing.T) {
	t.Run("subscribers", func(t *testing.T) { testNotebookFileOnDisk(t, false) })
	t.Run("webhook", func(t *testing.T) { testNotebookFileOnDisk(t, true) })
}

func testNotebookFileOnDisk(t *testing.T, webhook bool) {
	fx := sidecartest.LoadEventFixture(t)
	c := sidecartest.Consumer{Publisher: "{name: subscribers}"}
	if webhook {
		c = sidecartest.StartReceiver(t)
	}
	nbs := sidecartest.NotebookRooms(1)
	nb := nbs[0]

	// What the store holds, and the file once rewritten: c1's source edited.
	doc := ynotebook.New()
	if _, err := doc.Apply(fx.Initial); err != nil {
		t.Fatal(err)
	}
	stored := doc.Snapshot()
	if _, err := doc.Apply(fx.Edits["source-c1"]); err != nil {
		t.Fatal(err)
	}
	edited := doc.Snapshot()
	storedJSON, fileJSON := sidecartest.MustJSON(t, stored), sidecartest.MustJSON(t, edited)
	// Served from the file, the notebook is what get() returns once the server has loaded
	// it into a room: YNotebook.set() adds the kernelspec and language_info placeholders
	// a file without them lacks (docs/COMPATIBILITY.md).
	fromFile := withPlaceholders(t, fileJSON)

	// The server saved the store's content to the file before the sidecar starts.
	dir := t.TempDir()
	abs := filepath.Join(dir, nb.Path)
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		t.Fatal(err)
	}
	sc, w := sidecartest.StartEventsSidecarIn(t, dir, c, nbs, fx, func() { sidecartest.WriteNotebookFile(t, abs, stored) })
	if webhook {
		if ev := c.Next(t, testenv.Wait).Ev; ev.Seq != 1 || ev.Source != "" {
			t.Fatalf("load event %+v", ev)
		}
	}
	testenv.Eventually(t, testenv.Wait, "the saved file read", func() bool { return sc.FileReads(nb.Path) >= 1 })

	const name = "nb"
	nbU, c1U, c2U := "notebook://"+name, sidecartest.CellURI(name, "c1"), sidecartest.CellURI(name, "c2")
	out0U := c1U + "/outputs/0"
	// The load's announcement is made before any name is bound, so no subscriber hears
	// it as if it were a later change's.
	const flushed = "jupyter_mcp_sidecar_changes_flushed_total"
	testenv.Eventually(t, testenv.Wait, "the load announced", func() bool { return sc.Metric(flushed) >= 1 })
	gs := []*sidecartest.GoClient{sidecartest.DialGo(t, sc.MCPURL(), false), sidecartest.DialGo(t, sc.MCPURL(), true)}
	for _, g := range gs {
		g.Bind(name, nb.Path)
		g.Subscribe(nbU, c1U, c2U, out0U)
		if text, meta := g.ReadMeta(nbU); !sidecartest.JSONSame(text, storedJSON) || meta[resources.SourceKey] != nil {
			t.Fatalf("%s: before any rewrite, read %s with _meta %v, want the store's %s unmarked", g.Name(), text, meta, storedJSON)
		}
	}
	// heard returns what g is notified of until it has heard every one of want.
	heard := func(g *sidecartest.GoClient, want ...string) []string {
		var got []string
		for slices.ContainsFunc(want, func(u string) bool { return !slices.Contains(got, u) }) {
			got = append(got, testenv.Receive(t, testenv.Wait, fmt.Sprintf("%s notified of %v", g.Name(), want), g.Updates()))
		}
		return got
	}

	// The server's own save again (same content, a new mtime): nothing is announced (the
	// next announcement is the rewrite's).
	reads := sc.FileReads(nb.Path)
	sidecartest.WriteNotebookFile(t, abs, stored)
	testenv.Eventually(t, testenv.Wait, "the saved file read again", func() bool { return sc.FileReads(nb.Path) > reads })

	// Rewritten out of band while no room writes: served from the file, announced.
	mtime := sidecartest.WriteNotebookFile(t, abs, edited)
	if webhook {
		ev := c.Next(t, testenv.Wait).Ev
		if ev.Seq != 2 || ev.Source != "file" || ev.Room != nb.Room || ev.FileID != nb.FileID || !ev.Time.Equal(mtime.UTC()) ||
			!slices.Equal(slices.Sorted(maps.Keys(ev.Changes.Cells)), []string{"c1"}) ||
			!slices.Equal(ev.Changes.Cells["c1"].Parts, []string{publish.PartSource}) ||
			len(ev.Changes.Added)+len(ev.Changes.Removed)+len(ev.Changes.Moved) != 0 ||
			!slices.Contains(ev.URIs, nbU) || !slices.Contains(ev.URIs, c1U) || slices.Contains(ev.URIs, c2U) {
			t.Fatalf("event of the rewritten file (mtime %v) = %+v", mtime.UTC(), ev)
		}
	}
	for _, g := range gs {
		if !webhook {
			if got := heard(g, nbU, c1U); len(got) != 2 {
				t.Fatalf("%s: notified of %v for the rewritten file, want %s and %s once", g.Name(), got, nbU, c1U)
			}
		}
		text, meta := g.ReadMeta(nbU)
		if !sidecartest.JSONSame(text, fromFile) || meta[resources.SourceKey] != "file" || meta[resources.ModTimeKey] != mtime.UTC().Format(time.RFC3339Nano) {
			t.Fatalf("%s: read of the rewritten file: %s with _meta %v, want %s marked from the file of mtime %v", g.Name(), text, meta, fromFile, mtime.UTC())
		}
		var cell struct {
			Meta map[string]any `json:"_meta"`
		}
		if text, meta := g.ReadMeta(c1U); json.Unmarshal([]byte(text), &cell) != nil || cell.Meta[resources.SourceKey] != "file" || meta[resources.SourceKey] != "file" {
			t.Fatalf("%s: cell read of the rewritten file: %s with _meta %v, not marked from the file", g.Name(), text, meta)
		}
	}

	// The room reopens and loads the file: its rows hold what the file does. The store is
	// live again, unmarked, and nothing is announced.
	w.WriteRoom(nb.Room, fx.Edits["source-c1"])
	for _, g := range gs {
		testenv.Eventually(t, testenv.Wait, g.Name()+" reads the store, unmarked", func() bool {
			text, meta := g.ReadMeta(nbU)
			return sidecartest.JSONSame(text, fileJSON) && meta[resources.SourceKey] == nil && meta[resources.ModTimeKey] == nil
		})
	}
	// The barrier: an output of c1, from the store. Its announcement is the next one.
	w.WriteRoom(nb.Room, fx.Edits["output-c1-0"])
	if webhook {
		if ev := c.Next(t, testenv.Wait).Ev; ev.Seq != 3 || ev.Source != "" ||
			!slices.Equal(ev.Changes.Cells["c1"].Parts, []string{publish.PartOutputs}) || len(ev.Changes.Cells) != 1 {
			t.Fatalf("the barrier's event = %+v, want the third, c1's output, from the store", ev)
		}
		const delivered = "jupyter_mcp_sidecar_publisher_delivered_total"
		testenv.Eventually(t, testenv.Wait, "3 events delivered", func() bool { return sc.Metric(delivered) == 3 },
			func() string { return fmt.Sprintf("%v delivered", sc.Metric(delivered)) })
		return
	}
	for _, g := range gs {
		if got := heard(g, nbU, c1U, out0U); len(got) != 3 {
			t.Fatalf("%s: notified of %v up to the barrier, want %s, %s and %s once", g.Name(), got, nbU, c1U, out0U)
		}
	}
}

// withPlaceholders is the notebook JSON nb with the metadata placeholders jupyter_ydoc's
// YNotebook.set() adds where the file has none.
func withPlaceholders(t *testing.T, nb []byte) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(nb, &doc); err != nil {
		t.Fatal(err)
	}
	meta, _ := doc["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	if _, ok := meta["kernelspec"]; !ok {
		meta["kernelspec"] = map[string]any{"display_name": "", "name": ""}
	}
	if _, ok := meta["language_info"]; !ok {
		meta["language_info"] = map[string]any{"name": ""}
	}
	doc["metadata"] = meta
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
