package sqlite

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

// notebookJSON renders updates applied in order as nbformat JSON.
func notebookJSON(t *testing.T, updates ...[]byte) string {
	t.Helper()
	nb := ynotebook.New()
	for _, u := range updates {
		if _, err := nb.Apply(u); err != nil {
			t.Fatal(err)
		}
	}
	b, err := nb.Snapshot().JSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// notebooks serves delivered rows as notebooks, the way the sidecar does.
type notebooks struct {
	mu  sync.Mutex
	t   *testing.T
	nbs map[string]*ynotebook.Notebook
}

func (n *notebooks) deliver(_ context.Context, events []ystore.Event) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range events {
		if e.Kind != ystore.EventUpdates || n.nbs[e.Room] == nil {
			n.nbs[e.Room] = ynotebook.New()
		}
		if e.Kind == ystore.EventRemoved {
			delete(n.nbs, e.Room)
		}
		for _, r := range e.Rows {
			if _, err := n.nbs[e.Room].Apply(r.Update); err != nil {
				n.t.Errorf("room %s row %d: %v", e.Room, r.ID, err)
			}
		}
	}
	return nil
}

func (n *notebooks) json(room string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	nb := n.nbs[room]
	if nb == nil {
		return ""
	}
	b, err := nb.Snapshot().JSON()
	if err != nil {
		n.t.Fatal(err)
	}
	return string(b)
}

// TestYjsSessions stores two recorded sessions like Jupyter does, with a checkpoint, a
// squash that reuses rowids, and tailing from the middle, and checks that the served
// notebooks equal Yjs's.
func TestYjsSessions(t *testing.T) {
	a, b := ysessions.Load(t, "s0000.json.gz"), ysessions.Load(t, "s0001.json.gz")
	path := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
	w := startWriter(t, path)
	write := func(room string, u []byte) {
		w.Do(map[string]any{"op": "write", "room": room, "update": base64.StdEncoding.EncodeToString(u)})
	}
	nbs := &notebooks{t: t, nbs: map[string]*ynotebook.Notebook{}}
	tl := newTailer(t, Config{Path: path})
	doc := yjs.NewDoc()
	for i, u := range a.Updates {
		if _, err := doc.ApplyUpdate(u.Update); err != nil {
			t.Fatal(err)
		}
		switch {
		case i == 40:
			state, err := doc.EncodeStateAsUpdate(nil)
			if err != nil {
				t.Fatal(err)
			}
			w.Do(map[string]any{"op": "checkpoint", "room": roomA, "state": b64(state), "update": b64(u.Update)})
		default:
			write(roomA, u.Update)
		}
		if i < len(b.Updates) {
			write(roomB, b.Updates[i].Update)
		}
		if i == 30 {
			runTailer(t, tl, nbs.deliver)
		}
	}
	for _, u := range b.Updates[min(len(a.Updates), len(b.Updates)):] {
		write(roomB, u.Update)
	}
	w.Do(map[string]any{"op": "squash", "room": roomB, "merged": b64(b.Merged), "cutoff": 1e12})
	want := map[string]string{roomA: notebookJSON(t, a.Merged), roomB: notebookJSON(t, b.Merged)}
	for room, nb := range want {
		testenv.Eventually(t, testenv.Wait, "notebook "+room, func() bool { return nbs.json(room) == nb })
	}
	events, err := tl.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	loaded := &notebooks{t: t, nbs: map[string]*ynotebook.Notebook{}}
	loaded.deliver(context.Background(), events)
	for room, nb := range want {
		if got := loaded.json(room); got != nb {
			t.Errorf("Load of %s:\n%s\nwant\n%s", room, got, nb)
		}
	}
	if events[0].Rows[0].ID != 0 {
		t.Errorf("room %s loads without its checkpoint", roomA)
	}
}
