package rooms

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/ondisk"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/yjstest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// counted is a Metrics that counts divergences and gaps and keeps the degraded count.
type counted struct {
	noMetrics
	diverged, gaps, degraded atomic.Int64
}

func (c *counted) Diverged()         { c.diverged.Add(1) }
func (c *counted) Gap()              { c.gaps.Add(1) }
func (c *counted) SetDegraded(n int) { c.degraded.Store(int64(n)) }

// logBuffer is a JSON log written from several goroutines.
type logBuffer struct{ testenv.LockedBuffer }

// lines returns the log lines whose msg starts with prefix, decoded.
func (l *logBuffer) lines(prefix string) []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(l.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(m["msg"].(string), prefix) {
			out = append(out, m)
		}
	}
	return out
}

// oracleRig is a set of rooms with a JSON log, counted metrics and a record of the rooms
// it asked the store for again, fed one room's events.
type oracleRig struct {
	t       *testing.T
	r       *Writer
	told    *told
	log     *logBuffer
	m       *counted
	key     string
	mu      sync.Mutex
	reloads []string
}

func newOracleRig(t *testing.T, key string, files Files, gapAfter time.Duration) *oracleRig {
	g := &oracleRig{t: t, told: &told{}, log: &logBuffer{}, m: &counted{}, key: key}
	g.r = New(Config{
		Logger: slog.New(slog.NewJSONHandler(g.log, nil)), Files: files, Metrics: g.m, GapAfter: gapAfter,
		Reload: func(room string) { g.mu.Lock(); g.reloads = append(g.reloads, room); g.mu.Unlock() },
	}).Writer(g.told)
	return g
}

func (g *oracleRig) sink(kind ystore.EventKind, rows []ystore.Row) {
	g.t.Helper()
	if err := g.r.Sink(g.t.Context(), []ystore.Event{{Kind: kind, Room: g.key, Rows: rows}}); err != nil {
		g.t.Fatal(err)
	}
}

func (g *oracleRig) reloaded() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.reloads)
}

// served checks where the notebook at p is served from, and returns it.
func (g *oracleRig) served(p string, file bool) *ynotebook.Snapshot {
	g.t.Helper()
	snap, src, err := g.r.SourcedNotebook(p)
	if err != nil || src.File != file {
		g.t.Fatalf("served %v (err %v); want from the file: %v", src, err, file)
	}
	return snap
}

// fileOf is the snapshot ondisk reads from a file holding s.
func fileOf(t *testing.T, s *ynotebook.Snapshot) *ynotebook.Snapshot {
	t.Helper()
	body, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	f, err := ynotebook.Parse(body, ynotebook.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The updates no store row holds: a change of the document's content by a client that
// wins over the session's, a state-only row (the server's save), and another content row.
var (
	wrongUpdate   = yjstest.MapSet(1<<40, "meta", "nbformat_minor", 99.0)
	savedUpdate   = yjstest.MapSet(1<<41, "state", "dirty", false)
	unsavedUpdate = yjstest.MapSet(1<<41, "state", "dirty", true)
	contentUpdate = yjstest.MapSet(1<<42, "meta", "nbformat_minor", 7.0)
)

// TestRoomsDivergenceFromSavedFile: a live document made wrong (a test hook applies an
// update no row holds) is found different from the server's saved file once the store
// has a row after the save that changes no content and says saved, whichever of the file
// and that row the sidecar reads first: counted, logged with the first difference, the
// room degraded, and the file served (subscribers told) until a content row comes after
// the file; the room is then asked for again and rebuilt from the store's rows. A content
// row after the save, a row saying unsaved, or a file on disk saved again since (compared
// when the watcher hands it over) declares nothing.
func TestRoomsDivergenceFromSavedFile(t *testing.T) {
	const key = "json:notebook:work/a.ipynb"
	const p = "work/a.ipynb"
	updates, _, saved := savedSession(t)
	for _, tc := range []struct {
		name      string
		fileFirst bool   // the watcher reads the file before the tailer delivers the state row
		between   []byte // a row between the file and the state row (committed after the file)
		state     []byte // the row after the save
		newer     bool   // the file on disk was saved again since it was read
		diverges  bool   // whether a divergence is declared
	}{
		{name: "file read first", fileFirst: true, state: savedUpdate, diverges: true},
		{name: "state row first", state: savedUpdate, diverges: true},
		{name: "content row after the save", fileFirst: true, between: contentUpdate, state: savedUpdate},
		{name: "a row saying unsaved", fileFirst: true, state: unsavedUpdate},
		{name: "saved again since", state: savedUpdate, newer: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var files Files
			if tc.newer {
				// The file on disk is a later save than the one compared: that one is
				// compared when the watcher hands it over, not this one.
				root := t.TempDir()
				abs := filepath.Join(root, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(abs, []byte("{}"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(abs, at(250), at(250)); err != nil {
					t.Fatal(err)
				}
				files = ondisk.New(ondisk.Config{Root: root, Logger: slog.New(slog.DiscardHandler)})
			}
			g := newOracleRig(t, key, files, 0)
			g.sink(ystore.EventReset, rowsAt(key, 1, updates, 100))
			rm := g.r.find(p)
			rm.mu.Lock()
			if _, err := rm.nb.Apply(wrongUpdate); err != nil { // the test hook
				t.Fatal(err)
			}
			wrong := rm.nb.Snapshot()
			rm.mu.Unlock()
			if ynotebook.Equivalent(wrong, saved) {
				t.Fatal("the hook left the document right")
			}
			file := ondisk.File{Path: p, Snapshot: saved, ModTime: at(200)}
			n := len(updates)
			if tc.fileFirst {
				g.r.ApplyFile(t.Context(), file)
			}
			if tc.between != nil {
				n++
				g.sink(ystore.EventUpdates, rowsAt(key, n, [][]byte{tc.between}, 200.5))
			}
			base := g.told.len()
			n++
			g.sink(ystore.EventUpdates, rowsAt(key, n, [][]byte{tc.state}, 201))
			if !tc.fileFirst {
				g.r.ApplyFile(t.Context(), file)
			}
			if !tc.diverges {
				if g.served(p, false); g.m.diverged.Load() != 0 || len(g.r.Degraded()) != 0 {
					t.Fatalf("divergence declared: %d counted, degraded %v", g.m.diverged.Load(), g.r.Degraded())
				}
				return
			}
			if got := g.served(p, true); got != saved {
				t.Fatal("the saved file is not what is served")
			}
			if g.m.diverged.Load() != 1 || g.m.degraded.Load() != 1 || !slices.Equal(g.r.Degraded(), []string{key}) {
				t.Fatalf("divergences %d, degraded %d %v; want 1, 1 [%s]", g.m.diverged.Load(), g.m.degraded.Load(), g.r.Degraded(), key)
			}
			if d := g.r.Degradations(); len(d) != 1 || !d[0].Diverged || d[0].Path != p {
				t.Fatalf("degradations %+v", d)
			}
			logged := g.log.lines("live notebook differs from the server's saved file")
			if len(logged) != 1 || logged[0]["room"] != key || logged[0]["at"] != "/nbformat_minor" || logged[0]["live"] != "99" || logged[0]["saved"] != "5" {
				t.Fatalf("divergence logged as %v; want the room and /nbformat_minor 99 vs 5", logged)
			}
			if tc.fileFirst {
				// Served from the file as soon as it was read (newer than the newest row);
				// the divergence changes nothing more for subscribers.
				if g.told.len() != base {
					t.Fatalf("told %+v after the state row", g.told.chs[base:])
				}
			} else if g.told.len() != base+1 || !g.told.os[base].File || !sameChanges(g.told.chs[base], ynotebook.DiffContent(wrong, saved)) {
				t.Fatalf("told %+v %+v; want the file's difference, from the file", g.told.chs[base:], g.told.os[base:])
			}

			// Rows that change no content keep the file served; a content row after the
			// file asks for the room again, and the file stays served until it comes.
			n++
			g.sink(ystore.EventUpdates, rowsAt(key, n, [][]byte{savedUpdate}, 202))
			if len(g.reloaded()) != 0 {
				t.Fatal("asked for the room again before its content moved on")
			}
			n++
			g.sink(ystore.EventUpdates, rowsAt(key, n, [][]byte{contentUpdate}, 300))
			if got := g.reloaded(); !slices.Equal(got, []string{key}) {
				t.Fatalf("asked for %v again, want [%s]", got, key)
			}
			g.served(p, true)
			// The store delivers the room whole: rebuilt, live, the subscribers told what
			// differs from the file, no longer degraded.
			base = g.told.len()
			rows := rowsAt(key, 1, append(slices.Clone(updates), savedUpdate, contentUpdate), 300)
			g.sink(ystore.EventReset, rows)
			rebuilt := g.served(p, false)
			if at, _, v, _ := ynotebook.FirstDifference(saved, rebuilt); at != "/nbformat_minor" || string(v) != "7" || len(g.r.Degraded()) != 0 || g.m.degraded.Load() != 0 {
				t.Fatalf("rebuilt room: %s = %s, degraded %v; want nbformat_minor 7 from the store, not degraded", at, v, g.r.Degraded())
			}
			if g.told.len() != base+1 || g.told.os[base].File || !sameChanges(g.told.chs[base], ynotebook.DiffContent(saved, rebuilt)) {
				t.Fatalf("told %+v; want the rebuilt document's difference from the file", g.told.chs[base:])
			}
		})
	}
}

// TestRoomsGap: a row removed from the store leaves the later rows of its client
// waiting; once they waited GapAfter the room is degraded with the client and the clocks
// missing, counted, logged and served from its file; when the missing row arrives, the
// store is live again.
func TestRoomsGap(t *testing.T) {
	const key = "json:notebook:work/a.ipynb"
	const p = "work/a.ipynb"
	updates, _ := loadSession(t, "s0001.json.gz")
	full := ynotebook.New()
	if err := full.Load(updates); err != nil {
		t.Fatal(err)
	}
	body, err := full.Snapshot().JSON()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(p)), body, 0o644); err != nil {
		t.Fatal(err)
	}
	files := ondisk.New(ondisk.Config{Root: root, Logger: slog.New(slog.DiscardHandler)})
	// The row removed: the first whose absence leaves the document lacking updates and
	// showing less than the file, and whose late arrival makes it whole. (Structs that
	// waited for a row can stay pending after it arrives, as in pycrdt, until their
	// client's next update: yrs retries them only then.)
	lost := -1
	for i := 1; i < len(updates)-1 && lost < 0; i++ {
		nb := ynotebook.New()
		_ = nb.Load(slices.Concat(updates[:i], updates[i+1:]))
		if !nb.Doc().HasPending() || sameNotebook(nb.Snapshot(), full.Snapshot()) {
			continue
		}
		if _ = nb.Load(updates[i : i+1]); !nb.Doc().HasPending() && sameNotebook(nb.Snapshot(), full.Snapshot()) {
			lost = i
		}
	}
	if lost < 0 {
		t.Fatal("no row of the session leaves another waiting")
	}
	synctest.Test(t, func(t *testing.T) {
		const gapAfter = 3 * time.Second
		g := newOracleRig(t, key, files, gapAfter)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- g.r.Run(ctx) }()
		defer func() { cancel(); <-done }()

		g.sink(ystore.EventReset, rowsAt(key, 1, updates[:lost], 100))
		g.sink(ystore.EventUpdates, rowsAt(key, lost+2, updates[lost+1:], 101))
		live := g.served(p, false)
		time.Sleep(gapAfter - time.Millisecond) // a stimulus: the updates wait, not yet long enough
		synctest.Wait()
		if g.m.gaps.Load() != 0 || len(g.r.Degraded()) != 0 {
			t.Fatalf("a gap declared before gap_after: %d, %v", g.m.gaps.Load(), g.r.Degraded())
		}
		base := g.told.len()
		time.Sleep(gapAfter) // a stimulus: past gap_after, and the checker's next tick
		synctest.Wait()
		// What the document waits for: the clocks of the lost row's clients from their
		// state in the rows the room has.
		without := ynotebook.New()
		_ = without.Load(slices.Concat(updates[:lost], updates[lost+1:]))
		want := gapsOf(without.Doc().Gaps())
		d := g.r.Degradations()
		if g.m.gaps.Load() != 1 || g.m.degraded.Load() != 1 || len(d) != 1 || len(want) == 0 || !slices.Equal(d[0].Gaps, want) {
			t.Fatalf("gaps counted %d, degraded %d, degradations %+v; want one room missing %v", g.m.gaps.Load(), g.m.degraded.Load(), d, want)
		}
		sv := without.Doc().StateVector()
		for _, gap := range want {
			if gap.From != sv[gap.Client] || gap.To <= gap.From {
				t.Fatalf("gap %v: the client's state is %d", gap, sv[gap.Client])
			}
		}
		logged := g.log.lines("updates missing from the store")
		if len(logged) != 1 || logged[0]["room"] != key || logged[0]["gaps"] != fmt.Sprint(want) {
			t.Fatalf("gap logged as %v; want the room and %v", logged, want)
		}
		if got := g.served(p, true); !ynotebook.Equivalent(got, full.Snapshot()) {
			t.Fatal("the file is not what is served")
		}
		if g.told.len() != base+1 || !g.told.os[base].File || !sameChanges(g.told.chs[base], ynotebook.DiffContent(live, full.Snapshot())) {
			t.Fatalf("told %+v; want the file's difference, from the file", g.told.chs[base:])
		}
		// The lost row arrives: whole again, live, no longer degraded.
		g.sink(ystore.EventUpdates, rowsAt(key, lost+1, updates[lost:lost+1], 102))
		if got := g.served(p, false); !sameNotebook(got, full.Snapshot()) || len(g.r.Degraded()) != 0 || g.m.degraded.Load() != 0 {
			t.Fatalf("after the missing row: degraded %v", g.r.Degraded())
		}
		if g.told.len() != base+1 {
			t.Fatalf("told %+v; want nothing: the file held what the store now does", g.told.chs[base+1:])
		}
	})
}

// TestRoomsGapsListed: a writer can leave the updates of any number of clients missing
// (each client's one row past a gap in its clocks); the room lists the first 16 clients'
// gaps and counts them all, in /readyz's degradations and in its log line, so that
// neither grows with the clients.
func TestRoomsGapsListed(t *testing.T) {
	const key, clients = "json:notebook:work/a.ipynb", 40
	var updates [][]byte
	for c := range uint64(clients) {
		updates = append(updates, yjstest.MapSetAt(100+c, 5, "state", "k", "v"))
	}
	synctest.Test(t, func(t *testing.T) {
		const gapAfter = 3 * time.Second
		g := newOracleRig(t, key, nil, gapAfter)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- g.r.Run(ctx) }()
		defer func() { cancel(); <-done }()

		g.sink(ystore.EventReset, rowsAt(key, 1, updates, 100))
		time.Sleep(2 * gapAfter) // a stimulus: past gap_after, and the checker's next tick
		synctest.Wait()
		d := g.r.Degradations()
		if len(d) != 1 || len(d[0].Gaps) != gapsListed || d[0].GapClients != clients || d[0].Gaps[0].Client != 100 {
			t.Fatalf("degradations %+v; want the first %d of %d clients' gaps", d, gapsListed, clients)
		}
		logged := g.log.lines("updates missing from the store")
		if len(logged) != 1 || logged[0]["clients"] != float64(clients) || len(fmt.Sprint(logged[0]["gaps"])) > 1000 {
			t.Fatalf("gap logged as %v", logged)
		}
	})
}

// TestRoomsFailedDocumentServesSavedFile: a room whose document failed (a row it refuses,
// here an item whose parent is a string: every later row is refused too; a history past
// the engine's work bound the same) stops following the store, while the Jupyter server
// goes on and saves what it holds: that save is served, and each newer one, the room
// degraded (red team pass 19, F1: lines prepended offline by many writers).
func TestRoomsFailedDocumentServesSavedFile(t *testing.T) {
	const key = "json:notebook:work/a.ipynb"
	const p = "work/a.ipynb"
	updates, full, saved := savedSession(t)
	half := len(updates) / 2
	g := newOracleRig(t, key, nil, 0)
	g.sink(ystore.EventReset, rowsAt(key, 1, updates[:half], 100))
	bad := []byte{2, 1, 1, 0, 4, 1, 1, 'r', 1, 'x', 1, 2, 0, 4, 0, 1, 0, 1, 'y', 0} // yjs.TestParentNotAType's
	g.sink(ystore.EventUpdates, rowsAt(key, half+1, [][]byte{bad}, 150))
	g.sink(ystore.EventUpdates, rowsAt(key, half+2, updates[half:], 160))
	if got := g.served(p, false); ynotebook.Equivalent(got, saved) {
		t.Fatal("the failed document holds the whole session")
	}
	g.r.ApplyFile(t.Context(), ondisk.File{Path: p, Snapshot: saved, ModTime: at(200)})
	g.sink(ystore.EventUpdates, rowsAt(key, len(updates)+2, [][]byte{savedUpdate}, 201))
	if got := g.served(p, true); got != saved {
		t.Fatal("the saved file is not what is served")
	}
	if d := g.r.Degradations(); len(d) != 1 || !strings.Contains(d[0].Failed, "parent") {
		t.Fatalf("degradations %+v, want the room's with its document's failure", d)
	}
	// A save with an older mtime (cp -p, rsync -t, a restore) is what the disk holds
	// now: the watcher hands files over in the order it reads them (red team of issue
	// 42, pass 19b, N4: it was ignored, and the content the disk no longer held stayed).
	first := ynotebook.New()
	if err := first.Load(updates[:half/2]); err != nil {
		t.Fatal(err)
	}
	restored := fileOf(t, first.Snapshot())
	g.r.ApplyFile(t.Context(), ondisk.File{Path: p, Snapshot: restored, ModTime: at(20)})
	if got := g.served(p, true); got != restored {
		t.Fatal("the restored file with an older mtime is not what is served")
	}

	// Saved before the document failed, and not since: the file on disk is read once
	// the failure is seen (Writer.Run's round).
	root := t.TempDir()
	abs := filepath.Join(root, filepath.FromSlash(p))
	body, err := full.Snapshot().JSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(abs, body, 0o644); err != nil {
		t.Fatal(err)
	}
	g = newOracleRig(t, key, ondisk.New(ondisk.Config{Root: root, Logger: slog.New(slog.DiscardHandler)}), 0)
	g.sink(ystore.EventReset, rowsAt(key, 1, updates[:half], 100))
	g.sink(ystore.EventUpdates, rowsAt(key, half+1, [][]byte{bad}, 150))
	g.sink(ystore.EventUpdates, rowsAt(key, half+2, updates[half:], 160))
	g.r.Sweep(time.Now())
	if got := g.served(p, true); !ynotebook.Equivalent(got, saved) {
		t.Fatal("the file on disk is not what is served")
	}
	if !strings.Contains(g.log.String(), "no longer follows the store") {
		t.Fatalf("the failure is not logged:\n%s", g.log.String())
	}
}

// savedSession returns session s0001's updates, its whole notebook and that notebook as
// the server's save of it reads.
func savedSession(t *testing.T) ([][]byte, *ynotebook.Notebook, *ynotebook.Snapshot) {
	t.Helper()
	updates, _ := loadSession(t, "s0001.json.gz")
	full := ynotebook.New()
	if err := full.Load(updates); err != nil {
		t.Fatal(err)
	}
	return updates, full, fileOf(t, full.Snapshot())
}

// at is the time sec seconds after the epoch, as rows are stamped.
func at(sec float64) time.Time { return time.UnixMicro(int64(sec * 1e6)) }
