package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"weak"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ystoretest"
)

// fullRead is the load as the tailer read it before it streamed (every row of the store
// at once, grouped by room): the oracle LoadStream is compared with.
func fullRead(t testing.TB, conn *pgx.Conn, cfg Config) []ystore.Event {
	t.Helper()
	q := `SELECT ` + rowColumns + ` FROM ` + pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()
	var args []any
	if cfg.Owner != "" {
		q += ` WHERE path IN (SELECT path FROM ` + pgx.Identifier{cfg.Schema, cfg.Table + "_rooms"}.Sanitize() + ` WHERE owner = $1)`
		args = append(args, cfg.Owner)
	}
	rs, err := conn.Query(context.Background(), q+` ORDER BY id`, args...)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := collectRows(rs)
	if err != nil {
		t.Fatal(err)
	}
	order, byRoom := groupRooms(rows)
	sort.Strings(order)
	var events []ystore.Event
	for _, room := range order {
		if h, ok := history(byRoom[room]); ok {
			events = append(events, ystore.Event{Kind: ystore.EventReset, Room: room, Rows: h})
		}
	}
	return events
}

// writeHistories writes rooms of every shape a load meets, their rows interleaved: plain
// ones, one whose history was replaced (a reset row and rows after it), one removed (an
// empty reset row last), one removed and written again, NULL markers, an owner's rooms
// and rooms of no owner: alice owns again, plain and removed.
func writeHistories(t testing.TB, conn *pgx.Conn, cfg Config) {
	t.Helper()
	table := pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		for _, room := range []string{"plain", "replaced", "removed", "again", "zed", "Upper", "é"} {
			insert(t, conn, cfg, room, fmt.Appendf(nil, "%s-%d", room, i))
		}
	}
	exec(`INSERT INTO ` + table + ` (path, yupdate, timestamp, reset) VALUES
		('replaced', 'r-new1', 1, true), ('replaced', NULL, 2, false), ('replaced', 'r-new2', 3, false),
		('removed', NULL, 4, true),
		('again', NULL, 5, true), ('again', 'again-new', 6, false),
		('plain', NULL, 7, false)`)
	for i := range 5 {
		insert(t, conn, cfg, "replaced", fmt.Appendf(nil, "r-after-%d", i))
	}
	for _, room := range []string{"again", "plain", "removed"} {
		setOwner(t, conn, cfg, room, "alice")
	}
	setOwner(t, conn, cfg, "zed", "bob")
}

// LoadStream hands the sink, in one call, a streamed Reset per room present (an owner's
// only), a chunk of at most ChunkRows rows at a time: the rooms and rows the full read
// holds, which Load returns too.
func TestLoadStream(t *testing.T) {
	base := testConfig(t)
	base.ChunkRows = 2
	conn := dial(t, base)
	writeHistories(t, conn, base)
	for _, tc := range []struct {
		name  string
		cfg   Config
		rooms int
	}{
		{"every room", base, 6},
		{"an owner's rooms", owns(base, "alice"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := fullRead(t, conn, tc.cfg)
			if len(want) != tc.rooms {
				t.Fatalf("the full read holds %d rooms, want %d:%s", len(want), tc.rooms, describe(want))
			}
			tl, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			calls, chunks := 0, 0
			var got []ystore.Event
			err = tl.LoadStream(t.Context(), func(ctx context.Context, events []ystore.Event) error {
				calls++
				for i, e := range events {
					if e.Kind != ystore.EventReset || e.Stream == nil || len(e.Rows) != 0 {
						t.Errorf("event %d = %+v, want a streamed Reset", i, e)
					}
				}
				ystoretest.TapStreams(events, func(rows []ystore.Row) error {
					if chunks++; len(rows) > tc.cfg.ChunkRows {
						t.Errorf("chunk of %d rows, want at most ChunkRows %d", len(rows), tc.cfg.ChunkRows)
					}
					return nil
				})
				var err error
				got, err = gathered(ctx, events)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if calls != 1 || describe(got) != describe(want) {
				t.Fatalf("LoadStream: %d calls delivering%s\nwant one delivering%s", calls, describe(got), describe(want))
			}
			if rows := rowCount(want); chunks < rows/tc.cfg.ChunkRows {
				t.Fatalf("%d chunks for %d rows in chunks of %d", chunks, rows, tc.cfg.ChunkRows)
			}
			loaded, err := tl.Load(t.Context())
			if err != nil || describe(loaded) != describe(want) {
				t.Fatalf("Load: %v%s\nwant%s", err, describe(loaded), describe(want))
			}
			if st := tl.Status(); !st.Reachable || st.Rooms != tc.rooms {
				t.Fatalf("status after the load: %+v, want reachable with %d rooms", st, tc.rooms)
			}
		})
	}
}

// terminate ends the server process of the connections of application name, as a crash
// of that backend or an administrator would.
func terminate(t testing.TB, conn *pgx.Conn, name string) {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1`, name).Scan(&n); err != nil || n == 0 {
		t.Fatalf("terminate the backends of %s: %d terminated, %v", name, n, err)
	}
}

// A LoadStream whose sink fails returns the sink's error as is and leaves the store
// reachable; one whose stream cannot be read returns the read's error, whatever the sink
// answered, and reports the store unreachable; one whose ctx ends returns ctx's error.
func TestLoadStreamErrors(t *testing.T) {
	cfg := testConfig(t)
	cfg.ChunkRows = 2
	conn := dial(t, cfg)
	writeHistories(t, conn, cfg)
	const app = "loadstream_errors"
	errSink := errors.New("sink full")
	// firstChunk reads one chunk of the first room, runs then and reads the rest, and
	// returns the stream's error, wrapped the way the rooms wrap it.
	firstChunk := func(ctx context.Context, events []ystore.Event, then func()) error {
		first := true
		err := events[0].Stream(ctx, func([]ystore.Row) error {
			if first {
				first = false
				then()
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%w: %w", errSink, err)
		}
		return nil
	}
	for _, tc := range []struct {
		name      string
		sink      func(context.Context, []ystore.Event) error
		cancel    bool // the sink cancels the load's ctx after the first chunk
		isSink    bool // the error is the sink's
		reachable bool
		want      error
	}{
		{"the sink fails", func(context.Context, []ystore.Event) error { return errSink }, false, true, true, errSink},
		{"a stream fails", func(ctx context.Context, events []ystore.Event) error {
			return firstChunk(ctx, events, func() { terminate(t, conn, app) })
		}, false, false, false, nil},
		{"a stream fails, the sink says nothing", func(ctx context.Context, events []ystore.Event) error {
			_ = firstChunk(ctx, events, func() { terminate(t, conn, app) })
			return nil
		}, false, false, false, nil},
		{"ctx ends", nil, true, false, true, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl, err := New(withAppName(t, cfg, app))
			if err != nil {
				t.Fatal(err)
			}
			if err := tl.LoadStream(t.Context(), func(context.Context, []ystore.Event) error { return nil }); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			sink := tc.sink
			if tc.cancel {
				sink = func(ctx context.Context, events []ystore.Event) error {
					return firstChunk(ctx, events, cancel)
				}
			}
			err = tl.LoadStream(ctx, sink)
			switch {
			case err == nil:
				t.Fatal("LoadStream succeeded")
			case tc.isSink != errors.Is(err, errSink):
				t.Fatalf("LoadStream: %v; the sink's error: %v, want %v", err, errors.Is(err, errSink), tc.isSink)
			case tc.isSink && err != errSink: // as is, not wrapped
				t.Fatalf("LoadStream: %v, want the sink's error as is", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("LoadStream: %v, want %v", err, tc.want)
			}
			if st := tl.Status(); st.Reachable != tc.reachable || (st.LastError == "") != tc.reachable {
				t.Fatalf("status %+v, want reachable %v", st, tc.reachable)
			}
		})
	}
}

// heldRows tracks the update of every row a load hands over with a weak pointer, and
// records the most rows of earlier chunks still held when a chunk arrives (garbage
// collected first).
type heldRows struct {
	held []weak.Pointer[byte]
	most int
	rows int
}

func (h *heldRows) chunk(rows []ystore.Row) {
	runtime.GC()
	alive := 0
	for _, w := range h.held {
		if w.Value() != nil {
			alive++
		}
	}
	h.most = max(h.most, alive)
	for _, r := range rows {
		h.held = append(h.held, weak.Make(&r.Update[0]))
	}
	h.rows += len(rows)
}

// A load of a store many chunks large holds no more than the chunk the sink reads (and
// the next, read ahead: ystore.ReadAhead): by the time a chunk reaches the sink, the rows
// of the chunks before are garbage (the sink keeps none), whatever the store's size.
func TestLoadStreamHoldsAChunk(t *testing.T) {
	if testing.Short() {
		t.Skip("collects garbage at every chunk")
	}
	cfg := testConfig(t)
	cfg.ChunkRows = 50
	const rooms, perRoom = 3, 1000
	conn := dial(t, cfg)
	update := make([]byte, 256)
	if _, err := conn.CopyFrom(context.Background(), pgx.Identifier{cfg.Schema, cfg.Table},
		[]string{"path", "yupdate", "timestamp"},
		pgx.CopyFromSlice(rooms*perRoom, func(i int) ([]any, error) {
			return []any{fmt.Sprintf("room-%d", i%rooms), update, float64(i)}, nil
		})); err != nil {
		t.Fatal(err)
	}
	tl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var h heldRows
	err = tl.LoadStream(t.Context(), func(ctx context.Context, events []ystore.Event) error {
		for _, e := range events {
			if err := e.Each(ctx, func(rows []ystore.Row) error { h.chunk(rows); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if h.rows != rooms*perRoom || h.most > cfg.ChunkRows {
		t.Fatalf("%d rows of earlier chunks still held while streaming %d rows (want %d) in chunks of %d",
			h.most, h.rows, rooms*perRoom, cfg.ChunkRows)
	}
}

// Run's first read streams the rooms to the sink in its transaction, a chunk at a time,
// counted as tailed; a stream that cannot be read is a read that failed, retried (Run
// goes on, where the sink's own failure would end it), and the load delivered again.
func TestRunStreamsLoad(t *testing.T) {
	cfg := testConfig(t)
	cfg.ChunkRows = 2
	conn := dial(t, cfg)
	writeHistories(t, conn, cfg)
	want := fullRead(t, conn, cfg)
	const app = "run_streams_load"
	tl, err := New(withAppName(t, cfg, app))
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector()
	var loads atomic.Int32
	failed := false
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- tl.Run(ctx, func(ctx context.Context, events []ystore.Event) error {
			for i, e := range events {
				if e.Kind != ystore.EventReset {
					continue
				}
				if e.Stream == nil || len(e.Rows) != 0 {
					t.Errorf("load event %d = %+v, want a streamed Reset", i, e)
				}
				loads.Add(1)
			}
			ystoretest.TapStreams(events, func(rows []ystore.Row) error {
				if len(rows) > cfg.ChunkRows {
					t.Errorf("chunk of %d rows, want at most %d", len(rows), cfg.ChunkRows)
				}
				if !failed {
					failed = true
					terminate(t, conn, app) // the next chunk's read fails
				}
				return nil
			})
			return c.sink(ctx, events)
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	c.waitFor(t, "the load, delivered again once the store reads", func(ev []ystore.Event) bool {
		return len(ev) >= len(want) && describe(ev[len(ev)-len(want):]) == describe(want)
	})
	testenv.Eventually(t, testenv.Wait, "reachable status, the load's rows counted", func() bool {
		st := tl.Status()
		return st.Reachable && st.RowsTailed >= uint64(rowCount(want)) && st.Rooms == len(want)
	})
	insert(t, conn, cfg, "plain", []byte("later"))
	c.waitFor(t, "a row committed after the load", func(ev []ystore.Event) bool {
		last := ev[len(ev)-1]
		return last.Kind == ystore.EventUpdates && len(last.Rows) == 1 && string(last.Rows[0].Update) == "later"
	})
	if n := int(loads.Load()); n < 2*len(want) {
		t.Fatalf("%d rooms loaded, want the %d rooms loaded twice", n, len(want))
	}
}

// An owner's Tailer on a Follower (hub mode) streams its load to the sink, its rooms
// only, a chunk at a time, and is a StreamLoader for inspect.
func TestFollowerOwnerStreamsLoad(t *testing.T) {
	cfg := testConfig(t)
	cfg.ChunkRows = 2
	conn := dial(t, cfg)
	writeHistories(t, conn, cfg)
	want := fullRead(t, conn, owns(cfg, "alice"))
	f := runFollower(t, cfg, 1)
	cfg.Owner, cfg.Registerer = "alice", prometheus.NewPedanticRegistry()
	tl, err := f.Tailer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tl.(ystore.StreamLoader); !ok {
		t.Fatalf("%T is no ystore.StreamLoader", tl)
	}
	c := newCollector()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- tl.Run(ctx, func(ctx context.Context, events []ystore.Event) error {
			for i, e := range events {
				if e.Kind == ystore.EventReset && (e.Stream == nil || len(e.Rows) != 0) {
					t.Errorf("load event %d = %+v, want a streamed Reset", i, e)
				}
			}
			ystoretest.TapStreams(events, func(rows []ystore.Row) error {
				if len(rows) > cfg.ChunkRows {
					t.Errorf("chunk of %d rows, want at most %d", len(rows), cfg.ChunkRows)
				}
				return nil
			})
			return c.sink(ctx, events)
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	got := c.waitFor(t, "alice's load", func(ev []ystore.Event) bool { return len(ev) >= len(want) })
	if describe(got) != describe(want) {
		t.Fatalf("alice's load:%s\nwant%s", describe(got), describe(want))
	}
	insert(t, conn, cfg, "plain", []byte("later"))
	c.waitFor(t, "a row committed after the load", func(ev []ystore.Event) bool {
		last := ev[len(ev)-1]
		return slices.ContainsFunc(last.Rows, func(r ystore.Row) bool { return string(r.Update) == "later" })
	})
}
