package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// scanStore writes a pycrdt-store file at path whose rows are stmts' (path, update,
// timestamp) in rowid order, and checkpoints (path, timestamp).
func scanStore(t *testing.T, path string, rows [][3]any, ckpts [][2]any, extra ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range append([]string{
		"CREATE TABLE yupdates (path TEXT NOT NULL, yupdate BLOB, metadata BLOB, timestamp REAL NOT NULL)",
		"CREATE INDEX idx_yupdates_path_timestamp ON yupdates (path, timestamp)",
		"CREATE TABLE ycheckpoints (path TEXT NOT NULL, checkpoint BLOB NOT NULL, timestamp REAL NOT NULL, PRIMARY KEY(path))",
	}, extra...) {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rows {
		if _, err := db.Exec("INSERT INTO yupdates VALUES (?, ?, x'', ?)", r[0], r[1], r[2]); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range ckpts {
		if _, err := db.Exec("INSERT INTO ycheckpoints VALUES (?, x'c0', ?)", c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
}

// key is a row as a test compares it.
func key(r ystore.Row) string { return fmt.Sprintf("%d@%g:%x", r.ID, r.Timestamp, r.Update) }

// passAndStreams loads tl's store, whose rooms must number n, streamed, and returns the
// rows (key) the one pass over them (Event.Scan) hands each room, those each room's own
// Stream hands, and the rooms the pass restarted.
func passAndStreams(t *testing.T, tl *Tailer, n int) (pass, streams map[string][]string, restarted []string) {
	t.Helper()
	pass, streams = map[string][]string{}, map[string][]string{}
	err := tl.LoadStream(t.Context(), func(ctx context.Context, events []ystore.Event) error {
		if len(events) != n || events[0].Scan == nil {
			t.Fatalf("%d events, the first's Scan %v: want %d sharing one", len(events), events[0].Scan, n)
		}
		for _, ev := range events {
			if ev.Scan != events[0].Scan {
				t.Fatalf("%s has a Scan of its own", ev.Room)
			}
			streams[ev.Room] = []string{}
			err := ev.Stream(ctx, func(rows []ystore.Row) error {
				for _, r := range rows {
					streams[ev.Room] = append(streams[ev.Room], key(r))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return events[0].Scan.Each(ctx, func(rows []ystore.Row) error {
			if len(rows) > tl.cfg.ChunkRows {
				t.Errorf("chunk of %d rows, want at most ChunkRows", len(rows))
			}
			for _, r := range rows {
				pass[r.Room] = append(pass[r.Room], key(r))
			}
			return nil
		}, func(room string) error {
			restarted = append(restarted, room)
			pass[room] = nil
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return pass, streams, restarted
}

// A load of every room reads them in one pass (the events share a Scan), and hands each
// room exactly the rows its own Stream does, in the same order: its checkpoint, then its
// rows stamped at or after it, by timestamp then rowid. A room whose rows are not stored
// in that order (a writer's clock went back) is restarted and read again alone; the
// others never are. Rows at rowid 0 or below count; a room without a checkpoint loads
// from timestamp 0, as pycrdt-store loads it. The plan's summaries are the rows' in rowid
// order. A load of some of the store's rooms (past MaxRooms) reads them room by room.
func TestScanReadsLoadOrder(t *testing.T) {
	const a, b, c, d = "ra", "rb", "rc", "rd"
	rows := [][3]any{
		{a, []byte{1}, 10.0}, {b, []byte{1}, 3.0}, {c, []byte{1}, 10.0}, {d, []byte{1}, 7.0},
		{a, []byte{2}, 11.0}, {b, []byte{2}, 5.0}, {c, []byte{2}, 12.0}, {d, []byte{2}, 7.0},
		{a, []byte{3}, 11.0}, {b, []byte{3}, 6.0}, {c, []byte{3}, 11.0}, {d, []byte{3}, 8.0}, // c goes back
		{a, []byte{4}, 12.0}, {b, []byte{4}, 7.0}, {c, []byte{4}, 13.0}, {d, []byte{4}, 8.0},
	}
	path := filepath.Join(t.TempDir(), "store.db")
	scanStore(t, path, rows, [][2]any{{b, 5.0}}, // b's rows before 5 are in its checkpoint
		// A crafted store's rowids at or below 0 are rows too; a room without a
		// checkpoint loads from timestamp 0, as pycrdt-store loads it.
		"INSERT INTO yupdates (rowid, path, yupdate, metadata, timestamp) VALUES (-7, 'ra', x'09', x'', 9.0), (0, 'rd', x'08', x'', -1.0)")
	tl := newTailer(t, Config{Path: path, ChunkRows: 3})
	got, want, restarted := passAndStreams(t, tl, 4)
	for room := range want {
		if !slices.Equal(got[room], want[room]) {
			t.Errorf("%s: the pass handed %v, its stream %v", room, got[room], want[room])
		}
	}
	if !slices.Equal(restarted, []string{c}) {
		t.Errorf("restarted %v, want [%s]: the room whose clock went back, alone", restarted, c)
	}
	if first := "-7@9:09"; len(got[a]) != 5 || got[a][0] != first {
		t.Errorf("%s: %v, want 5 rows from %s (rowid -7)", a, got[a], first)
	}
	if slices.Contains(got[d], "0@-1:08") {
		t.Errorf("%s: %v holds its row stamped before 0", d, got[d])
	}
	p, err := tl.readPlanOnce(t)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for room, rp := range p.rooms {
		var s summary
		q, err := db.Query("SELECT rowid, timestamp FROM yupdates WHERE path = ? ORDER BY rowid", room)
		if err != nil {
			t.Fatal(err)
		}
		for q.Next() {
			var r ystore.Row
			if err := q.Scan(&r.ID, &r.Timestamp); err != nil {
				t.Fatal(err)
			}
			s.add(r)
		}
		q.Close()
		if rp.sum != s {
			t.Errorf("%s: plan's summary %+v, its rows' %+v", room, rp.sum, s)
		}
	}
	for room, n := range map[string]int64{a: 5, b: 4, d: 4} {
		if got := p.rooms[room].rows; got != n {
			t.Errorf("%s: a load of %d rows planned, want %d", room, got, n)
		}
	}
	// Past MaxRooms the plan leaves rooms out: a pass would read their rows for nothing.
	bounded := newTailer(t, Config{Path: path, MaxRooms: 1})
	err = bounded.LoadStream(t.Context(), func(ctx context.Context, events []ystore.Event) error {
		if len(events) != 2 || events[0].Scan != nil {
			t.Errorf("a load past MaxRooms 1: %d events, Scan %v; want 2 and none", len(events), events[0].Scan)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readPlanOnce reads tl's store's plan on a connection of its own.
func (t *Tailer) readPlanOnce(tb testing.TB) (*plan, error) {
	st, err := t.open(tb.Context())
	if err != nil {
		return nil, err
	}
	defer st.close()
	return st.readPlan(tb.Context(), t.cfg.ChunkRows, t.cfg.followLimit(), nil)
}

// A store's yupdates and ycheckpoints must be plain tables: a view, or a table with a
// computed column, computes what a read returns, so that a store of a few kilobytes
// could make a read run forever (a recursive view), build gigabytes (zeroblob), or call
// the plan's fold, the sidecar's own SQL function, to hand rows to another store's plan
// under way in the same process (hub mode). Such a store is refused at once.
func TestStoreTablesArePlain(t *testing.T) {
	for _, tt := range []struct {
		name   string
		schema []string
	}{
		{"a view", []string{
			"ALTER TABLE yupdates RENAME TO real_updates",
			"CREATE VIEW yupdates AS SELECT rowid AS rowid, path, yupdate, metadata, timestamp FROM real_updates",
			"INSERT INTO real_updates VALUES ('p', x'00', x'', 1.0)",
		}},
		{"a view calling the fold", []string{
			"ALTER TABLE yupdates RENAME TO real_updates",
			"CREATE VIEW yupdates AS SELECT rowid AS rowid, path, yupdate, metadata, " + foldFunc + "(1, 'injected', 1, 1.0, NULL) AS timestamp FROM real_updates",
		}},
		{"a recursive view", []string{
			"DROP TABLE yupdates",
			"CREATE VIEW yupdates AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n AS rowid, 'p' AS path, x'00' AS yupdate, NULL AS metadata, n AS timestamp FROM r",
		}},
		{"a computed column", []string{
			"DROP TABLE yupdates",
			"CREATE TABLE yupdates (path TEXT NOT NULL, yupdate BLOB GENERATED ALWAYS AS (zeroblob(100000000)) VIRTUAL, metadata BLOB, timestamp REAL NOT NULL)",
			"INSERT INTO yupdates (path, metadata, timestamp) VALUES ('p', x'', 1.0)",
		}},
		{"a collation", []string{ // NOCASE: a room's rows would be another key's too
			"DROP TABLE yupdates",
			"CREATE TABLE yupdates (path TEXT NOT NULL COLLATE NOCASE, yupdate BLOB, metadata BLOB, timestamp REAL NOT NULL)",
			"INSERT INTO yupdates VALUES ('p', x'00', x'', 1.0)",
		}},
		{"checkpoints in a view", []string{
			"DROP TABLE ycheckpoints",
			"CREATE VIEW ycheckpoints AS SELECT path, yupdate AS checkpoint, timestamp FROM yupdates",
			"INSERT INTO yupdates VALUES ('p', x'00', x'', 1.0)",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			scanStore(t, path, nil, nil, tt.schema...)
			tl := newTailer(t, Config{Path: path})
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			st, err := tl.open(ctx)
			if err == nil {
				defer st.close()
				_, err = st.readPlan(ctx, tl.cfg.ChunkRows, 0, nil)
			}
			if !errors.Is(err, ErrNotTable) {
				t.Fatalf("plan: %v, want %v", err, ErrNotTable)
			}
		})
	}
}

// A row stamped NULL (a crafted store's; pycrdt-store's schema forbids it) is no room's:
// pycrdt-store reads a room `WHERE timestamp >= ?`. A row stamped with text is one, after
// every row stamped with a number, as SQLite compares and orders them. The store stays
// readable whichever row it is, the newest included, at a load and while the tailer
// follows.
func TestOddlyStampedRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	scanStore(t, path, nil, nil,
		"DROP TABLE yupdates",
		"CREATE TABLE yupdates (path TEXT NOT NULL, yupdate BLOB, metadata BLOB, timestamp REAL)",
		"CREATE INDEX idx_yupdates_path_timestamp ON yupdates (path, timestamp)",
		"INSERT INTO yupdates VALUES ('ra', 'a1', x'', NULL), ('ra', 'a2', x'', 1.0), ('rb', 'b1', x'', 2.0), ('rc', 'c1', x'', 'later'), ('ra', 'a3', x'', NULL)")
	tl, s := loadOddStore(t, path, true, "ra=a2 rb=b1 rc=c1")
	// The writer waits for the tailer's read transactions, as pycrdt-store's does.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		"INSERT INTO yupdates VALUES ('rb', 'b2', x'', NULL)",
		"INSERT INTO yupdates VALUES ('rb', 'b3', x'', 3.0)",
		"INSERT INTO yupdates VALUES ('rb', 'b4', x'', NULL)",
		"INSERT INTO yupdates VALUES ('rc', 'c2', x'', x'00')",
		"INSERT INTO yupdates VALUES ('ra', 'a4', x'', 4.0)",   // ra's first stored row is stamped NULL
		"INSERT INTO yupdates VALUES ('rc', 'c3', x'', 'aaa')", // sorts before rc's first in SQLite alone
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	want := "ra=a2,a4 rb=b1,b3 rc=c1,c2,c3"
	testenv.Eventually(t, testenv.Wait, "the rows followed", func() bool { return s.String() == want && tl.Status().Reachable },
		func() string { return fmt.Sprintf("delivered %s, want %s; status %+v", s, want, tl.Status()) })
	if n := s.kinds("")[ystore.EventReset]; n != 3 {
		t.Fatalf("%d Resets delivered, want the load's 3: an oddly stamped row at the cursor is not a rewrite", n)
	}
	if n := promtest.ToFloat64(tl.m.resyncs.WithLabelValues(reasonHistory)); n != 0 {
		t.Fatalf("history resyncs = %v: rows added after a NULL or text stamp are no rewrite", n)
	}
	if st := tl.Status(); !st.LastErrorAt.IsZero() {
		t.Fatalf("a read failed: %+v", st)
	}
}

// A checkpoint stamped NULL or text (a crafted store; the writer stamps numbers) loads
// as pycrdt-store's loads read it, its rows compared with the stamp as SQLite compares
// them (`timestamp >= ?`): after a NULL one, no row; after a text one, the rows stamped
// text at or after it and those stamped blob; after the empty blob, the rows stamped
// blob. A checkpoint of text (its length in characters, not bytes) reads whole. None is
// a failed read, streamed or not.
func TestOddlyStampedCheckpoints(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("streamed %v", stream), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			scanStore(t, path, nil, nil,
				"DROP TABLE ycheckpoints",
				"CREATE TABLE ycheckpoints (path TEXT NOT NULL, checkpoint BLOB NOT NULL, timestamp, PRIMARY KEY(path))",
				"INSERT INTO ycheckpoints VALUES ('ra', 'ca', NULL), ('rb', 'cb', 'noon'), ('rc', 'cc', 2.0), ('rd', 'cd', X''), ('re', 'cé', 1.0)",
				"INSERT INTO yupdates VALUES ('ra', 'a1', x'', 1.0), ('rb', 'b1', x'', 5.0), ('rb', 'b2', x'', 'later'), ('rb', 'b3', x'', 'on'), ('rb', 'b4', x'', x'00'), ('rc', 'c1', x'', 1.0), ('rc', 'c2', x'', 2.0), ('rc', 'c3', x'', 3.0)",
				"INSERT INTO yupdates VALUES ('rd', 'd1', x'', 1.0), ('rd', 'd2', x'', X''), ('rd', 'd3', x'', x'01'), ('re', 'e1', x'', 2.0)")
			loadOddStore(t, path, stream, "ra=ca rb=b3,b4,cb rc=c2,c3,cc rd=cd,d2,d3 re=cé,e1")
		})
	}
}

// loadOddStore follows the store at path (its loads streamed or not) until it delivered
// want and is reachable, with no read failed.
func loadOddStore(t *testing.T, path string, stream bool, want string) (*Tailer, *sink) {
	t.Helper()
	tl := newTailer(t, Config{Path: path, PollInterval: 20 * time.Millisecond, DisableFSNotify: true, StreamLoads: stream})
	s := newSink()
	runTailer(t, tl, s.deliver)
	testenv.Eventually(t, testenv.Wait, "the store loaded", func() bool { return s.String() == want && tl.Status().Reachable },
		func() string { return fmt.Sprintf("delivered %s, want %s; status %+v", s, want, tl.Status()) })
	if st := tl.Status(); !st.LastErrorAt.IsZero() {
		t.Fatalf("a read failed: %+v", st)
	}
	return tl, s
}

// The one pass over a store (Event.Scan) hands each room what its own stream does,
// whatever the stamps: a room whose checkpoint or rows are stamped text or blob, which
// SQLite alone orders among themselves, is read again alone.
func TestScanOfOddStamps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	scanStore(t, path, nil, nil,
		"DROP TABLE ycheckpoints",
		"CREATE TABLE ycheckpoints (path TEXT NOT NULL, checkpoint BLOB NOT NULL, timestamp, PRIMARY KEY(path))",
		"INSERT INTO ycheckpoints VALUES ('ra', 'ca', NULL), ('rb', 'cb', 'noon')",
		"DROP TABLE yupdates",
		"CREATE TABLE yupdates (path TEXT NOT NULL, yupdate BLOB, metadata BLOB, timestamp)",
		"CREATE INDEX idx_yupdates_path_timestamp ON yupdates (path, timestamp)",
		"INSERT INTO yupdates VALUES ('ra', 'a1', x'', 1.0), ('rb', 'b1', x'', 5.0), ('rb', 'b2', x'', 'later'), ('rb', 'b3', x'', 'on'), ('rc', 'c1', x'', 'zz'), ('rc', 'c2', x'', NULL), ('rc', 'c3', x'', 'aa'), ('rc', 'c4', x'', 2.0), ('rd', 'd1', x'', 1.0)")
	got, want, restarted := passAndStreams(t, newTailer(t, Config{Path: path, ChunkRows: 2}), 4)
	for room := range want {
		if !slices.Equal(got[room], want[room]) {
			t.Errorf("%s: the pass handed %v, its stream %v", room, got[room], want[room])
		}
	}
	if !slices.Equal(want["rb"], []string{"0@+Inf:6362", "4@+Inf:6233"}) || !slices.Equal(want["rc"], []string{"8@2:6334", "7@+Inf:6333", "5@+Inf:6331"}) {
		t.Errorf("streams %v: not SQLite's order", want)
	}
	if !slices.Contains(restarted, "rb") || !slices.Contains(restarted, "rc") || slices.Contains(restarted, "rd") {
		t.Errorf("restarted %v, want rb and rc, not rd", restarted)
	}
}

// A room with more rows stamped text, blob or the empty blob (which the driver binds as
// NULL) than a read transaction takes is read to its end once, each row once, in the
// order pycrdt-store's load query gives (`timestamp >= 0 ORDER BY timestamp`, asked of
// SQLite here), streamed or not.
func TestOddlyStampedRowsPaged(t *testing.T) {
	for _, tt := range []struct {
		name  string
		stamp func(i int) any
	}{
		{"text", func(i int) any { return fmt.Sprintf("stamp %02d", 49-i) }},
		{"empty blob", func(int) any { return []byte{} }},
		{"blobs and the empty blob", func(i int) any { return []byte(strings.Repeat("b", i%3)) }},
		{"numbers and the empty blob", func(i int) any {
			if i%2 == 0 {
				return float64(100 - i)
			}
			return []byte{}
		}},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, streamed %v", tt.name, stream), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "store.db")
				scanStore(t, path, nil, nil,
					"DROP TABLE yupdates",
					"CREATE TABLE yupdates (path TEXT NOT NULL, yupdate BLOB, metadata BLOB, timestamp)",
					"CREATE INDEX idx_yupdates_path_timestamp ON yupdates (path, timestamp)")
				db, err := sql.Open("sqlite", path)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				for i := range 50 {
					stamp := tt.stamp(i)
					if b, ok := stamp.([]byte); ok && len(b) == 0 {
						_, err = db.Exec("INSERT INTO yupdates VALUES ('ra', ?, x'', X'')", fmt.Sprintf("t%02d", i))
					} else {
						_, err = db.Exec("INSERT INTO yupdates VALUES ('ra', ?, x'', ?)", fmt.Sprintf("t%02d", i), stamp)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				var want []string
				q, err := db.Query("SELECT CAST(yupdate AS TEXT) FROM yupdates WHERE path = 'ra' AND timestamp >= 0 ORDER BY timestamp, rowid")
				if err != nil {
					t.Fatal(err)
				}
				for q.Next() {
					var tok string
					if err := q.Scan(&tok); err != nil {
						t.Fatal(err)
					}
					want = append(want, tok)
				}
				if err := q.Err(); err != nil || len(want) < 25 {
					t.Fatalf("the load query read %d rows: %v", len(want), err)
				}
				tl := newTailer(t, Config{Path: path, PollInterval: 20 * time.Millisecond, DisableFSNotify: true, StreamLoads: stream, ChunkRows: 7})
				var mu sync.Mutex
				var got []string
				runTailer(t, tl, func(ctx context.Context, events []ystore.Event) error {
					for _, e := range events {
						if err := e.Each(ctx, func(rows []ystore.Row) error {
							mu.Lock()
							defer mu.Unlock()
							for _, r := range rows {
								got = append(got, string(r.Update))
							}
							return nil
						}); err != nil {
							return err
						}
					}
					return nil
				})
				testenv.Eventually(t, testenv.Wait, "the store loaded", func() bool { return tl.Status().Reachable },
					func() string { return fmt.Sprintf("status %+v", tl.Status()) })
				mu.Lock()
				defer mu.Unlock()
				if !slices.Equal(got, want) {
					t.Fatalf("read %d rows %v, want %d %v", len(got), got, len(want), want)
				}
			})
		}
	}
}
