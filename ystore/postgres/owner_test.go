package postgres

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// owns returns cfg with Owner set to owner.
func owns(cfg Config, owner string) Config {
	cfg.Owner = owner
	return cfg
}

// roomOwners reads the rooms table: room → owner.
func roomOwners(t testing.TB, conn *pgx.Conn, cfg Config) map[string]string {
	t.Helper()
	rs, err := conn.Query(context.Background(), `SELECT path, owner FROM `+
		pgx.Identifier{cfg.Schema, cfg.Table + "_rooms"}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var room, owner string
	if _, err := pgx.ForEachRow(rs, []any{&room, &owner}, func() error { out[room] = owner; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// hasEvent reports whether events hold one of kind for room.
func hasEvent(events []ystore.Event, kind ystore.EventKind, room string) bool {
	return slices.ContainsFunc(events, func(e ystore.Event) bool { return e.Kind == kind && e.Room == room })
}

// TestShipOwners ships two users' SQLite stores and one store shipped before owners
// existed: each owner's tailer loads and hears only that owner's rooms, the unfiltered
// tailer every room; the ownerless room becomes its owner's when its shipper restarts
// with an owner (rewritten as a reset), and a room removed at the source is removed for
// its owner.
func TestShipOwners(t *testing.T) {
	cfg := testConfig(t)
	conn := dial(t, cfg)
	legacy, alice, bob := newSQLiteStore(t), newSQLiteStore(t), newSQLiteStore(t)
	legacy.add("old", "o1")
	alice.add("a", "a1")
	bob.add("b", "b1")

	_, stopLegacy := runShipperAs(t, cfg, legacy.path, "host-legacy")
	waitPG(t, conn, cfg, map[string][]string{"old": {"o1"}})
	stopLegacy()
	if got := roomOwners(t, conn, cfg); len(got) != 0 {
		t.Fatalf("a shipper without owner recorded owners %v", got)
	}

	ta, evA := runTailer(t, owns(cfg, "alice"))
	tb, evB := runTailer(t, owns(cfg, "bob"))
	all, _ := runTailer(t, cfg)
	_, stopAlice := runShipperAs(t, owns(cfg, "alice"), alice.path, "host-alice")
	_, stopBob := runShipperAs(t, owns(cfg, "bob"), bob.path, "host-bob")
	defer stopBob()
	waitPG(t, conn, cfg, map[string][]string{"old": {"o1"}, "a": {"a1"}, "b": {"b1"}})

	if got, want := loaded(t, ta), "map[a:[a1]]"; got != want {
		t.Errorf("alice loads %s, want %s", got, want)
	}
	if got, want := loaded(t, tb), "map[b:[b1]]"; got != want {
		t.Errorf("bob loads %s, want %s", got, want)
	}
	if got, want := loaded(t, all), "map[a:[a1] b:[b1] old:[o1]]"; got != want {
		t.Errorf("the unfiltered tailer loads %s, want %s", got, want)
	}

	alice.add("a", "a2")
	bob.add("b", "b2")
	evA.waitFor(t, "alice's update", func(ev []ystore.Event) bool { return rowCount(ev) >= 2 })
	evB.waitFor(t, "bob's update", func(ev []ystore.Event) bool { return rowCount(ev) >= 2 })

	// The ownerless room's shipper restarts as alice's.
	_, stopLegacy = runShipperAs(t, owns(cfg, "alice"), legacy.path, "host-legacy")
	evA.waitFor(t, "the adopted room", func(ev []ystore.Event) bool { return hasEvent(ev, ystore.EventReset, "old") })
	stopLegacy()
	if got, want := roomOwners(t, conn, cfg), map[string]string{"a": "alice", "b": "bob", "old": "alice"}; !equalMaps(got, want) {
		t.Errorf("owners %v, want %v", got, want)
	}

	// Room a removed at the source while its shipper is down.
	stopAlice()
	alice.exec(`DELETE FROM yupdates WHERE path = 'a'`)
	alice.add("a2nd", "c1")
	_, stopAlice = runShipperAs(t, owns(cfg, "alice"), alice.path, "host-alice")
	defer stopAlice()
	evA.waitFor(t, "the removal of a", func(ev []ystore.Event) bool {
		return hasEvent(ev, ystore.EventRemoved, "a") && rowCount(ev) >= 4
	})
	bob.add("b", "b3")
	ev := evB.waitFor(t, "bob's second update", func(ev []ystore.Event) bool { return rowCount(ev) >= 3 })
	for _, e := range ev {
		if e.Room != "b" {
			t.Errorf("bob's tailer delivered %s of room %s", e.Kind, e.Room)
		}
	}
	for _, e := range evA.snapshot() {
		if e.Room == "b" {
			t.Errorf("alice's tailer delivered %s of room b", e.Kind)
		}
	}
}

// equalMaps compares two string maps.
func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestMigrateAddsRooms runs Migrate on a store made before rooms had owners (no rooms
// table): the table is added, the rows are kept, and they are ownerless: an owner's
// tailer loads none of them, the unfiltered tailer all.
func TestMigrateAddsRooms(t *testing.T) {
	cfg := testConfig(t)
	conn := dial(t, cfg)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `DROP TABLE `+pgx.Identifier{cfg.Schema, cfg.Table + "_rooms"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	insert(t, conn, cfg, "r", []byte("u1"))

	owned, err := New(owns(cfg, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owned.Load(ctx); err == nil {
		t.Fatal("an owner's tailer loaded a store without the rooms table")
	}
	// A tailer started before the migration waits for it.
	waiting, ev := runTailer(t, owns(cfg, "alice"))
	if err := Migrate(ctx, conn, cfg); err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, waiting)
	if got := loaded(t, owned); got != "map[]" {
		t.Errorf("alice loads %s from an ownerless store", got)
	}
	plain, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded(t, plain); got != "map[r:[u1]]" {
		t.Errorf("the unfiltered tailer loads %s", got)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO `+pgx.Identifier{cfg.Schema, cfg.Table + "_rooms"}.Sanitize()+
		` (path, owner) VALUES ('r', 'alice')`); err != nil {
		t.Fatal(err)
	}
	insert(t, conn, cfg, "r", []byte("u2"))
	// A barrier: u3 commits after u2; once it is delivered, any other row of r before
	// it would have been too.
	barrier := insert(t, conn, cfg, "r", []byte("u3"))
	got := ev.waitFor(t, "alice's barrier row", func(ev []ystore.Event) bool { return slices.Contains(rowIDs(ev), barrier) })
	if rowCount(got) != 2 || got[0].Room != "r" || string(got[0].Rows[0].Update) != "u2" {
		// Rows committed before the room got its owner were visible in the tailer's
		// cursor already: ship therefore gives a room its owner with a reset.
		t.Errorf("alice's tailer delivered%s; want the row written after the room became hers, then the barrier row", describe(got))
	}
}
