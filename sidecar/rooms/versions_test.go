package rooms

import (
	"sync/atomic"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// keptCount is a Metrics that keeps the versions kept.
type keptCount struct {
	noMetrics
	n atomic.Int64
}

func (k *keptCount) VersionsKept(n int) { k.n.Add(int64(n)) }

// TestVersionsOfTheRooms: a Set's versions follow what it serves; a replica fed the
// same rows in other batches, or loading them at once after a restart, gives the same
// versions and keeps every state the first one served; a removed room's versions are
// forgotten, and /metrics' count with them.
func TestVersionsOfTheRooms(t *testing.T) {
	const key = "work/.notebook:analysis.ipynb.y"
	const path = "work/analysis.ipynb"
	updates, _ := loadSession(t, "s0001.json.gz")
	rows := rowsOf(key, updates)
	m := &keptCount{}
	a := New(Config{Metrics: m}).Writer(nil)
	b := New(Config{}).Writer(nil)
	if err := a.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventReset, Room: key, Rows: rows[:1]}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventReset, Room: key, Rows: rows[:1]}}); err != nil {
		t.Fatal(err)
	}
	var seen []string // a's versions, row by row
	for i := 1; i < len(rows); i++ {
		if err := a.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventUpdates, Room: key, Rows: rows[i : i+1]}}); err != nil {
			t.Fatal(err)
		}
		s, err := a.Served(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) == 0 || seen[len(seen)-1] != s.Version {
			seen = append(seen, s.Version)
		}
		if i%7 == 0 || i == len(rows)-1 { // b: the same rows, seven at a time
			if err := b.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventUpdates, Room: key, Rows: rows[max(i-6, 1) : i+1]}}); err != nil {
				t.Fatal(err)
			}
			if got, _ := b.Served(path); got.Version != s.Version {
				t.Fatalf("row %d: replica gives %s, %s here", i, got.Version, s.Version)
			}
		}
	}
	if len(seen) < 10 {
		t.Fatalf("only %d versions in the session", len(seen))
	}
	for _, v := range seen {
		if _, ok := b.Kept(path, v); !ok {
			t.Fatalf("version %s served by one replica is unknown to the other, fed the same rows in batches", v)
		}
	}
	if got := m.n.Load(); got != int64(len(seen)+1) && got != int64(len(seen)) {
		t.Fatalf("versions_kept %d, want the %d versions served", got, len(seen))
	}

	// Restarted: the whole room loaded at once gives the version served last.
	c := New(Config{}).Writer(nil)
	if err := c.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventReset, Room: key, Rows: rows}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Served(path); got.Version != seen[len(seen)-1] {
		t.Fatalf("restarted: version %s, before %s", got.Version, seen[len(seen)-1])
	}

	// Removed: forgotten.
	if err := a.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventRemoved, Room: key}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Kept(path, seen[0]); ok {
		t.Fatal("a removed room's version is still kept")
	}
	if got := m.n.Load(); got != 0 {
		t.Fatalf("versions_kept %d after the room was removed", got)
	}
}
