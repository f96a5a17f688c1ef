package sqlite

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// deleteRow deletes one row through a connection of its own, as an operator would.
func deleteRow(t *testing.T, path string, rowid int64) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM yupdates WHERE rowid = ?", rowid); err != nil {
		t.Fatal(err)
	}
}

// Rows removed from a room, by a squash or a delete, rebuild the room from the rows it
// has left (a Reset), so that nothing of a removed row stays delivered; other rooms are
// not re-delivered.
func TestRowsRemovedRebuildTheRoom(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			m := newModel(startWriter(t, path))
			m.write(roomA, "a1")
			bad := m.write(roomA, "bad")
			m.write(roomB, "b1")
			m.write(roomA, "a2")
			_, s := tailing(t, mode.cfg(path), m)
			resets := s.kinds(roomA)[ystore.EventReset]

			// An operator deletes the row; nothing is appended.
			deleteRow(t, path, bad.RowID)
			m.docs[roomA] = nil
			m.docs.apply(roomA, tokens("a1", "a2"))
			converge(t, s, m)
			if n := s.kinds(roomA)[ystore.EventReset]; n != resets+1 {
				t.Fatalf("room %s reset %d times after the delete, want %d", roomA, n, resets+1)
			}

			// A squash (pycrdt-store: the room's rows up to the cutoff replaced by one
			// merged row, then the update) without the marked token.
			bad = m.write(roomA, "bad")
			converge(t, s, m)
			m.w.Do(map[string]any{"op": "squash", "room": roomA, "merged": b64(tokens("a1", "a2")), "cutoff": bad.TS, "update": b64(tokens("a3"))})
			m.docs[roomA] = nil
			m.docs.apply(roomA, tokens("a1", "a2", "a3"))
			converge(t, s, m)
			if n := s.kinds(roomB)[ystore.EventReset]; n != 1 {
				t.Fatalf("unchanged room %s reset %d times, want 1 (the load)", roomB, n)
			}
			m.write(roomB, "b2")
			converge(t, s, m)
		})
	}
}

// A room asked for again (Reload) is delivered whole as a Reset, and only it; rows
// committed meanwhile are delivered too, and a room the store lacks is ignored.
func TestReloadDeliversTheRoomAgain(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			m := newModel(startWriter(t, path))
			m.write(roomA, "a1")
			m.write(roomB, "b1")
			tl, s := tailing(t, mode.cfg(path), m)
			resetsA, resetsB := s.kinds(roomA)[ystore.EventReset], s.kinds(roomB)[ystore.EventReset]

			// The room the store lacks is asked for first: once room A is delivered again, no
			// reload is left to run after b2 below (a reload delivers the rooms whose rows
			// changed too, and under load the two asks were taken in two rounds, the second
			// after b2: CI saw room B reset twice).
			tl.Reload("no such room")
			tl.Reload(roomA)
			testenv.Eventually(t, testenv.Wait, "room A delivered again", func() bool {
				return s.kinds(roomA)[ystore.EventReset] == resetsA+1
			})
			converge(t, s, m)
			m.write(roomB, "b2")
			converge(t, s, m) // the barrier: the write after it is delivered as an update
			if n := s.kinds(roomB)[ystore.EventReset]; n != resetsB {
				t.Fatalf("room %s reset %d times, want %d: only the room asked for is delivered again", roomB, n, resetsB)
			}
			if n := s.kinds(roomA)[ystore.EventReset]; n != resetsA+1 {
				t.Fatalf("room %s reset %d times, want %d", roomA, n, resetsA+1)
			}
		})
	}
}

// A file whose size or modification time changes while its rows do not (a WAL
// checkpoint, the pages of a commit in flight, a touch) is not a write outside SQLite:
// the tailer reads its newest row again, finds it unchanged, and reads nothing afresh.
// It re-opened the file and re-read it whole, redelivering a room another check had
// asked for (TestReloadDeliversTheRoomAgain failed under load).
func TestStampWithoutNewRowsReadsNothingAfresh(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	m := newModel(startWriter(t, path))
	m.write(roomA, "a1")
	reg := prometheus.NewRegistry()
	cfg := Config{Path: path, PollInterval: 20 * time.Millisecond, DisableFSNotify: true, Registerer: reg}
	tl, s := tailing(t, cfg, m)
	reopened := func() float64 {
		return testenv.Metric(t, reg, "jupyter_mcp_sidecar_sqlite_resyncs_total", "reason", reasonReopened)
	}
	for i := range 3 {
		at := time.Now().Add(time.Duration(i+1) * time.Second)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
		read := tl.Status().LastReadAt
		for range 2 { // two polls after the touch: the second started after it
			testenv.Eventually(t, testenv.Wait, "a poll", func() bool { return tl.Status().LastReadAt.After(read) })
			read = tl.Status().LastReadAt
		}
	}
	if n := reopened(); n != 0 {
		t.Fatalf("the store was re-read afresh %v times after touches that changed no row", n)
	}
	m.write(roomA, "a2")
	converge(t, s, m)
	if n := s.kinds(roomA)[ystore.EventReset]; n != 1 {
		t.Fatalf("room %s reset %d times, want 1 (the load)", roomA, n)
	}
}
