package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	_ "modernc.org/sqlite"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

// testRows returns rows of room r with the updates us.
func testRows(us ...string) []ystore.Row {
	var out []ystore.Row
	for _, u := range us {
		out = append(out, ystore.Row{Room: "r", Update: []byte(u)})
	}
	return out
}

// testCursor is the cursor of the rows with the updates us.
func testCursor(us ...string) shipCursor { return shipCursor{}.extend(testRows(us...)) }

func TestPlan(t *testing.T) {
	rows, cur := testRows, testCursor
	for _, tc := range []struct {
		name      string
		event     ystore.Event
		db, mem   shipCursor
		wantRows  []string
		wantReset bool
		wantAfter shipCursor
	}{
		{"updates append", ystore.Event{Kind: ystore.EventUpdates, Rows: rows("c")}, cur("a", "b"), cur("a", "b"),
			[]string{"c"}, false, cur("a", "b", "c")},
		{"updates already committed", ystore.Event{Kind: ystore.EventUpdates, Rows: rows("c")}, cur("a", "b", "c"), cur("a", "b"),
			nil, false, cur("a", "b", "c")},
		{"updates of a new room", ystore.Event{Kind: ystore.EventUpdates, Rows: rows("a")}, shipCursor{}, shipCursor{},
			[]string{"a"}, false, cur("a")},
		{"removed", ystore.Event{Kind: ystore.EventRemoved}, cur("a"), cur("a"),
			nil, true, shipCursor{}},
		{"removed twice", ystore.Event{Kind: ystore.EventRemoved}, shipCursor{}, shipCursor{},
			nil, false, shipCursor{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after, got, reset := plan(tc.event, tc.db, tc.mem)
			var us []string
			for _, r := range got {
				us = append(us, string(r.Update))
			}
			if !slices.Equal(us, tc.wantRows) || reset != tc.wantReset || !after.equal(tc.wantAfter) {
				t.Errorf("plan = rows %q reset %v after %d rows, want rows %q reset %v after %d rows",
					us, reset, after.rows, tc.wantRows, tc.wantReset, tc.wantAfter.rows)
			}
		})
	}
}

// streamOf returns rows as a streamed Reset of room r handing them chunk rows at a time.
func streamOf(rows []ystore.Row, chunk int) ystore.Event {
	return ystore.Event{Kind: ystore.EventReset, Room: "r", Stream: func(_ context.Context, yield func([]ystore.Row) error) error {
		for c := range slices.Chunk(rows, chunk) {
			if err := yield(c); err != nil {
				return err
			}
		}
		return nil
	}}
}

// TestShipReset ships a source Reset over what an earlier ship wrote, its rows held or
// streamed a chunk at a time (of 1, 2 and more than a copy batch): what Postgres holds,
// whether the history was replaced and the cursor after are the same whichever way the
// rows come.
func TestShipReset(t *testing.T) {
	cfg := testConfig(t)
	conn := dial(t, cfg)
	long := make([]string, copyBatchRows+7)
	for i := range long {
		long[i] = fmt.Sprintf("l%d", i)
	}
	for _, tc := range []struct {
		name      string
		shipped   []string // the room's rows shipped before: its cursor
		reset     []string // the source's Reset
		wantPG    []string
		wantReset bool
	}{
		{"extends the shipped prefix", []string{"a", "b"}, []string{"a", "b", "c"}, []string{"a", "b", "c"}, false},
		{"equal to the shipped rows", []string{"a", "b"}, []string{"a", "b"}, []string{"a", "b"}, false},
		{"a compacted history that does not decode", []string{"a", "b"}, []string{"ab", "c"}, []string{"ab", "c"}, true},
		{"shorter than shipped", []string{"a", "b"}, []string{"a"}, []string{"a"}, true},
		{"a new room", nil, []string{"a"}, []string{"a"}, true},
		{"a new room over a copy batch", nil, long, long, true},
		{"extends a prefix by over a copy batch", long[:3], long, long, false},
		{"empty, of an unknown room", nil, nil, nil, false},
		{"empty", []string{"a"}, nil, nil, true},
	} {
		for _, chunk := range []int{0, 1, 2, copyBatchRows + 1} {
			t.Run(fmt.Sprintf("%s/chunk %d", tc.name, chunk), func(t *testing.T) {
				sh, err := NewShipper(cfg, nil, "src-"+tc.name+fmt.Sprint(chunk))
				if err != nil {
					t.Fatal(err)
				}
				ctx := t.Context()
				if _, err := conn.Exec(ctx, `DELETE FROM `+sh.n.table); err != nil {
					t.Fatal(err)
				}
				if tc.shipped != nil {
					if err := sh.ship(ctx, conn, []ystore.Event{{Kind: ystore.EventReset, Room: "r", Rows: testRows(tc.shipped...)}}, nil); err != nil {
						t.Fatal(err)
					}
				}
				_, _, before := pgState(t, conn, cfg)
				e := ystore.Event{Kind: ystore.EventReset, Room: "r", Rows: testRows(tc.reset...)}
				if chunk > 0 {
					e = streamOf(e.Rows, chunk)
				}
				if err := sh.ship(ctx, conn, []ystore.Event{e}, nil); err != nil {
					t.Fatal(err)
				}
				rooms, _, _ := pgState(t, conn, cfg)
				if got := rooms["r"]; !slices.Equal(got, tc.wantPG) {
					t.Errorf("postgres holds %q, want %q", got, tc.wantPG)
				}
				var resetAfter bool
				if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+sh.n.table+` WHERE reset AND id > $1)`, before).Scan(&resetAfter); err != nil {
					t.Fatal(err)
				}
				if resetAfter != tc.wantReset {
					t.Errorf("history replaced: %v, want %v", resetAfter, tc.wantReset)
				}
				want := testCursor(tc.reset...)
				if got := sh.cursors["r"]; !got.equal(want) {
					t.Errorf("cursor after: %d rows, want %d", got.rows, want.rows)
				}
			})
		}
	}
}

// sqliteStore is a pycrdt-store SQLite file written by the test, one transaction per row.
type sqliteStore struct {
	t    testing.TB
	path string
	db   *sql.DB
}

func newSQLiteStore(t testing.TB) *sqliteStore {
	t.Helper()
	path := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
	// Like Python's sqlite3 (pycrdt-store's driver), wait up to 5 s for the reader's lock.
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	s := &sqliteStore{t: t, path: path, db: db}
	s.exec(`CREATE TABLE yupdates (path TEXT NOT NULL, yupdate BLOB, metadata BLOB, timestamp REAL NOT NULL)`)
	s.exec(`CREATE INDEX idx_yupdates_path_timestamp ON yupdates (path, timestamp)`)
	s.exec(`CREATE TABLE ycheckpoints (path TEXT NOT NULL, checkpoint BLOB NOT NULL, timestamp REAL NOT NULL, PRIMARY KEY(path))`)
	s.exec(`PRAGMA user_version = 2`)
	return s
}

func (s *sqliteStore) exec(q string, args ...any) {
	s.t.Helper()
	if _, err := s.db.Exec(q, args...); err != nil {
		s.t.Fatalf("sqlite %s: %v", q, err)
	}
}

func (s *sqliteStore) add(room, update string) {
	s.t.Helper()
	s.exec(`INSERT INTO yupdates (path, yupdate, metadata, timestamp) VALUES (?, ?, NULL, ?)`,
		room, []byte(update), float64(time.Now().UnixMicro())/1e6)
}

// runShipper ships the SQLite store into cfg's store as source host-1 until the returned
// stop is called.
func runShipper(t testing.TB, cfg Config, path string) (sh *Shipper, stop func()) {
	t.Helper()
	return runShipperAs(t, cfg, path, "host-1")
}

// runShipperAs is runShipper with the source id id.
func runShipperAs(t testing.TB, cfg Config, path, id string) (sh *Shipper, stop func()) {
	t.Helper()
	src, err := sqlite.New(sqlite.Config{Path: path, PollInterval: 20 * time.Millisecond, StreamLoads: true, Logger: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	if sh, err = NewShipper(cfg, src, id); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sh.Run(ctx) }()
	return sh, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("shipper: %v", err)
		}
	}
}

// pgState reads the rows of the Postgres store: updates per room, the number of reset
// rows, and the highest id.
func pgState(t testing.TB, conn *pgx.Conn, cfg Config) (rooms map[string][]string, resets int, maxID int64) {
	t.Helper()
	rs, err := conn.Query(context.Background(), `SELECT id, path, yupdate, reset FROM `+
		pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	rooms = map[string][]string{}
	var (
		id     int64
		path   string
		update []byte
		reset  bool
	)
	if _, err := pgx.ForEachRow(rs, []any{&id, &path, &update, &reset}, func() error {
		if update != nil {
			rooms[path] = append(rooms[path], string(update))
		}
		if reset {
			resets++
		}
		maxID = max(maxID, id)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rooms, resets, maxID
}

// waitPG waits until the Postgres store holds want (updates per room, in id order).
func waitPG(t testing.TB, conn *pgx.Conn, cfg Config, want map[string][]string) (resets int, maxID int64) {
	t.Helper()
	var rooms map[string][]string
	testenv.Eventually(t, testenv.Wait, fmt.Sprintf("postgres to hold %v", want), func() bool {
		rooms, resets, maxID = pgState(t, conn, cfg)
		return fmt.Sprint(rooms) == fmt.Sprint(want)
	}, func() string { return fmt.Sprintf("postgres holds %v", rooms) })
	return resets, maxID
}

// loaded renders a tailer's Load as room → updates.
func loaded(t testing.TB, tl ystore.Tailer) string {
	t.Helper()
	events, err := tl.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rooms := map[string][]string{}
	for _, e := range events {
		for _, r := range e.Rows {
			rooms[e.Room] = append(rooms[e.Room], string(r.Update))
		}
	}
	return fmt.Sprint(rooms)
}

// TestShipFromSQLite ships a real SQLite store through restarts of the shipper, a
// compaction and a room removal while it is down: Postgres ends in the source's state,
// and restarts ship nothing twice.
func TestShipFromSQLite(t *testing.T) {
	cfg := testConfig(t)
	conn := dial(t, cfg)
	src := newSQLiteStore(t)
	src.add("a", "a1")
	src.add("a", "a2")
	src.add("b", "b1")

	pgTailer, events := runTailer(t, cfg)
	sh, stop := runShipper(t, cfg, src.path)
	waitPG(t, conn, cfg, map[string][]string{"a": {"a1", "a2"}, "b": {"b1"}})
	src.add("a", "a3")
	resets, _ := waitPG(t, conn, cfg, map[string][]string{"a": {"a1", "a2", "a3"}, "b": {"b1"}})
	if resets != 2 {
		t.Errorf("%d reset rows after the first load, want 2 (one per new room)", resets)
	}
	// The shipper counts a row once Postgres committed it: the count may follow the row.
	testenv.Eventually(t, testenv.Wait, "the shipper's status to count every row", func() bool {
		st := sh.Status()
		return st.Reachable && st.RowsShipped == 4 && st.Resets == 2 && st.Source.Reachable
	}, func() string { return fmt.Sprintf("status %+v", sh.Status()) })
	if rows, resets := promtest.ToFloat64(sh.m.rows), promtest.ToFloat64(sh.m.resets); rows != 4 || resets != 2 {
		t.Errorf("metrics: %v rows, %v resets shipped", rows, resets)
	}
	stop()

	src.add("b", "b2") // while the shipper is down
	_, stop = runShipper(t, cfg, src.path)
	resets, maxID := waitPG(t, conn, cfg, map[string][]string{"a": {"a1", "a2", "a3"}, "b": {"b1", "b2"}})
	stop()
	if resets != 2 || maxID != 5 {
		t.Errorf("after restart: %d resets, max id %d; want 2 and 5 (only the new row shipped)", resets, maxID)
	}

	sh, stop = runShipper(t, cfg, src.path) // nothing changed
	testenv.Eventually(t, testenv.Wait, "the shipper's first read of the source", func() bool { return !sh.Status().Source.LastReadAt.IsZero() },
		func() string { return fmt.Sprintf("status %+v", sh.Status()) })
	// A barrier: a row added after the shipper's load is shipped after anything the
	// load ships; once it is in Postgres, it is the only row the restart wrote.
	src.add("b", "b3")
	resets, maxID = waitPG(t, conn, cfg, map[string][]string{"a": {"a1", "a2", "a3"}, "b": {"b1", "b2", "b3"}})
	stop()
	if resets != 2 || maxID != 6 {
		t.Errorf("idle restart wrote rows: %d resets, max id %d; want 2 and 6 (the barrier row only)", resets, maxID)
	}

	// While down: room a compacted (rows replaced by a merged row), room b deleted.
	src.exec(`DELETE FROM yupdates WHERE path = 'a'`)
	src.add("a", "a123")
	src.exec(`DELETE FROM yupdates WHERE path = 'b'`)
	_, stop = runShipper(t, cfg, src.path)
	waitPG(t, conn, cfg, map[string][]string{"a": {"a123"}})
	src.add("c", "c1")
	waitPG(t, conn, cfg, map[string][]string{"a": {"a123"}, "c": {"c1"}})
	stop()

	srcTailer, err := sqlite.New(sqlite.Config{Path: src.path})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := loaded(t, pgTailer), loaded(t, srcTailer); got != want {
		t.Errorf("postgres loads %s, source loads %s", got, want)
	}
	ev := events.waitFor(t, "removal of b", func(ev []ystore.Event) bool {
		return slices.ContainsFunc(ev, func(e ystore.Event) bool { return e.Kind == ystore.EventRemoved && e.Room == "b" })
	})
	if !slices.ContainsFunc(ev, func(e ystore.Event) bool {
		return e.Kind == ystore.EventReset && e.Room == "a" && len(e.Rows) == 1 && string(e.Rows[0].Update) == "a123"
	}) {
		t.Errorf("the postgres tailer saw no reset of the compacted room:%s", describe(ev))
	}
}

// TestShipAcrossServerRestart kills Postgres while a writer appends to the SQLite store
// and the shipper ships: afterwards Postgres holds every source row exactly once.
func TestShipAcrossServerRestart(t *testing.T) {
	cfg := testConfigOn(t, envCrashDSN)
	src := newSQLiteStore(t)
	src.add("a", "w-init")
	sh, stop := runShipper(t, cfg, src.path)
	defer stop()
	const n = 300
	want := []string{"w-init"}
	for i := range n {
		u := fmt.Sprintf("w%d", i)
		src.add("a", u)
		want = append(want, u)
		if i == n/3 {
			pgCtl(t, "stop", "-m", "immediate")
		}
		if i == 2*n/3 {
			pgCtl(t, "start")
		}
		time.Sleep(time.Millisecond) // pacing, not a wait: the writer's rate, across the crash
	}
	waitPG(t, dial(t, cfg), cfg, map[string][]string{"a": want})
	if st := sh.Status(); !st.Reachable || st.LastError != "" || st.RowsShipped != n+1 {
		t.Errorf("status %+v, want %d rows shipped", st, n+1)
	}
}

// TestShipCompactedSource: a source room compacted while the shipper was down ships as
// a plain row when its document contains what Postgres holds, and as a reset when it is
// another document.
func TestShipCompactedSource(t *testing.T) {
	cfg := testConfig(t)
	conn := dial(t, cfg)
	updates, merged := sessionUpdates(t, "s0000.json.gz")
	_, otherMerged := sessionUpdates(t, "s0001.json.gz")
	const room = ".notebook:5e55.y"
	src := newSQLiteStore(t)
	for _, u := range updates[:40] {
		src.add(room, string(u))
	}
	_, stop := runShipper(t, cfg, src.path)
	waitPG(t, conn, cfg, map[string][]string{room: toStrings(updates[:40])})
	stop()

	src.exec(`DELETE FROM yupdates`)
	src.add(room, string(merged))
	_, stop = runShipper(t, cfg, src.path)
	resets, _ := waitPG(t, conn, cfg, map[string][]string{room: append(toStrings(updates[:40]), string(merged))})
	stop()
	if resets != 1 {
		t.Errorf("%d reset rows, want 1 (the first ship): a containing document ships as a plain row", resets)
	}
	pgTailer, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	events, err := pgTailer.Load(context.Background())
	if err != nil || len(events) != 1 {
		t.Fatalf("load: %v%s", err, describe(events))
	}
	if got, want := notebookJSON(t, events[0].Rows), notebookJSON(t, []ystore.Row{{Update: merged}}); got != want {
		t.Errorf("postgres notebook differs from the source's")
	}

	src.exec(`DELETE FROM yupdates`)
	src.add(room, string(otherMerged))
	_, stop = runShipper(t, cfg, src.path)
	if resets, _ = waitPG(t, conn, cfg, map[string][]string{room: {string(otherMerged)}}); resets != 1 {
		t.Errorf("%d reset rows after a replaced document, want 1", resets)
	}
	stop()
}

// toStrings converts updates for comparison with pgState.
func toStrings(us [][]byte) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = string(u)
	}
	return out
}

// The status a shipper that cannot connect leaves (what ship's /readyz shows without
// authentication) names neither the user nor the database.
func TestShipStatusNamesNoUserOrDatabase(t *testing.T) {
	cfg := testConfig(t)
	u, err := url.Parse(cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	user := u.User.Username()
	u.Path = "/nodb_s8y"
	cfg.DSN = u.String()
	src := newSQLiteStore(t)
	src.add("a", "a1")
	sh, stop := runShipper(t, cfg, src.path)
	defer stop()
	testenv.Eventually(t, testenv.Wait, "the shipper to report the failure",
		func() bool { return sh.Status().LastError != "" },
		func() string { return fmt.Sprintf("status %+v", sh.Status()) })
	if st := sh.Status(); st.Reachable || strings.Contains(st.LastError, user) || strings.Contains(st.LastError, "nodb_s8y") {
		t.Fatalf("status %+v: want unreachable, naming neither %q nor the database", st, user)
	}
}
