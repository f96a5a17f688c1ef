package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// readMeta reads a text resource and returns its text and its contents' _meta.
func (g *goClient) readMeta(uri string) (string, map[string]any) {
	g.t.Helper()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := g.c.ReadResource(waitCtx(g.t, testenv.Wait), req)
	if err != nil {
		g.t.Fatalf("%s: read %s: %v", g.name(), uri, err)
	}
	if len(res.Contents) != 1 {
		g.t.Fatalf("%s: read %s: %d contents", g.name(), uri, len(res.Contents))
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok {
		g.t.Fatalf("%s: read %s: %T", g.name(), uri, res.Contents[0])
	}
	return tc.Text, tc.Meta
}

// fileReads counts the sidecar's log lines saying it read the notebook file p.
func (s *sidecar) fileReads(p string) int {
	s.logsMu.Lock()
	defer s.logsMu.Unlock()
	n := 0
	for line := range strings.SplitSeq(s.logs.String(), "\n") {
		var l struct{ Msg, Path string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "notebook file read" && l.Path == p {
			n++
		}
	}
	return n
}

// writeNotebookFile writes snap as the .ipynb at abs and returns its mtime.
func writeNotebookFile(t *testing.T, abs string, snap *ynotebook.Snapshot) time.Time {
	t.Helper()
	body, err := snap.JSON()
	if err != nil {
		t.Fatal(err)
	}
	// Out of band, as git or nbconvert would: a new file renamed over the old one.
	tmp := abs + ".tmp"
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, abs); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}

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
	fx := loadEventFixture(t)
	c := consumer{publisher: "{name: subscribers}"}
	if webhook {
		c = startReceiver(t)
	}
	nbs := notebookRooms(1)
	nb := nbs[0]

	// What the store holds, and the file once rewritten: c1's source edited.
	doc := ynotebook.New()
	if _, err := doc.Apply(fx.initial); err != nil {
		t.Fatal(err)
	}
	stored := doc.Snapshot()
	if _, err := doc.Apply(fx.edits["source-c1"]); err != nil {
		t.Fatal(err)
	}
	edited := doc.Snapshot()
	storedJSON, fileJSON := mustJSON(t, stored), mustJSON(t, edited)

	// The server saved the store's content to the file before the sidecar starts.
	dir := t.TempDir()
	abs := filepath.Join(dir, nb.path)
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		t.Fatal(err)
	}
	sc, w := startEventsSidecarIn(t, dir, c, nbs, fx, func() { writeNotebookFile(t, abs, stored) })
	if webhook {
		if ev := c.next(t, testenv.Wait).ev; ev.Seq != 1 || ev.Source != "" {
			t.Fatalf("load event %+v", ev)
		}
	}
	testenv.Eventually(t, testenv.Wait, "the saved file read", func() bool { return sc.fileReads(nb.path) >= 1 })

	const name = "nb"
	nbU, c1U, c2U := "notebook://"+name, cellURI(name, "c1"), cellURI(name, "c2")
	out0U := c1U + "/outputs/0"
	// The load's announcement is made before any name is bound, so no subscriber hears
	// it as if it were a later change's.
	const flushed = "jupyter_mcp_sidecar_changes_flushed_total"
	testenv.Eventually(t, testenv.Wait, "the load announced", func() bool { return sc.metric(flushed) >= 1 })
	gs := []*goClient{dialGo(t, sc.mcpURL(), false), dialGo(t, sc.mcpURL(), true)}
	for _, g := range gs {
		g.bind(name, nb.path)
		g.subscribe(nbU, c1U, c2U, out0U)
		if text, meta := g.readMeta(nbU); !jsonSame(text, storedJSON) || meta[resources.SourceKey] != nil {
			t.Fatalf("%s: before any rewrite, read %s with _meta %v, want the store's %s unmarked", g.name(), text, meta, storedJSON)
		}
	}
	// heard returns what g is notified of until it has heard every one of want.
	heard := func(g *goClient, want ...string) []string {
		var got []string
		for slices.ContainsFunc(want, func(u string) bool { return !slices.Contains(got, u) }) {
			got = append(got, testenv.Receive(t, testenv.Wait, fmt.Sprintf("%s notified of %v", g.name(), want), g.updates()))
		}
		return got
	}

	// The server's own save again (same content, a new mtime): nothing is announced (the
	// next announcement is the rewrite's).
	reads := sc.fileReads(nb.path)
	writeNotebookFile(t, abs, stored)
	testenv.Eventually(t, testenv.Wait, "the saved file read again", func() bool { return sc.fileReads(nb.path) > reads })

	// Rewritten out of band while no room writes: served from the file, announced.
	mtime := writeNotebookFile(t, abs, edited)
	if webhook {
		ev := c.next(t, testenv.Wait).ev
		if ev.Seq != 2 || ev.Source != "file" || ev.Room != nb.room || ev.FileID != nb.fileID || !ev.Time.Equal(mtime.UTC()) ||
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
				t.Fatalf("%s: notified of %v for the rewritten file, want %s and %s once", g.name(), got, nbU, c1U)
			}
		}
		text, meta := g.readMeta(nbU)
		if !jsonSame(text, fileJSON) || meta[resources.SourceKey] != "file" || meta[resources.ModTimeKey] != mtime.UTC().Format(time.RFC3339Nano) {
			t.Fatalf("%s: read of the rewritten file: %s with _meta %v, want %s marked from the file of mtime %v", g.name(), text, meta, fileJSON, mtime.UTC())
		}
		var cell struct {
			Meta map[string]any `json:"_meta"`
		}
		if text, meta := g.readMeta(c1U); json.Unmarshal([]byte(text), &cell) != nil || cell.Meta[resources.SourceKey] != "file" || meta[resources.SourceKey] != "file" {
			t.Fatalf("%s: cell read of the rewritten file: %s with _meta %v, not marked from the file", g.name(), text, meta)
		}
	}

	// The room reopens and loads the file: its rows hold what the file does. The store is
	// live again, unmarked, and nothing is announced.
	w.writeRoom(nb.room, fx.edits["source-c1"])
	for _, g := range gs {
		testenv.Eventually(t, testenv.Wait, g.name()+" reads the store, unmarked", func() bool {
			text, meta := g.readMeta(nbU)
			return jsonSame(text, fileJSON) && meta[resources.SourceKey] == nil && meta[resources.ModTimeKey] == nil
		})
	}
	// The barrier: an output of c1, from the store. Its announcement is the next one.
	w.writeRoom(nb.room, fx.edits["output-c1-0"])
	if webhook {
		if ev := c.next(t, testenv.Wait).ev; ev.Seq != 3 || ev.Source != "" ||
			!slices.Equal(ev.Changes.Cells["c1"].Parts, []string{publish.PartOutputs}) || len(ev.Changes.Cells) != 1 {
			t.Fatalf("the barrier's event = %+v, want the third, c1's output, from the store", ev)
		}
		const delivered = "jupyter_mcp_sidecar_publisher_delivered_total"
		testenv.Eventually(t, testenv.Wait, "3 events delivered", func() bool { return sc.metric(delivered) == 3 },
			func() string { return fmt.Sprintf("%v delivered", sc.metric(delivered)) })
		return
	}
	for _, g := range gs {
		if got := heard(g, nbU, c1U, out0U); len(got) != 3 {
			t.Fatalf("%s: notified of %v up to the barrier, want %s, %s and %s once", g.name(), got, nbU, c1U, out0U)
		}
	}
}
