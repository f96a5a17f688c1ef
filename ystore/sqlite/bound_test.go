package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// manyRoom is the key of room i of writeRooms' rooms.
func manyRoom(i int) string { return fmt.Sprintf("many:%09d", i) }

// writeRooms has the writer store n one-row rooms, manyRoom(first) on, in one
// transaction.
func writeRooms(t testing.TB, w *writer, first, n int) {
	t.Helper()
	w.Do(map[string]any{"op": "rooms", "prefix": "many:", "first": first, "n": n, "update": b64(tokens("x"))})
}

// keys records the rooms a tailer delivers: those it resets and removes, and the rows
// per room, nothing else (its memory is the rooms delivered).
type keys struct {
	mu      sync.Mutex
	reset   map[string]int // resets per room
	removed []string
	rows    map[string]int
}

func newKeys() *keys { return &keys{reset: map[string]int{}, rows: map[string]int{}} }

func (k *keys) deliver(ctx context.Context, events []ystore.Event) error {
	for _, e := range events {
		n := 0
		if err := e.Each(ctx, func(rows []ystore.Row) error { n += len(rows); return nil }); err != nil {
			return err
		}
		k.mu.Lock()
		switch e.Kind {
		case ystore.EventReset:
			k.reset[e.Room]++
		case ystore.EventRemoved:
			k.removed = append(k.removed, e.Room)
		}
		k.rows[e.Room] += n
		k.mu.Unlock()
	}
	return nil
}

// held returns the rooms delivered and not removed since, in order.
func (k *keys) held() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for room := range k.rows {
		if !slices.Contains(k.removed, room) {
			out = append(out, room)
		}
	}
	slices.Sort(out)
	return out
}

func (k *keys) rowsOf(room string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rows[room]
}

// heapAlloc is the heap in use after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A store of many more rooms than Config.MaxRooms (a hub user's own, issue 39, B-F3):
// the tailer reads and follows the first MaxRooms by key and the next one, whatever the
// store holds; its memory does not grow with the rooms past them (unbounded, it held an
// entry per room of the store), their rows are counted skipped, and rooms added while it
// follows that many are not delivered.
func TestBoundManyRooms(t *testing.T) {
	const many, bound = 30_000, 50
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			w := startWriter(t, path)
			writeRooms(t, w, 0, many)
			reg := prometheus.NewRegistry()
			before := heapAlloc()
			tl := newTailer(t, Config{Path: path, PollInterval: 20 * time.Millisecond, DisableFSNotify: true, MaxRooms: bound, StreamLoads: stream, Registerer: reg})
			k := newKeys()
			start := time.Now()
			runTailer(t, tl, k.deliver)
			<-tl.FirstRead()
			took := time.Since(start)
			grown := int64(heapAlloc()) - int64(before)
			var want []string
			for i := range bound + 1 {
				want = append(want, manyRoom(i))
			}
			testenv.Eventually(t, testenv.Wait, "the first rooms delivered", func() bool { return slices.Equal(k.held(), want) },
				func() string { return fmt.Sprintf("%d rooms delivered, want the first %d", len(k.held()), len(want)) })
			if st := tl.Status(); st.Rooms != bound+1 {
				t.Errorf("Status().Rooms = %d, want %d", st.Rooms, bound+1)
			}
			if skipped := testenv.Metric(t, reg, "jupyter_mcp_sidecar_sqlite_rows_skipped_total"); skipped != many-bound-1 {
				t.Errorf("rows skipped %v, want %d", skipped, many-bound-1)
			}
			// Unbounded, the tailer's map alone held ~100 bytes a room: 3 MB here.
			t.Logf("%d rooms, %d followed: read in %v, heap grown %d kB", many, bound+1, took.Round(time.Millisecond), grown>>10)
			if grown > 1<<20 {
				t.Errorf("heap grew %d kB reading %d rooms with %d followed, want under 1 MB", grown>>10, many, bound+1)
			}

			// Rows of rooms followed are delivered, rows of others and new rooms are not.
			w.Do(map[string]any{"op": "write", "room": manyRoom(many - 1), "update": b64(tokens("late"))})
			w.Do(map[string]any{"op": "write", "room": "a-new-room", "update": b64(tokens("new"))})
			w.Do(map[string]any{"op": "write", "room": manyRoom(bound), "update": b64(tokens("y"))})
			testenv.Eventually(t, testenv.Wait, "the followed room's row", func() bool { return k.rowsOf(manyRoom(bound)) == 2 })
			if got := k.held(); !slices.Equal(got, want) {
				t.Errorf("after rows of rooms past the bound, delivered %v", got)
			}
			if skipped := testenv.Metric(t, reg, "jupyter_mcp_sidecar_sqlite_rows_skipped_total"); skipped != many-bound-1+2 {
				t.Errorf("rows skipped %v, want %d", skipped, many-bound-1+2)
			}
		})
	}
}

// The rooms followed under a bound while the store changes: a room removed (its rows
// deleted) frees a place, taken by the next room by key at the re-read that notices it,
// which delivers the removal first and every room followed again (a sink may have
// refused one); a
// room asked for again is delivered whole; a file replaced by one whose rooms are all new
// is followed from its first rooms by key; rooms that appear while fewer are followed are
// taken.
func TestBoundFollowsTheStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	w := startWriter(t, path)
	var ids []int64
	for _, room := range []string{"a", "b", "c", "d", "e"} {
		ids = append(ids, w.Do(map[string]any{"op": "write", "room": room, "update": b64(tokens(room))}).RowID)
	}
	tl := newTailer(t, Config{Path: path, PollInterval: 20 * time.Millisecond, DisableFSNotify: true, MaxRooms: 2})
	k := newKeys()
	runTailer(t, tl, k.deliver)
	held := func(what string, want ...string) {
		t.Helper()
		testenv.Eventually(t, testenv.Wait, what, func() bool { return slices.Equal(k.held(), want) },
			func() string { return fmt.Sprintf("delivered %v, want %v", k.held(), want) })
	}
	held("the first three by key", "a", "b", "c")

	deleteRow(t, path, ids[1]) // b leaves the store: d takes its place
	held("d in b's place", "a", "c", "d")
	// Past the bound, every room followed is delivered again, after b's removal: a sink
	// that refused c (the one past its bound) takes it now.
	if k.reset["a"] != 2 || k.reset["c"] != 2 {
		t.Errorf("a reset %d times, c %d; want twice: a place freed", k.reset["a"], k.reset["c"])
	}

	tl.Reload("c")
	testenv.Eventually(t, testenv.Wait, "c delivered again", func() bool { k.mu.Lock(); defer k.mu.Unlock(); return k.reset["c"] == 2 })

	// Every followed room leaves: the next ones by key are followed.
	for _, i := range []int{0, 2, 3} {
		deleteRow(t, path, ids[i])
	}
	held("e, the last room left", "e")

	// Rooms appear while fewer than the bound's are followed: taken, up to one past it.
	for _, room := range []string{"z", "y", "x"} {
		w.Do(map[string]any{"op": "write", "room": room, "update": b64(tokens(room))})
	}
	held("the rooms that appeared, while there was room", "e", "y", "z")

	// A new file: its first rooms by key.
	w.Do(map[string]any{"op": "rename"})
	writeRooms(t, w, 0, 4)
	held("the new file's first rooms", manyRoom(0), manyRoom(1), manyRoom(2))
}

// A store whose history keeps being rewritten (a hub user cleaning up a room of her own
// in a loop, issue 39): every rewrite asks for a full read, each reading every row's key;
// the reads are spaced (resyncSpacing) so that they take at most a fifth of the time,
// measured by sqlite_resync_seconds_total. Unspaced, the tailer read the store back to
// back.
func TestResyncsSpaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	w := startWriter(t, path)
	writeRooms(t, w, 0, 10_000)
	reg := prometheus.NewRegistry()
	tl := newTailer(t, Config{Path: path, PollInterval: 10 * time.Millisecond, DisableFSNotify: true, MaxRooms: 50, Registerer: reg})
	k := newKeys()
	runTailer(t, tl, k.deliver)
	<-tl.FirstRead()
	spent := func() float64 { return testenv.Metric(t, reg, "jupyter_mcp_sidecar_sqlite_resync_seconds_total") }
	resyncs := func() float64 {
		return testenv.Metric(t, reg, "jupyter_mcp_sidecar_sqlite_resyncs_total", "reason", "history")
	}
	// The start read's seconds are added once it returns, after FirstRead: counted first,
	// so that they are not taken for the attack's.
	testenv.Eventually(t, testenv.Wait, "the start read counted", func() bool { return spent() > 0 })
	// The attack: for 3 s and at least one full read (a slow start read, on a loaded
	// machine, spaces the next one further).
	before, start := spent(), time.Now()
	for i := 0; time.Since(start) < 3*time.Second || resyncs() < 1; i++ {
		if time.Since(start) > testenv.Wait {
			t.Fatalf("%v full reads in %v of rewrites", resyncs(), testenv.Wait)
		}
		w.Do(map[string]any{"op": "cleanup", "room": manyRoom(i % 50), "merged": b64(tokens(fmt.Sprint("x", i)))})
	}
	// The reads under way end, and are counted (the seconds are added as a read returns,
	// right after its delivery); a read still waiting for its turn adds nothing yet.
	last := -1.0
	testenv.Eventually(t, testenv.Wait, "the reads under way counted", func() bool {
		now := spent()
		settled := now == last
		last = now
		return settled
	})
	elapsed, busy := time.Since(start).Seconds(), spent()-before
	t.Logf("%v full reads after rewrites: %.2f s of %.2f s", resyncs(), busy, elapsed)
	if busy > 0.3*elapsed {
		t.Errorf("full reads took %.2f s of %.2f s, want at most about a fifth", busy, elapsed)
	}
}
