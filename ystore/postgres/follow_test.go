package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// setOwner records owner as the owner of room, as a shipper does.
func setOwner(t testing.TB, conn *pgx.Conn, cfg Config, room, owner string) {
	t.Helper()
	_, err := conn.Exec(context.Background(), `INSERT INTO `+pgx.Identifier{cfg.Schema, cfg.Table + "_rooms"}.Sanitize()+
		` (path, owner) VALUES ($1, $2) ON CONFLICT (path) DO UPDATE SET owner = excluded.owner`, room, owner)
	if err != nil {
		t.Fatal(err)
	}
}

// withAppName returns cfg connecting as application name, so that its connections
// can be counted apart from other tests'.
func withAppName(t testing.TB, cfg Config, name string) Config {
	t.Helper()
	u, err := url.Parse(cfg.DSN)
	if err != nil || u.Scheme == "" {
		cfg.DSN += " application_name=" + name
		return cfg
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	cfg.DSN = u.String()
	return cfg
}

// runFollower runs a Follower of cfg until cleanup.
func runFollower(t testing.TB, cfg Config, loads int) *Follower {
	t.Helper()
	f, err := NewFollower(FollowerConfig{Store: cfg, LoadConcurrency: loads})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("follower: %v", err)
		}
	})
	return f
}

// runOwner runs owner's Tailer on f into a new collector until cleanup.
func runOwner(t testing.TB, f *Follower, cfg Config, owner string) (ystore.Tailer, *collector) {
	t.Helper()
	cfg.Owner, cfg.Registerer = owner, prometheus.NewPedanticRegistry()
	tl, err := f.Tailer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := runInto(t, tl)
	return tl, c
}

// rowIDs returns the ids of the rows in events, each once, sorted.
func rowIDs(events []ystore.Event) []int64 {
	var ids []int64
	for _, e := range events {
		for _, r := range e.Rows {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// updatedAfterLoad returns a condition on an owner's events: the resets of its load of
// rooms rooms, then rows updates after them, which the writer committed after the load.
func updatedAfterLoad(rooms, rows int) func([]ystore.Event) bool {
	return func(ev []ystore.Event) bool {
		resets, updates := 0, 0
		for _, e := range ev {
			switch {
			case e.Kind == ystore.EventReset:
				resets++
			case resets >= rooms && e.Kind == ystore.EventUpdates:
				updates += len(e.Rows)
			}
		}
		return updates >= rows
	}
}

// roomIDs reads the ids of rooms' rows.
func roomIDs(t testing.TB, conn *pgx.Conn, cfg Config, rooms ...string) []int64 {
	t.Helper()
	rs, err := conn.Query(context.Background(), `SELECT id FROM `+pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()+
		` WHERE path = ANY($1) ORDER BY id`, rooms)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rs, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestFollowerOwners follows one store for two owners while a writer appends to their
// rooms and to an ownerless one: each owner's Tailer loads and then hears exactly its
// own rooms' rows, none lost across the load (rows heard during it may come twice),
// none of another's; an owner who starts later loads what came before.
func TestFollowerOwners(t *testing.T) {
	cfg := testConfig(t)
	conn := dial(t, cfg)
	for _, r := range []struct{ room, owner string }{{"a1", "alice"}, {"a2", "alice"}, {"b1", "bob"}} {
		setOwner(t, conn, cfg, r.room, r.owner)
		insert(t, conn, cfg, r.room, []byte(r.room+"-0"))
	}
	insert(t, conn, cfg, "o1", []byte("o1-0"))

	// The writer runs from before the owners' loads to after them.
	wctx, stopWriting := context.WithCancel(context.Background())
	writerDone := make(chan error, 1)
	go func() {
		wconn := dial(t, cfg)
		rooms := []string{"a1", "b1", "o1", "a2"}
		for i := 1; wctx.Err() == nil; i++ {
			room := rooms[i%len(rooms)]
			if _, err := tryInsert(wctx, wconn, cfg, room, fmt.Appendf(nil, "%s-%d", room, i)); err != nil && wctx.Err() == nil {
				writerDone <- err
				return
			}
			time.Sleep(2 * time.Millisecond) // pacing, not a wait: the writer's rate
		}
		writerDone <- nil
	}()
	t.Cleanup(stopWriting)

	f := runFollower(t, cfg, 2)
	// Each owner starts while the writer runs, and the writer stops only once the owner
	// has heard rows it wrote after the owner's load.
	alice, ca := runOwner(t, f, cfg, "alice")
	ca.waitFor(t, "alice's load and rows after it", updatedAfterLoad(2, 5))
	_, cb := runOwner(t, f, cfg, "bob")
	cb.waitFor(t, "bob's load and rows after it", updatedAfterLoad(1, 5))
	stopWriting()
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		owner string
		c     *collector
		rooms []string
	}{{"alice", ca, []string{"a1", "a2"}}, {"bob", cb, []string{"b1"}}} {
		want := roomIDs(t, conn, cfg, tc.rooms...)
		events := tc.c.waitFor(t, tc.owner+"'s rows", func(ev []ystore.Event) bool { return len(rowIDs(ev)) >= len(want) })
		if got := rowIDs(events); !slices.Equal(got, want) {
			t.Errorf("%s heard rows %v, want %v", tc.owner, got, want)
		}
		for i, e := range events {
			if !slices.Contains(tc.rooms, e.Room) {
				t.Errorf("%s heard %s of room %s", tc.owner, e.Kind, e.Room)
			}
			if e.Kind == ystore.EventReset && i >= len(tc.rooms) {
				t.Errorf("%s: event %d is a reset of %s after the load", tc.owner, i, e.Room)
			}
		}
		if len(events) < len(tc.rooms) || events[0].Kind != ystore.EventReset {
			t.Errorf("%s's tailer did not start with its rooms' resets:%s", tc.owner, describe(events))
		}
	}
	st := alice.Status()
	if !st.Reachable || st.LastReadAt.IsZero() || st.LastError != "" {
		t.Errorf("alice's status %+v", st)
	}
}

// TestFollowerConnections runs many owners' Tailers on one Follower: once their loads
// are done, the store sees one connection, and a room's reset (a compaction) reaches
// its owner as a reset.
func TestFollowerConnections(t *testing.T) {
	const owners = 12
	cfg := testConfig(t)
	conn := dial(t, cfg)
	app := "follower_" + cfg.Schema
	counted := withAppName(t, cfg, app)
	for i := range owners {
		room := fmt.Sprintf("r%d", i)
		setOwner(t, conn, cfg, room, fmt.Sprintf("u%d", i))
		insert(t, conn, cfg, room, []byte(room+"-0"))
	}
	f := runFollower(t, counted, 3)
	cs := make([]*collector, owners)
	for i := range owners {
		_, cs[i] = runOwner(t, f, counted, fmt.Sprintf("u%d", i))
	}
	for i, c := range cs {
		c.waitFor(t, fmt.Sprintf("u%d's load", i), func(ev []ystore.Event) bool { return len(ev) == 1 })
	}
	connections := func() int {
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The loads' connections close after the loads are delivered.
	testenv.Eventually(t, testenv.Wait, fmt.Sprintf("%d owners loaded: the follower's one connection", owners),
		func() bool { return connections() == 1 }, func() string { return fmt.Sprintf("%d connections", connections()) })

	// A compaction of r3 (a reset row) reaches u3 only.
	var id int64
	if err := conn.QueryRow(context.Background(), "INSERT INTO "+pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()+
		" (path, yupdate, reset) VALUES ('r3', 'r3-merged', true) RETURNING id").Scan(&id); err != nil {
		t.Fatal(err)
	}
	ev := cs[3].waitFor(t, "u3's reset", func(ev []ystore.Event) bool { return len(ev) == 2 })
	if e := ev[1]; e.Kind != ystore.EventReset || len(e.Rows) != 1 || e.Rows[0].ID != id {
		t.Errorf("after the compaction u3 heard:%s", describe(ev[1:]))
	}
	// A barrier: a row in every other owner's room, committed after the compaction;
	// once an owner has heard it, it would have heard the compaction before.
	barrier := make([]int64, owners)
	for i := range owners {
		if i != 3 {
			barrier[i] = insert(t, conn, cfg, fmt.Sprintf("r%d", i), []byte("barrier"))
		}
	}
	for i, c := range cs {
		if i == 3 {
			continue
		}
		ev := c.waitFor(t, fmt.Sprintf("u%d's barrier row", i), func(ev []ystore.Event) bool { return slices.Contains(rowIDs(ev), barrier[i]) })
		if n := len(ev) - 1; n != 1 {
			t.Errorf("u%d heard %d events before the barrier row, want its load only:%s", i, n, describe(ev))
		}
	}
}

// TestFollowerConfig refuses a Follower restricted to one owner and an owner's Tailer
// without an owner.
func TestFollowerConfig(t *testing.T) {
	if _, err := NewFollower(FollowerConfig{Store: Config{DSN: "postgres://x/y", Owner: "alice"}}); !errors.Is(err, ErrConfig) {
		t.Errorf("a follower of one owner: %v, want ErrConfig", err)
	}
	f, err := NewFollower(FollowerConfig{Store: Config{DSN: "postgres://x/y"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Tailer(Config{DSN: "postgres://x/y"}); !errors.Is(err, ErrConfig) {
		t.Errorf("an owner's tailer without an owner: %v, want ErrConfig", err)
	}
}

// TestFollowerServerRestart crashes the server under a Follower serving alice while a
// writer appends to her rooms: her Tailer reports the outage, bob's Tailer, started
// during it, reports it before any read and loads once the server is back, and every
// acknowledged row reaches alice.
func TestFollowerServerRestart(t *testing.T) {
	cfg := testConfigOn(t, envCrashDSN)
	conn := dial(t, cfg)
	rooms := []string{"room0", "room1", "room2"}
	for _, r := range rooms {
		setOwner(t, conn, cfg, r, "alice")
	}
	setOwner(t, conn, cfg, "b", "bob")
	insert(t, conn, cfg, "b", []byte("b0"))
	conn.Close(context.Background())

	f := runFollower(t, cfg, 2)
	alice, ca := runOwner(t, f, cfg, "alice")
	w := startFaultWriter(t, cfg, rooms...)
	ca.waitFor(t, "rows before the crash", func(ev []ystore.Event) bool { return rowCount(ev) >= 50 })
	pgCtl(t, "stop", "-m", "immediate")
	testenv.Eventually(t, testenv.Wait, "alice's tailer to report the outage", func() bool { return !alice.Status().Reachable },
		func() string { return fmt.Sprintf("status %+v", alice.Status()) })
	if st := alice.Status(); st.Reachable || st.LastError == "" {
		t.Errorf("alice's status while the server is down: %+v", st)
	}
	bob, cb := runOwner(t, f, cfg, "bob")
	// His load is tried, and fails, during the outage.
	loadRetries := bob.(*ownerTailer).load.m.retries
	testenv.Eventually(t, testenv.Wait, "bob's load to fail", func() bool { return promtest.ToFloat64(loadRetries) >= 1 },
		func() string { return fmt.Sprintf("status %+v", bob.Status()) })
	if st := bob.Status(); st.Reachable || st.LastError == "" || !st.LastReadAt.IsZero() {
		t.Errorf("bob's status before his load, the server down: %+v (want the follower's failure)", st)
	}
	pgCtl(t, "start")
	acked, _ := w.stopAfter(t, 50)
	if m := waitDelivered(ca, acked); len(m) > 0 {
		t.Fatalf("acknowledged rows never delivered to alice: %v", m)
	}
	cb.waitFor(t, "bob's load", func(ev []ystore.Event) bool { return len(ev) == 1 && ev[0].Room == "b" })
	testenv.Eventually(t, testenv.Wait, "alice's tailer reachable after the restart", func() bool { return alice.Status().Reachable },
		func() string { return fmt.Sprintf("status %+v", alice.Status()) })
}

// An owner's FirstRead is closed once the owner's load is delivered, and, when the
// Follower cannot read the store, once its first read failed (Status then says why).
func TestFollowerOwnerFirstRead(t *testing.T) {
	cfg := testConfig(t)
	conn := dial(t, cfg)
	setOwner(t, conn, cfg, "a1", "alice")
	insert(t, conn, cfg, "a1", []byte("a1-0"))
	alice, ca := runOwner(t, runFollower(t, cfg, 1), cfg, "alice")
	testenv.Eventually(t, testenv.Wait, "alice's first read", closed(alice.FirstRead()))
	if ev := ca.snapshot(); len(ev) != 1 || ev[0].Kind != ystore.EventReset || ev[0].Room != "a1" {
		t.Fatalf("delivered by alice's first read:%s; want the reset of a1", describe(ev))
	}

	down := cfg
	down.DSN = "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"
	bob, _ := runOwner(t, runFollower(t, down, 1), down, "bob")
	testenv.Eventually(t, testenv.Wait, "bob's first read", closed(bob.FirstRead()))
	if st := bob.Status(); st.Reachable || st.LastError == "" || !st.LastReadAt.IsZero() {
		t.Fatalf("bob's status after his first read, the store unreachable: %+v", st)
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}

// TestFollowerOwnerReload: an owner's Tailer on a Follower is a Reloader. A room asked
// for again reaches its owner as one Reset of that room, read alone: the owner's
// rows_tailed_total grows by that room's rows, not by the owner's other rooms' (before,
// hub mode on Postgres could not rebuild a room at all). A room the owner has not been
// delivered, another owner's or none, is not read and reaches nobody.
func TestFollowerOwnerReload(t *testing.T) {
	cfg := testConfig(t)
	conn := dial(t, cfg)
	rows := map[string]int{"a1": 3, "a2": 40, "b1": 5}
	for _, r := range []struct{ room, owner string }{{"a1", "alice"}, {"a2", "alice"}, {"b1", "bob"}} {
		setOwner(t, conn, cfg, r.room, r.owner)
		for i := range rows[r.room] {
			insert(t, conn, cfg, r.room, fmt.Appendf(nil, "%s-%d", r.room, i))
		}
	}
	f := runFollower(t, cfg, 2)
	reg := prometheus.NewPedanticRegistry()
	acfg := cfg
	acfg.Owner, acfg.Registerer = "alice", reg
	alice, err := f.Tailer(acfg)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := runInto(t, alice)
	_, cb := runOwner(t, f, cfg, "bob")
	ca.waitFor(t, "alice's load", func(ev []ystore.Event) bool { return len(ev) == 2 })
	cb.waitFor(t, "bob's load", func(ev []ystore.Event) bool { return len(ev) == 1 })
	rl, ok := alice.(ystore.Reloader)
	if !ok {
		t.Fatalf("an owner's tailer on a follower (%T) is not a ystore.Reloader: hub mode cannot rebuild a room", alice)
	}
	tailed := func() float64 { return testenv.Metric(t, reg, "jupyter_mcp_sidecar_rows_tailed_total") }

	for _, tc := range []struct {
		name  string
		asked []string
	}{
		{"her room", []string{"a1"}},
		{"bob's room, then hers", []string{"b1", "no such room", "a1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, heard := tailed(), len(ca.snapshot())
			for _, room := range tc.asked {
				rl.Reload(room)
			}
			ev := ca.waitFor(t, "a1 again", func(ev []ystore.Event) bool { return len(ev) > heard })[heard:]
			if got, want := describe(ev), describe([]ystore.Event{{Kind: ystore.EventReset, Room: "a1", Rows: []ystore.Row{
				{ID: 1, Update: []byte("a1-0")}, {ID: 2, Update: []byte("a1-1")}, {ID: 3, Update: []byte("a1-2")}}}}); got != want {
				t.Fatalf("alice heard after the reload:%s\nwant:%s", got, want)
			}
			// The rows are counted once delivered, in one step: a whole reload would count 43.
			testenv.Eventually(t, testenv.Wait, "the reload counted", func() bool { return tailed() > before },
				func() string { return fmt.Sprint(tailed()) })
			if read := tailed() - before; read != float64(rows["a1"]) {
				t.Fatalf("the reload of a1 read %v rows; a1 has %d (alice's rooms %d)", read, rows["a1"], rows["a1"]+rows["a2"])
			}
			if ev := cb.snapshot(); len(ev) != 1 {
				t.Fatalf("bob heard alice's reloads:%s", describe(ev))
			}
		})
	}
}

// TestFollowerMetrics: a Follower's reads are counted on its store's Registerer (how
// they were woken, how long they took), next to its owners' Tailers' series; before,
// hub mode on Postgres exported none of them, the owners' series staying at zero.
func TestFollowerMetrics(t *testing.T) {
	cfg := testConfig(t)
	conn := dial(t, cfg)
	setOwner(t, conn, cfg, "a1", "alice")
	insert(t, conn, cfg, "a1", []byte("a1-0"))
	reg := prometheus.NewPedanticRegistry()
	cfg.Registerer = reg
	f := runFollower(t, cfg, 1)
	alice, ca := runOwner(t, f, cfg, "alice")
	testenv.Eventually(t, testenv.Wait, "alice's first read", closed(alice.FirstRead()))
	insert(t, conn, cfg, "a1", []byte("a1-1"))
	ca.waitFor(t, "the row", func(ev []ystore.Event) bool { return rowCount(ev) == 2 })
	if got := testenv.Metric(t, reg, "jupyter_mcp_sidecar_postgres_wakeups_total", "by", "notify"); got == 0 {
		t.Errorf("postgres_wakeups_total{by=notify}: 0 after the follower read a row it was notified of")
	}
	if testenv.Sum(testenv.Gather(t, reg), "jupyter_mcp_sidecar_postgres_read_seconds_count") == 0 {
		t.Errorf("postgres_read_seconds: no read counted after the follower read a row")
	}
}
