package rooms

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/ondisk"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

func rowsAt(key string, first int, updates [][]byte, at float64) []ystore.Row {
	rows := rowsOf(key, updates)
	for i := range rows {
		rows[i].ID, rows[i].Timestamp = int64(first+i), at
	}
	return rows
}

// logged returns rooms reading files (nil: none) and telling log, and a sink of events
// of the room key.
func logged(t *testing.T, log *told, files Files, key string) (*Writer, func(ystore.EventKind, []ystore.Row)) {
	r := writer(nil, files, log)
	return r, func(kind ystore.EventKind, rows []ystore.Row) {
		t.Helper()
		if err := r.Sink(t.Context(), []ystore.Event{{Kind: kind, Room: key, Rows: rows}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRoomsServeNewerFile: a file newer than the room's rows and different is served,
// marked, and announced with its diff; an older file, the same file again and rows older
// than the file change nothing; a row after the file makes the store live again without
// a notification when it holds what the file did.
func TestRoomsServeNewerFile(t *testing.T) {
	const key = "json:notebook:work/a.ipynb"
	const p = "work/a.ipynb"
	updates, _ := loadSession(t, "s0001.json.gz")
	full := ynotebook.New()
	for _, u := range updates {
		if _, err := full.Apply(u); err != nil {
			t.Fatal(err)
		}
	}
	body, err := full.Snapshot().JSON()
	if err != nil {
		t.Fatal(err)
	}
	fileSnap, err := ynotebook.Parse(body, ynotebook.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var log told
	r, sink := logged(t, &log, nil, key)
	half := len(updates) / 2
	sink(ystore.EventReset, rowsAt(key, 1, updates[:half], 100))
	live, _ := r.Notebook(p)
	base := log.len()

	// Older than the last row: the store stays live.
	r.ApplyFile(t.Context(), ondisk.File{Path: p, Snapshot: fileSnap, ModTime: at(90)})
	if _, src, _ := r.SourcedNotebook(p); src.File || log.len() != base {
		t.Fatalf("older file served (%v) or announced", src)
	}
	// Newer and different: served from the file, announced with the diff.
	r.ApplyFile(t.Context(), ondisk.File{Path: p, Snapshot: fileSnap, ModTime: at(200)})
	snap, src, err := r.SourcedNotebook(p)
	if err != nil || !src.File || !src.ModTime.Equal(at(200)) || snap != fileSnap {
		t.Fatalf("file not served: %v %v", src, err)
	}
	if log.len() != base+1 || !log.os[base].File || !log.os[base].At.Equal(at(200)) {
		t.Fatalf("file change not announced as the file's: %+v", log.os)
	}
	if want := ynotebook.DiffContent(live, fileSnap); !sameChanges(log.chs[base], want) {
		t.Fatalf("announced %+v, want %+v", log.chs[base], want)
	}
	// The same content again, a row older than the file: nothing.
	r.ApplyFile(t.Context(), ondisk.File{Path: p, Snapshot: fileSnap, ModTime: at(201)})
	sink(ystore.EventUpdates, rowsAt(key, half+1, updates[half:half+1], 150))
	if _, src, _ := r.SourcedNotebook(p); !src.File || log.len() != base+1 {
		t.Fatalf("file no longer served (%v) or re-announced (%d)", src, log.len()-base)
	}
	// The room reopened and loaded the file: the store is live; announced is only what
	// differs from the file, the trust marks the room holds and the file lacks left out
	// (here: nothing).
	sink(ystore.EventUpdates, rowsAt(key, half+2, updates[half+1:], 300))
	n := base + 1
	if ynotebook.Diff(fileSnap, full.Snapshot()).Empty() {
		t.Fatal("the file and the room should differ in their trust marks")
	}
	if rest := ynotebook.DiffContent(fileSnap, full.Snapshot()); !rest.Empty() {
		n++
		if log.len() != n || !sameChanges(log.chs[n-1], rest) || log.os[n-1].File {
			t.Fatalf("announced %+v, want %+v from the store", log.chs[base+1:], rest)
		}
	}
	if _, src, _ := r.SourcedNotebook(p); src.File || log.len() != n {
		t.Fatalf("still from the file (%v) or announced again (%+v)", src, log.chs[base+1:])
	}
	// The server's own save: equal to the document, ignored.
	r.ApplyFile(t.Context(), ondisk.File{Path: p, Snapshot: full.Snapshot(), ModTime: at(400)})
	if _, src, _ := r.SourcedNotebook(p); src.File || log.len() != n {
		t.Fatal("own save served from the file or announced")
	}
	// A later store row while a different file is served: told what changed from the file.
	other := ynotebook.NewSnapshot(ynotebook.Cell{ID: "only", CellType: ynotebook.CellCode})
	r.ApplyFile(t.Context(), ondisk.File{Path: p, Snapshot: other, ModTime: at(500)})
	sink(ystore.EventReset, rowsAt(key, 1, updates, 600))
	if _, src, _ := r.SourcedNotebook(p); src.File || log.len() != n+2 || log.os[n+1].File {
		t.Fatalf("store not live again (%v) or not announced (%d)", src, log.len()-n)
	}
	if want := ynotebook.DiffContent(other, full.Snapshot()); !sameChanges(log.chs[n+1], want) {
		t.Fatalf("announced %+v, want %+v", log.chs[n+1], want)
	}
	// A file of an unknown path is ignored.
	r.ApplyFile(t.Context(), ondisk.File{Path: "nowhere.ipynb", Snapshot: other, ModTime: at(700)})
}

func sameChanges(a, b ynotebook.Changes) bool {
	x, y := ynotebook.Changes{}, ynotebook.Changes{}
	x.Merge(a)
	y.Merge(b)
	return x.Metadata == y.Metadata && len(x.Added) == len(y.Added) && len(x.Removed) == len(y.Removed) &&
		len(x.Moved) == len(y.Moved) && len(x.Cells) == len(y.Cells)
}

// TestRoomsFileGoneOrRoomLeft: a notebook whose file is gone is not served (its
// subscribers hear every cell removed, once) until the file is back; a room that leaves
// the store stays served from its file, until the store has it again or the file is gone
// too; without a file it is forgotten at once.
func TestRoomsFileGoneOrRoomLeft(t *testing.T) {
	const key = "json:notebook:work/a.ipynb"
	const p = "work/a.ipynb"
	updates, _ := loadSession(t, "s0001.json.gz")
	var log told
	root := t.TempDir()
	r, sink := logged(t, &log, ondisk.New(ondisk.Config{Root: root, Logger: slog.New(slog.DiscardHandler)}), key)
	served := func(want bool, file bool) {
		t.Helper()
		_, src, err := r.SourcedNotebook(p)
		if (err == nil) != want || want && src.File != file || slices.Contains(r.Paths(), p) != want {
			t.Fatalf("served: %v (from the file: %v), listed %v; want served %v, from the file %v", err, src.File, r.Paths(), want, file)
		}
	}
	sink(ystore.EventReset, rowsAt(key, 1, updates, 100))
	live, _ := r.Notebook(p)
	body, err := live.JSON()
	if err != nil {
		t.Fatal(err)
	}
	fileSnap, err := ynotebook.Parse(body, ynotebook.Limits{})
	if err != nil {
		t.Fatal(err)
	}

	// Deleted: not served, not listed, still watched; told once.
	base := log.len()
	r.ApplyFile(t.Context(), ondisk.File{Path: p, Gone: true})
	r.ApplyFile(t.Context(), ondisk.File{Path: p, Gone: true})
	served(false, false)
	if _, err := r.Notebook(p); err == nil || !strings.Contains(err.Error(), "its file was deleted") {
		t.Fatalf("read of a notebook whose file is gone: %v, want it said so", err)
	}
	if !slices.Contains(r.WatchPaths(), p) {
		t.Fatal("a notebook whose file is gone is no longer watched")
	}
	if log.len() != base+1 || !sameChanges(log.chs[base], removedAll(live)) || !log.os[base].File {
		t.Fatalf("told %+v; want every cell removed, once, from the file", log.chs[base:])
	}
	// Back: served again, whole.
	r.ApplyFile(t.Context(), ondisk.File{Path: p, Snapshot: fileSnap, ModTime: at(50)})
	served(true, false)
	if log.len() != base+2 || !sameChanges(log.chs[base+1], addedAll(live)) {
		t.Fatalf("told %+v; want every cell added", log.chs[base+1:])
	}

	// The room leaves the store: served from its file, listed; its rows, when the store has
	// it again, start a new document.
	file := filepath.Join(root, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, at(150), at(150)); err != nil {
		t.Fatal(err)
	}
	sink(ystore.EventRemoved, nil)
	served(true, true)
	if d := r.Degraded(); len(d) != 0 {
		t.Fatalf("degraded: %v", d)
	}
	sink(ystore.EventUpdates, rowsAt(key, 1, updates, 200))
	served(true, false)
	if got, _ := r.Notebook(p); !sameNotebook(got, live) {
		t.Fatal("the rows of the new store were not applied to a new document")
	}
	// Left again, then the file is gone: forgotten.
	sink(ystore.EventRemoved, nil)
	base = log.len()
	r.ApplyFile(t.Context(), ondisk.File{Path: p, Gone: true})
	served(false, false)
	if slices.Contains(r.WatchPaths(), p) || log.len() != base+1 || !sameChanges(log.chs[base], removedAll(fileSnap)) {
		t.Fatalf("a detached room whose file is gone: watched %v, told %+v", r.WatchPaths(), log.chs[base:])
	}
	// No file when the room leaves: forgotten at once.
	sink(ystore.EventReset, rowsAt(key, 1, updates, 300))
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	sink(ystore.EventRemoved, nil)
	served(false, false)
	if slices.Contains(r.WatchPaths(), p) {
		t.Fatal("a room without a file still watched after it left the store")
	}
}
