package rooms

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite/sqlitetest"
)

// readInto runs a SQLite tailer of cfg into a new Set bounded by bound until the test
// ends, and returns the Set and the tailer once its first read is delivered.
func readInto(t *testing.T, cfg sqlite.Config, bound int) (*Set, *sqlite.Tailer, *boundCount) {
	t.Helper()
	tl, err := sqlite.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := &boundCount{}
	set := New(Config{MaxRooms: bound, Metrics: m})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx, set.Writer(nil).Sink) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("tailer: %v", err)
		}
	})
	<-tl.FirstRead() // closed after the first read, succeeded or failed
	return set, tl, m
}

// A store's reader and its rooms bounded by the same number (hub mode:
// hub.max_rooms_per_user, issue 39, B-F3) choose the same rooms: the rooms a bounded
// reader delivers are those an unbounded reader's Set holds, at a load and while rooms
// appear; its one room past the bound is refused, so that a read of a room not held
// says the store is over its bound. A room leaving the store frees a place, which the
// bounded reader fills with the next room by key.
func TestRoomsBoundAgreesWithItsReader(t *testing.T) {
	updates, _ := loadSession(t, "s0002.json.gz")
	const rooms, bound = 9, 4
	path := filepath.Join(t.TempDir(), "store.db")
	w := sqlitetest.Start(t, path)
	write := func(i int) int64 {
		key, _ := boundRoom(i)
		return w.Do(map[string]any{"op": "write", "room": key, "update": base64.StdEncoding.EncodeToString(updates[0])}).RowID
	}
	ids := map[int]int64{}
	for i := range rooms {
		ids[i] = write(i)
	}
	cfg := sqlite.Config{Path: path, PollInterval: 20 * time.Millisecond, DisableFSNotify: true}
	bounded := cfg
	bounded.MaxRooms = bound
	held, heldTl, m := readInto(t, bounded, bound)
	all, allTl, _ := readInto(t, cfg, bound)
	paths := func(is ...int) []string {
		var out []string
		for _, i := range is {
			_, p := boundRoom(i)
			out = append(out, p)
		}
		return out
	}
	same := func(what string, want []string) {
		t.Helper()
		testenv.Eventually(t, testenv.Wait, what, func() bool { return slices.Equal(held.Paths(), want) && slices.Equal(all.Paths(), want) },
			func() string {
				return fmt.Sprintf("bounded reader's Set %v, unbounded's %v; want %v", held.Paths(), all.Paths(), want)
			})
	}
	same("the first rooms by key", paths(0, 1, 2, 3))
	if byRooms, _ := m.counts(); byRooms != 1 {
		t.Errorf("the bounded reader's Set refused %d rooms, want 1: the one past the bound", byRooms)
	}
	if _, err := held.Served(paths(8)[0]); !errors.Is(err, ErrOverBound) {
		t.Errorf("a read of a room the bounded reader did not read: %v, want ErrOverBound", err)
	}

	write(rooms) // a new room, then rows of a room held
	write(1)
	same("the same rooms after a room appeared", paths(0, 1, 2, 3))
	testenv.Eventually(t, testenv.Wait, "the rows read", func() bool {
		return heldTl.Status().RowsTailed == bound+1+1 && allTl.Status().RowsTailed == rooms+2
	})

	// Room 1 leaves the store: the bounded reader's next room by key takes its place.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key, _ := boundRoom(1)
	if _, err := db.Exec("DELETE FROM yupdates WHERE path = ?", key); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.Wait, "the next room in the place freed", func() bool { return slices.Equal(held.Paths(), paths(0, 2, 3, 4)) },
		func() string { return fmt.Sprintf("bounded reader's Set %v", held.Paths()) })
}
