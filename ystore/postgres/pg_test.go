package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres/pgtest"
)

// Environment of the throwaway clusters that .ci/postgres.sh starts.
const (
	envDSN      = pgtest.DSNEnv
	envCrashDSN = pgtest.CrashDSNEnv
	envCrashCtl = pgtest.CrashCtlEnv
)

// testEnv returns a variable of the test cluster (see pgtest.Env).
func testEnv(t testing.TB, name string) string {
	t.Helper()
	return pgtest.Env(t, name)
}

// testConfig returns a Config on a fresh, migrated schema of the shared cluster, dropped
// at cleanup.
func testConfig(t testing.TB) Config {
	t.Helper()
	return testConfigOn(t, envDSN)
}

// testConfigOn returns a Config on a fresh, migrated schema of the cluster whose DSN is in
// the environment variable dsnEnv, dropped at cleanup.
func testConfigOn(t testing.TB, dsnEnv string) Config {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	cfg := Config{
		DSN:          testEnv(t, dsnEnv),
		Schema:       "t_" + hex.EncodeToString(b[:]),
		Table:        DefaultTable,
		PollInterval: 50 * time.Millisecond,
		BackoffMin:   20 * time.Millisecond,
		BackoffMax:   200 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	ctx := context.Background()
	if err := Init(ctx, cfg); err != nil {
		t.Fatalf("init: %v", err)
	}
	t.Cleanup(func() {
		conn := dial(t, cfg)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{cfg.Schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	return cfg
}

// testWriter sends logs to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// dial opens a connection closed at cleanup.
func dial(t testing.TB, cfg Config) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), cfg.DSN)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// querier runs statements: a connection or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// insert appends one row and returns its id.
func insert(t testing.TB, q querier, cfg Config, room string, update []byte) int64 {
	t.Helper()
	id, err := tryInsert(context.Background(), q, cfg, room, update)
	if err != nil {
		t.Fatalf("insert into %s: %v", room, err)
	}
	return id
}

// tryInsert appends one row and returns its id or the error.
func tryInsert(ctx context.Context, q querier, cfg Config, room string, update []byte) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, "INSERT INTO "+pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()+
		" (path, yupdate, timestamp) VALUES ($1, $2, extract(epoch FROM clock_timestamp())) RETURNING id",
		room, update).Scan(&id)
	return id, err
}

// collector is a sink recording every event, a streamed Reset's rows read into its Rows.
type collector struct {
	mu     sync.Mutex
	events []ystore.Event
}

func newCollector() *collector { return &collector{} }

func (c *collector) sink(ctx context.Context, events []ystore.Event) error {
	events, err := gathered(ctx, slices.Clone(events))
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.events = append(c.events, events...)
	c.mu.Unlock()
	return nil
}

// snapshot returns the events so far.
func (c *collector) snapshot() []ystore.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ystore.Event(nil), c.events...)
}

// waitFor waits until cond holds for the events so far and returns them.
func (c *collector) waitFor(t testing.TB, what string, cond func([]ystore.Event) bool) []ystore.Event {
	t.Helper()
	var ev []ystore.Event
	testenv.Eventually(t, testenv.Wait, what, func() bool { ev = c.snapshot(); return cond(ev) },
		func() string { return "events:" + describe(c.snapshot()) })
	return ev
}

// rowCount counts the rows delivered in events.
func rowCount(events []ystore.Event) int {
	n := 0
	for _, e := range events {
		n += len(e.Rows)
	}
	return n
}

// describe renders events for failure messages.
func describe(events []ystore.Event) string {
	var b bytes.Buffer
	for _, e := range events {
		fmt.Fprintf(&b, "\n  %s %s:", e.Kind, e.Room)
		for _, r := range e.Rows {
			fmt.Fprintf(&b, " %d=%q", r.ID, r.Update)
		}
	}
	return b.String()
}

// runTailer runs a tailer into a new collector until cleanup.
func runTailer(t testing.TB, cfg Config) (*Tailer, *collector) {
	t.Helper()
	tl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := runInto(t, tl)
	return tl, c
}

// runInto runs tl into a new collector until stop or cleanup.
func runInto(t testing.TB, tl ystore.Tailer) (c *collector, stop func()) {
	c = newCollector()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx, c.sink) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return c, stop
}

// pgCtl runs pg_ctl on the crash cluster, skipping without one.
func pgCtl(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command(testEnv(t, envCrashCtl), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_ctl %v: %v\n%s", args, err, out)
	}
}

// waitLoaded waits for the tailer's first successful read.
func waitLoaded(t testing.TB, tl *Tailer) {
	t.Helper()
	testenv.Eventually(t, testenv.Wait, "the tailer's first read of the store", func() bool { return !tl.Status().LastReadAt.IsZero() },
		func() string { return fmt.Sprintf("status %+v", tl.Status()) })
}
