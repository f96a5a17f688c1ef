package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

func TestMigrateIdempotent(t *testing.T) {
	cfg := testConfig(t) // migrated once
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- Init(ctx, cfg) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent init: %v", err)
		}
	}
	conn := dial(t, cfg)
	var cols []string
	rows, err := conn.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`, cfg.Schema, DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	if cols, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if want := []string{"id", "path", "yupdate", "metadata", "timestamp", "xid", "reset"}; !slices.Equal(cols, want) {
		t.Errorf("columns %v, want %v", cols, want)
	}
	var triggers int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal`,
		cfg.Schema+"."+DefaultTable).Scan(&triggers); err != nil || triggers != 1 {
		t.Errorf("triggers %d (%v), want 1", triggers, err)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"schema", Config{DSN: "postgres://h/db", Schema: "a;drop"}, `schema: must be a SQL identifier ([a-z_][a-z0-9_]*, at most 48 characters), got "a;drop"`},
		{"table", Config{DSN: "postgres://h/db", Table: "Up"}, `table: must be a SQL identifier ([a-z_][a-z0-9_]*, at most 48 characters), got "Up"`},
		{"channel", Config{DSN: "postgres://h/db", Channel: "1x"}, `channel: must be a SQL identifier ([a-z_][a-z0-9_]*, at most 48 characters), got "1x"`},
		{"backoff", Config{DSN: "postgres://h/db", BackoffMin: time.Second, BackoffMax: time.Millisecond}, "backoff"},
		{"dsn", Config{DSN: "postgres://u:s3cret@h:notaport/db"}, "dsn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
	if _, err := New(Config{DSN: "host=h dbname=db"}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestSinkErrorStopsRun(t *testing.T) {
	cfg := testConfig(t)
	insert(t, dial(t, cfg), cfg, "r", []byte("u"))
	tl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	errFull := errors.New("sink full")
	err = tl.Run(context.Background(), func(context.Context, []ystore.Event) error { return errFull })
	if !errors.Is(err, errFull) || !errors.Is(err, ystore.ErrSink) {
		t.Fatalf("Run: %v, want ystore.ErrSink and the sink's error", err)
	}
}

func TestPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testenv.LockedBuffer
		cfg := Config{BackoffMin: 100 * time.Millisecond, BackoffMax: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		start := time.Now()
		if err := cfg.pause(context.Background(), 3, "retrying", "room", "r"); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 400*time.Millisecond || d >= 800*time.Millisecond {
			t.Errorf("pause after attempt 3 took %v, want in [400ms, 800ms)", d)
		}
		if !strings.Contains(logs.String(), "room=r attempt=4 delay=") {
			t.Errorf("log %q", logs.String())
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start = time.Now()
		if err := cfg.pause(ctx, 10, "retrying"); !errors.Is(err, context.Canceled) || time.Since(start) != 50*time.Millisecond {
			t.Errorf("cancelled pause: %v after %v, want context.Canceled after 50ms", err, time.Since(start))
		}
	})
}

func TestBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, 10*time.Second
	for _, tc := range []struct {
		attempt  int
		u        float64
		min, max time.Duration
	}{
		{0, 0, 50 * time.Millisecond, 50 * time.Millisecond},
		{0, 0.999, 99 * time.Millisecond, 100 * time.Millisecond},
		{3, 0.5, 600 * time.Millisecond, 600 * time.Millisecond},
		{7, 0.999, 9 * time.Second, 10 * time.Second},
		{70, 0, 5 * time.Second, 5 * time.Second},
	} {
		if d := backoff(lo, hi, tc.attempt, tc.u); d < tc.min || d > tc.max {
			t.Errorf("backoff(attempt %d, u %v) = %v, want in [%v, %v]", tc.attempt, tc.u, d, tc.min, tc.max)
		}
	}
}

func TestTailSteady(t *testing.T) {
	cfg := testConfig(t)
	reg := prometheus.NewPedanticRegistry()
	cfg.Registerer = reg
	conn := dial(t, cfg)
	insert(t, conn, cfg, "b", []byte("b1"))
	insert(t, conn, cfg, "a", []byte("a1"))
	insert(t, conn, cfg, "a", []byte("a2"))

	tl, c := runTailer(t, cfg)
	ev := c.waitFor(t, "load", func(ev []ystore.Event) bool { return len(ev) >= 2 })
	if got := describe(ev); got != describe([]ystore.Event{
		{Kind: ystore.EventReset, Room: "a", Rows: []ystore.Row{{ID: 2, Update: []byte("a1")}, {ID: 3, Update: []byte("a2")}}},
		{Kind: ystore.EventReset, Room: "b", Rows: []ystore.Row{{ID: 1, Update: []byte("b1")}}},
	}) {
		t.Fatalf("load events:%s", got)
	}
	const n = 200
	for i := range n {
		insert(t, conn, cfg, fmt.Sprintf("r%d", i%3), fmt.Appendf(nil, "u%d", i))
	}
	ev = c.waitFor(t, "updates", func(ev []ystore.Event) bool { return rowCount(ev) >= 3+n })
	var got []string
	for _, e := range ev[2:] {
		if e.Kind != ystore.EventUpdates {
			t.Fatalf("event %s %s, want updates", e.Kind, e.Room)
		}
		for _, r := range e.Rows {
			if want := fmt.Sprintf("r%d", (r.ID-4)%3); r.Room != want || e.Room != want {
				t.Errorf("row %d in room %q (event %q), want %q", r.ID, r.Room, e.Room, want)
			}
			got = append(got, string(r.Update))
		}
	}
	for i := range n {
		if i >= len(got) || got[i] != fmt.Sprintf("u%d", i) {
			t.Fatalf("update %d of %d: got %q, want u%d (in commit order, once)", i, len(got), got[min(i, len(got)-1)], i)
		}
	}
	if len(got) != n {
		t.Fatalf("delivered %d updates, want %d", len(got), n)
	}
	// Status is updated right after the sink returns.
	testenv.Eventually(t, testenv.Wait, "the status to count every row", func() bool { return tl.Status().RowsTailed == 3+n },
		func() string { return fmt.Sprintf("status %+v", tl.Status()) })
	st := tl.Status()
	if !st.Reachable || st.LastError != "" || st.RowsTailed != 3+n || st.Rooms != 5 || st.Lag > 5*time.Second {
		t.Errorf("status %+v", st)
	}
	for _, name := range []string{"jupyter_mcp_sidecar_rows_tailed_total", "jupyter_mcp_sidecar_postgres_rows_tailed_total"} {
		if got := testenv.Metric(t, reg, name); got != 3+n {
			t.Errorf("%s = %v, want %d", name, got, 3+n)
		}
	}
	reachable := testenv.Metric(t, reg, "jupyter_mcp_sidecar_store_reachable") + testenv.Metric(t, reg, "jupyter_mcp_sidecar_postgres_reachable")
	if reachable != 2 || promtest.ToFloat64(tl.m.wakeups.WithLabelValues(wakeNotify)) == 0 ||
		promtest.CollectAndCount(tl.m.read) != 1 {
		t.Errorf("metrics: store_reachable + postgres_reachable %v, notify wake-ups %v", reachable,
			promtest.ToFloat64(tl.m.wakeups.WithLabelValues(wakeNotify)))
	}
	// A second tailer on the registry (hub mode's next user) feeds the same series: not
	// read yet, it makes the store unreachable; closed, it no longer counts.
	second, err := New(cfg)
	if err != nil {
		t.Fatalf("a second tailer on the registry: %v", err)
	}
	if got := testenv.Metric(t, reg, "jupyter_mcp_sidecar_store_reachable"); got != 0 {
		t.Errorf("store_reachable %v with a tailer not read yet, want 0", got)
	}
	second.Close()
	if got := testenv.Metric(t, reg, "jupyter_mcp_sidecar_store_reachable"); got != 1 {
		t.Errorf("store_reachable %v once it is closed, want 1", got)
	}
	if got := testenv.Metric(t, reg, "jupyter_mcp_sidecar_rows_tailed_total"); got != 3+n {
		t.Errorf("rows_tailed_total %v, want %d", got, 3+n)
	}
}

// TestTailWaitsForSchema starts a tailer before the store is created: it retries until
// `postgres init` has run, then loads.
func TestTailWaitsForSchema(t *testing.T) {
	cfg := testConfig(t)
	cfg.Schema += "_later"
	conn := dial(t, cfg)
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{cfg.Schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	tl, c := runTailer(t, cfg)
	testenv.Eventually(t, testenv.Wait, "the tailer to report the missing schema",
		func() bool { return strings.Contains(tl.Status().LastError, "does not exist") },
		func() string { return fmt.Sprintf("status %+v", tl.Status()) })
	if st := tl.Status(); st.Reachable || !strings.Contains(st.LastError, "does not exist") {
		t.Fatalf("status before init: %+v", st)
	}
	if err := Init(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	insert(t, conn, cfg, "r", []byte("u"))
	ev := c.waitFor(t, "the row", func(ev []ystore.Event) bool { return rowCount(ev) == 1 })
	if ev[0].Room != "r" {
		t.Errorf("events:%s", describe(ev))
	}
}

// TestTailOutOfOrderCommit interleaves two writers so that the row with the lower id
// commits last: a cursor on ids would skip it.
func TestTailOutOfOrderCommit(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	connA, connB := dial(t, cfg), dial(t, cfg)
	tl, c := runTailer(t, cfg)
	waitLoaded(t, tl)

	txA, err := connA.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = txA.Rollback(ctx) }()
	idA := insert(t, txA, cfg, "room", []byte("A"))
	idB := insert(t, connB, cfg, "room", []byte("B"))
	if idA >= idB {
		t.Fatalf("ids A=%d B=%d, want A < B", idA, idB)
	}
	c.waitFor(t, "B", func(ev []ystore.Event) bool { return rowCount(ev) == 1 })
	// A stays open across several polls and notifications after B was delivered.
	insert(t, connB, cfg, "other", []byte("C"))
	c.waitFor(t, "C", func(ev []ystore.Event) bool { return rowCount(ev) == 2 })
	polls := func() float64 { return promtest.ToFloat64(tl.m.wakeups.WithLabelValues(wakePoll)) }
	before := polls()
	testenv.Eventually(t, testenv.Wait, "3 polls with A open", func() bool { return polls() >= before+3 })
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, "A", func(ev []ystore.Event) bool { return rowCount(ev) >= 3 })
	// A barrier: D commits after A, so once D is delivered, any second delivery of
	// B, C or A would have been too.
	idD := insert(t, connB, cfg, "other", []byte("D"))
	ev := c.waitFor(t, "D", func(ev []ystore.Event) bool { return slices.Contains(rowIDs(ev), idD) })
	want := []ystore.Event{
		{Kind: ystore.EventUpdates, Room: "room", Rows: []ystore.Row{{ID: idB, Update: []byte("B")}}},
		{Kind: ystore.EventUpdates, Room: "other", Rows: []ystore.Row{{ID: idB + 1, Update: []byte("C")}}},
		{Kind: ystore.EventUpdates, Room: "room", Rows: []ystore.Row{{ID: idA, Update: []byte("A")}}},
		{Kind: ystore.EventUpdates, Room: "other", Rows: []ystore.Row{{ID: idD, Update: []byte("D")}}},
	}
	if describe(ev) != describe(want) {
		t.Fatalf("events:%s\nwant:%s", describe(ev), describe(want))
	}
}

// TestTailConcurrentWriters runs writers whose transactions insert a few rows each,
// hold them open for random times and commit or roll back: the tailer delivers exactly
// the committed rows, each once.
func TestTailConcurrentWriters(t *testing.T) {
	cfg := testConfig(t)
	tl, c := runTailer(t, cfg)
	waitLoaded(t, tl)
	const writers, txs = 6, 25
	var (
		mu        sync.Mutex
		committed = map[string]bool{}
		wg        sync.WaitGroup
	)
	for w := range writers {
		conn := dial(t, cfg)
		wg.Go(func() {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range txs {
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				var us []string
				for j := range 1 + rng.IntN(3) {
					u := fmt.Sprintf("w%d-t%d-r%d", w, i, j)
					if _, err := tryInsert(ctx, tx, cfg, fmt.Sprintf("room%d", rng.IntN(3)), []byte(u)); err != nil {
						t.Error(err)
						return
					}
					us = append(us, u)
				}
				// Pacing, not a wait: the transaction stays open for a random time.
				time.Sleep(time.Duration(rng.IntN(4000)) * time.Microsecond)
				if rng.IntN(10) == 0 {
					err = tx.Rollback(ctx)
					us = nil
				} else {
					err = tx.Commit(ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, u := range us {
					committed[u] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	c.waitFor(t, "every committed row", func(ev []ystore.Event) bool { return rowCount(ev) >= len(committed) })
	// A barrier: a row committed after every writer's; once it is delivered, any
	// second delivery of theirs would have been too.
	seen := deliveredBefore(t, c, cfg)
	for u, n := range seen {
		if n != 1 || !committed[u] {
			t.Errorf("row %s delivered %d times (committed: %v)", u, n, committed[u])
		}
	}
	if len(seen) != len(committed) {
		t.Errorf("delivered %d distinct rows, committed %d", len(seen), len(committed))
	}
}

// TestTailPollingFallback disables the notify trigger (and, separately, LISTEN): the
// poll alone must deliver.
func TestTailPollingFallback(t *testing.T) {
	for _, disableListen := range []bool{false, true} {
		t.Run(fmt.Sprintf("disable_listen=%v", disableListen), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.DisableListen = disableListen
			conn := dial(t, cfg)
			if _, err := conn.Exec(context.Background(), "ALTER TABLE "+pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()+
				" DISABLE TRIGGER USER"); err != nil {
				t.Fatal(err)
			}
			tl, c := runTailer(t, cfg)
			waitLoaded(t, tl)
			for i := range 5 {
				insert(t, conn, cfg, "room", fmt.Appendf(nil, "u%d", i))
			}
			c.waitFor(t, "polled rows", func(ev []ystore.Event) bool { return rowCount(ev) == 5 })
		})
	}
}

func TestTailCorruptRow(t *testing.T) {
	cfg := testConfig(t)
	conn := dial(t, cfg)
	tl, c := runTailer(t, cfg)
	waitLoaded(t, tl)
	garbage := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00}
	id := insert(t, conn, cfg, ".notebook:x.y", garbage)
	empty := insert(t, conn, cfg, ".notebook:x.y", []byte{})
	ev := c.waitFor(t, "corrupt rows", func(ev []ystore.Event) bool { return rowCount(ev) == 2 })
	var rows []ystore.Row
	for _, e := range ev {
		rows = append(rows, e.Rows...)
	}
	if rows[0].ID != id || rows[0].Room != ".notebook:x.y" || !bytes.Equal(rows[0].Update, garbage) ||
		rows[1].ID != empty || len(rows[1].Update) != 0 {
		t.Fatalf("rows:%s", describe(ev))
	}
}

// TestTailResetRows: a reset row makes the room rebuild from it; an empty reset row
// removes the room.
func TestTailResetRows(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	conn := dial(t, cfg)
	insert(t, conn, cfg, "r", []byte("old1"))
	insert(t, conn, cfg, "r", []byte("old2"))
	_, c := runTailer(t, cfg)
	c.waitFor(t, "load", func(ev []ystore.Event) bool { return len(ev) == 1 })
	table := pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec("BEGIN")
	exec("DELETE FROM " + table + " WHERE path = 'r'")
	exec("INSERT INTO " + table + " (path, yupdate, timestamp, reset) VALUES ('r', 'new1', 1, true), ('r', 'new2', 2, false)")
	exec("COMMIT")
	ev := c.waitFor(t, "reset", func(ev []ystore.Event) bool { return len(ev) == 2 })
	if ev[1].Kind != ystore.EventReset || describe(ev[1:]) != describe([]ystore.Event{{Kind: ystore.EventReset, Room: "r",
		Rows: []ystore.Row{{ID: 3, Update: []byte("new1")}, {ID: 4, Update: []byte("new2")}}}}) {
		t.Fatalf("events:%s", describe(ev))
	}
	exec("INSERT INTO " + table + " (path, yupdate, timestamp, reset) VALUES ('r', NULL, 3, true)")
	ev = c.waitFor(t, "removed", func(ev []ystore.Event) bool { return len(ev) == 3 })
	if ev[2].Kind != ystore.EventRemoved || ev[2].Room != "r" {
		t.Fatalf("events:%s", describe(ev))
	}
	tl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if loaded, err := tl.Load(ctx); err != nil || len(loaded) != 0 {
		t.Fatalf("load after removal: %v%s", err, describe(loaded))
	}
}

// TestTailServerRestart kills the server (immediate shutdown, like a crash) while a
// writer runs and restarts it: every acknowledged row is delivered exactly once.
func TestTailServerRestart(t *testing.T) {
	cfg := testConfigOn(t, envCrashDSN)
	var logs testenv.LockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	tl, c := runTailer(t, cfg)
	waitLoaded(t, tl)

	w := startFaultWriter(t, cfg, "room0", "room1", "room2", "room3")
	c.waitFor(t, "rows before the crash", func(ev []ystore.Event) bool { return rowCount(ev) >= 50 })
	pgCtl(t, "stop", "-m", "immediate")
	testenv.Eventually(t, testenv.Wait, "the tailer to report the outage",
		func() bool { return strings.Contains(tl.Status().LastError, "connect") },
		func() string { return fmt.Sprintf("status %+v", tl.Status()) })
	if st := tl.Status(); st.Reachable || st.LastError == "" {
		t.Errorf("status while down: %+v", st)
	}
	pgCtl(t, "start")
	acked, maybe := w.stopAfter(t, 50)
	if m := waitDelivered(c, acked); len(m) > 0 {
		t.Fatalf("acknowledged rows never delivered: %v\nlogs:\n%s", m, logs.String())
	}
	// A barrier: a row committed after the writer stopped; once it is delivered, any
	// second delivery of the writer's rows would have been too.
	seen := deliveredBefore(t, c, cfg)
	for u, n := range seen {
		if n != 1 {
			t.Errorf("row %s delivered %d times", u, n)
		}
		if !acked[u] && !maybe[u] {
			t.Errorf("row %s delivered but never written", u)
		}
	}
	if st := tl.Status(); !st.Reachable || st.LastError != "" {
		t.Errorf("status after restart: %+v", st)
	}
	u, _ := url.Parse(cfg.DSN)
	if pw, _ := u.User.Password(); pw != "" && strings.Contains(logs.String(), pw) {
		t.Errorf("logs leak the password")
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Errorf("no reconnect logged:\n%s", logs.String())
	}
	t.Logf("%d rows acknowledged, %d uncertain, %d delivered", len(acked), len(maybe), len(seen))
}

// faultWriter appends rows to rooms, one at a time, through server crashes: a row whose
// insert returned is acknowledged, one whose insert failed may or may not be stored.
type faultWriter struct {
	mu           sync.Mutex
	acked, maybe map[string]bool
	cancel       context.CancelFunc
	done         chan struct{}
}

// startFaultWriter starts writing; it stops at stopAfter or cleanup.
func startFaultWriter(t testing.TB, cfg Config, rooms ...string) *faultWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &faultWriter{acked: map[string]bool{}, maybe: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() { cancel(); <-w.done })
	go func() {
		defer close(w.done)
		var conn *pgx.Conn
		for i := 0; ctx.Err() == nil; i++ {
			if conn == nil {
				var err error
				if conn, err = pgx.Connect(ctx, cfg.DSN); err != nil {
					time.Sleep(20 * time.Millisecond) // pacing, not a wait: the next reconnect attempt
					continue
				}
			}
			u := fmt.Sprintf("w%d", i)
			_, err := tryInsert(ctx, conn, cfg, rooms[i%len(rooms)], []byte(u))
			w.mu.Lock()
			if err == nil {
				w.acked[u] = true
			} else {
				w.maybe[u] = true
			}
			w.mu.Unlock()
			if err != nil {
				conn.Close(context.Background())
				conn = nil
			}
			time.Sleep(2 * time.Millisecond) // pacing, not a wait: the writer's rate
		}
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	return w
}

// ackedCount is the number of acknowledged rows.
func (w *faultWriter) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// stopAfter waits for n more acknowledged rows, stops and returns what was written.
func (w *faultWriter) stopAfter(t testing.TB, n int) (acked, maybe map[string]bool) {
	t.Helper()
	before := w.ackedCount()
	testenv.Eventually(t, testenv.Wait, fmt.Sprintf("%d more acknowledged rows", n), func() bool { return w.ackedCount() >= before+n },
		func() string { return fmt.Sprintf("%d acknowledged", w.ackedCount()-before) })
	w.cancel()
	<-w.done
	return w.acked, w.maybe
}

// waitDelivered waits up to testenv.Wait for every acknowledged row to reach c and
// returns those that did not.
func waitDelivered(c *collector, acked map[string]bool) []string {
	missing := func() []string {
		seen := map[string]bool{}
		for _, e := range c.snapshot() {
			for _, r := range e.Rows {
				seen[string(r.Update)] = true
			}
		}
		var out []string
		for u := range acked {
			if !seen[u] {
				out = append(out, u)
			}
		}
		return out
	}
	_ = testenv.Within(testenv.Wait, func() bool { return len(missing()) == 0 })
	return missing()
}

// TestTailReload: a room asked for again is delivered whole as a Reset at once (the
// poll interval is an hour: the request wakes the tailer), with or without LISTEN; a room
// the store lacks is ignored, and no other room is delivered again.
func TestTailReload(t *testing.T) {
	for _, disableListen := range []bool{false, true} {
		t.Run(fmt.Sprintf("disable_listen=%v", disableListen), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.DisableListen, cfg.PollInterval = disableListen, time.Hour
			conn := dial(t, cfg)
			insert(t, conn, cfg, "a", []byte("a1"))
			insert(t, conn, cfg, "b", []byte("b1"))
			tl, c := runTailer(t, cfg)
			c.waitFor(t, "load", func(ev []ystore.Event) bool { return len(ev) == 2 })
			tl.Reload("a")
			tl.Reload("no such room")
			c.waitFor(t, "room a again", func(ev []ystore.Event) bool { return len(ev) == 3 })
			tl.Reload("b") // the barrier: nothing else was delivered before it
			ev := c.waitFor(t, "room b again", func(ev []ystore.Event) bool { return len(ev) == 4 })
			if got, want := describe(ev[2:]), describe([]ystore.Event{
				{Kind: ystore.EventReset, Room: "a", Rows: []ystore.Row{{ID: 1, Update: []byte("a1")}}},
				{Kind: ystore.EventReset, Room: "b", Rows: []ystore.Row{{ID: 2, Update: []byte("b1")}}},
			}); got != want {
				t.Fatalf("events after the reloads:%s\nwant:%s", got, want)
			}
		})
	}
}

// The Status a failed connection leaves (what /readyz shows without authentication)
// names neither the user nor the database: not pgx's own "user=… database=…", nor the
// server's message about them.
func TestStatusNamesNoUserOrDatabase(t *testing.T) {
	base := testConfig(t)
	u, err := url.Parse(base.DSN)
	if err != nil {
		t.Fatal(err)
	}
	user := u.User.Username()
	for _, tc := range []struct {
		name   string
		mangle func(u *url.URL)
		hidden []string
	}{
		{"wrong password", func(u *url.URL) { u.User = url.UserPassword(user, "not-the-password") }, []string{user}},
		{"no such database", func(u *url.URL) { u.Path = "/nodb_q7x" }, []string{user, "nodb_q7x"}},
		{"no such role", func(u *url.URL) { u.User = url.UserPassword("norole_q7x", "x") }, []string{"norole_q7x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			bad := *u
			tc.mangle(&bad)
			cfg.DSN = bad.String()
			tl, _ := runTailer(t, cfg)
			testenv.Eventually(t, testenv.Wait, "the tailer to report the failure",
				func() bool { return tl.Status().LastError != "" },
				func() string { return fmt.Sprintf("status %+v", tl.Status()) })
			st := tl.Status()
			for _, name := range tc.hidden {
				if strings.Contains(st.LastError, name) {
					t.Errorf("status names %q: %s", name, st.LastError)
				}
			}
			if st.Reachable || !strings.Contains(st.LastError, "connect") {
				t.Errorf("status %+v; want unreachable, a connection error", st)
			}
		})
	}
}

// deliveredBefore commits a barrier row and counts, once it is delivered, how often each
// row before it was (by update bytes); the barrier itself must be delivered once.
func deliveredBefore(t *testing.T, c *collector, cfg Config) map[string]int {
	t.Helper()
	barrier := insert(t, dial(t, cfg), cfg, "room0", []byte("barrier"))
	ev := c.waitFor(t, "the barrier row", func(ev []ystore.Event) bool { return slices.Contains(rowIDs(ev), barrier) })
	seen := map[string]int{}
	for _, e := range ev {
		for _, r := range e.Rows {
			seen[string(r.Update)]++
		}
	}
	if n := seen["barrier"]; n != 1 {
		t.Errorf("the barrier row delivered %d times", n)
	}
	delete(seen, "barrier")
	return seen
}
