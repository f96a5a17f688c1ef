package rooms

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/versions"
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

// TestVersionsShareTheirBound: the versions of all a Set's rooms share changes.max_memory
// whether or not the Set has a memory bound (single mode has none by default): 40 rooms
// of a 2 MB cell each kept 16 MiB of versions apiece, 1.7 GB (red team pass 19b, N2).
func TestVersionsShareTheirBound(t *testing.T) {
	const rooms, limit = 10, 32 << 10
	updates, _ := loadSession(t, "s0001.json.gz")
	w := New(Config{Versions: versions.Config{MaxMemory: limit}}).Writer(nil)
	for k := range rooms {
		key := fmt.Sprintf("work/.notebook:n%d.ipynb.y", k)
		if err := w.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventReset, Room: key, Rows: rowsOf(key, updates[:1])}}); err != nil {
			t.Fatal(err)
		}
	}
	most := int64(0)
	for i := 1; i < len(updates); i++ {
		for k := range rooms {
			key := fmt.Sprintf("work/.notebook:n%d.ipynb.y", k)
			rows := rowsOf(key, updates[i:i+1])
			rows[0].ID = int64(i + 1)
			if err := w.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventUpdates, Room: key, Rows: rows}}); err != nil {
				t.Fatal(err)
			}
			most = max(most, w.versionsHeldByRooms())
		}
	}
	if most > 2*limit {
		t.Fatalf("the rooms' versions held %d B at most, past twice the shared bound of %d", most, limit)
	}
	if most < limit/2 {
		t.Fatalf("the rooms' versions held %d B at most: the session does not reach the bound of %d", most, limit)
	}
}

// versionsHeldByRooms sums what each room's versions hold (versions.History.Held), with
// a meter or without.
func (r *Set) versionsHeldByRooms() int64 {
	var n int64
	for _, rm := range r.snapshotRooms() {
		rm.mu.Lock()
		if rm.hist != nil {
			n += rm.hist.Held()
		}
		rm.mu.Unlock()
	}
	return n
}
