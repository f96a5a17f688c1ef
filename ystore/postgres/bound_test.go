package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// insertRooms has owner own rooms many:{first}… (n of them, one row each), written in one
// transaction as her shipper copies her SQLite store's one-row rooms.
func insertRooms(t testing.TB, conn *pgx.Conn, cfg Config, owner string, first, n int) {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []string{
		`INSERT INTO ` + pgx.Identifier{cfg.Schema, cfg.Table + "_rooms"}.Sanitize() +
			` (path, owner) SELECT format('many:%s', lpad(i::text, 9, '0')), $1 FROM generate_series($2::int, $3::int) i`,
		`INSERT INTO ` + pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize() +
			` (path, yupdate, timestamp) SELECT format('many:%s', lpad(i::text, 9, '0')), '\x00'::bytea || $1::text::bytea, extract(epoch FROM clock_timestamp()) FROM generate_series($2::int, $3::int) i`,
	} {
		if _, err := tx.Exec(ctx, q, owner, first, first+n-1); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// heldRooms returns the rooms events leave delivered, in order.
func heldRooms(events []ystore.Event) []string {
	held := map[string]bool{}
	applyRooms(held, events)
	out := make([]string, 0, len(held))
	for room := range held {
		out = append(out, room)
	}
	slices.Sort(out)
	return out
}

// An owner whose rooms are many more than Config.MaxRooms (hub mode: what a user ships
// from her own store, issue 39, B-F3): her tailer on the Follower loads the first
// MaxRooms by key and one more, counts the rows of the others, and takes no room that
// appears while it follows that many; another owner's tailer is not bounded by hers, and
// the Follower holds no state for her rooms (before, an entry per room it heard of).
func TestFollowerOwnerBound(t *testing.T) {
	const many, bound = 5000, 3
	cfg := testConfig(t)
	conn := dial(t, cfg)
	insertRooms(t, conn, cfg, "mallory", 0, many)
	setOwner(t, conn, cfg, "b1", "bob")
	insert(t, conn, cfg, "b1", []byte("b1-0"))

	f := runFollower(t, cfg, 2)
	mcfg := cfg
	mcfg.MaxRooms = bound
	reg := prometheus.NewPedanticRegistry()
	mcfg.Owner, mcfg.Registerer = "mallory", reg
	mt, err := f.Tailer(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	mc, _ := runInto(t, mt)
	_, bc := runOwner(t, f, cfg, "bob")

	var want []string
	for i := range bound + 1 {
		want = append(want, fmt.Sprintf("many:%09d", i))
	}
	mc.waitFor(t, "mallory's first rooms", func(ev []ystore.Event) bool { return len(ev) > 0 })
	<-mt.FirstRead()
	if got := heldRooms(mc.snapshot()); !slices.Equal(got, want) {
		t.Fatalf("mallory's load: %d rooms %.80v, want the first %d by key", len(got), got, bound+1)
	}
	skipped := func() float64 { return testenv.Metric(t, reg, "jupyter_mcp_sidecar_postgres_rows_skipped_total") }
	if got := skipped(); got != many-bound-1 {
		t.Errorf("rows skipped at mallory's load %v, want %d", got, many-bound-1)
	}
	bc.waitFor(t, "bob's room", func(ev []ystore.Event) bool { return slices.Equal(heldRooms(ev), []string{"b1"}) })

	// She adds rooms and writes to the last one she has; then to a room followed.
	insertRooms(t, conn, cfg, "mallory", many, 1000)
	insert(t, conn, cfg, fmt.Sprintf("many:%09d", many-1), []byte("late"))
	insert(t, conn, cfg, want[0], []byte("followed"))
	mc.waitFor(t, "the followed room's row", func(ev []ystore.Event) bool { return rowCount(ev) == bound+2 })
	if got := heldRooms(mc.snapshot()); !slices.Equal(got, want) {
		t.Errorf("after rooms added past the bound: %d rooms %.80v, want the first %d", len(got), got, bound+1)
	}
	if got := skipped(); got != many-bound-1+1001 {
		t.Errorf("rows skipped %v, want %d", got, many-bound-1+1001)
	}
	if n := f.Status().Rooms; n != 0 {
		t.Errorf("the follower holds %d rooms, want none: it keeps no state per room", n)
	}
	insert(t, conn, cfg, "b1", []byte("b1-1"))
	bc.waitFor(t, "bob's row", func(ev []ystore.Event) bool { return rowCount(ev) == 2 })
}
