package sidecar

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/ondisk"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// originLog records every change with its origin.
type originLog struct {
	mu  sync.Mutex
	chs []ynotebook.Changes
	os  []Origin
}

func (l *originLog) add(_ string, ch ynotebook.Changes, o Origin) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.chs, l.os = append(l.chs, ch), append(l.os, o)
}

func (l *originLog) len() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.chs) }

func rowsAt(key string, first int, updates [][]byte, at float64) []ystore.Row {
	rows := rowsOf(key, updates)
	for i := range rows {
		rows[i].ID, rows[i].Timestamp = int64(first+i), at
	}
	return rows
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
	var log originLog
	r := NewRooms(slog.New(slog.DiscardHandler), nil, NewMetrics(prometheus.NewRegistry(), nil), Notify{Changed: log.add})
	sink := func(kind ystore.EventKind, rows []ystore.Row) {
		t.Helper()
		if err := r.Sink(t.Context(), []ystore.Event{{Kind: kind, Room: key, Rows: rows}}); err != nil {
			t.Fatal(err)
		}
	}
	half := len(updates) / 2
	sink(ystore.EventReset, rowsAt(key, 1, updates[:half], 100))
	live, _ := r.Notebook(p)
	base := log.len()
	at := func(sec float64) time.Time { return time.UnixMicro(int64(sec * 1e6)) }

	// Older than the last row: the store stays live.
	r.ApplyFile(ondisk.File{Path: p, Snapshot: fileSnap, ModTime: at(90)})
	if _, src, _ := r.SourcedNotebook(p); src.File || log.len() != base {
		t.Fatalf("older file served (%v) or announced", src)
	}
	// Newer and different: served from the file, announced with the diff.
	r.ApplyFile(ondisk.File{Path: p, Snapshot: fileSnap, ModTime: at(200)})
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
	r.ApplyFile(ondisk.File{Path: p, Snapshot: fileSnap, ModTime: at(201)})
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
	r.ApplyFile(ondisk.File{Path: p, Snapshot: full.Snapshot(), ModTime: at(400)})
	if _, src, _ := r.SourcedNotebook(p); src.File || log.len() != n {
		t.Fatal("own save served from the file or announced")
	}
	// A later store row while a different file is served: told what changed from the file.
	other := ynotebook.NewSnapshot(ynotebook.Cell{ID: "only", CellType: ynotebook.CellCode})
	r.ApplyFile(ondisk.File{Path: p, Snapshot: other, ModTime: at(500)})
	sink(ystore.EventReset, rowsAt(key, 1, updates, 600))
	if _, src, _ := r.SourcedNotebook(p); src.File || log.len() != n+2 || log.os[n+1].File {
		t.Fatalf("store not live again (%v) or not announced (%d)", src, log.len()-n)
	}
	if want := ynotebook.DiffContent(other, full.Snapshot()); !sameChanges(log.chs[n+1], want) {
		t.Fatalf("announced %+v, want %+v", log.chs[n+1], want)
	}
	// A file of an unknown path is ignored.
	r.ApplyFile(ondisk.File{Path: "nowhere.ipynb", Snapshot: other, ModTime: at(700)})
}

func sameChanges(a, b ynotebook.Changes) bool {
	x, y := ynotebook.Changes{}, ynotebook.Changes{}
	x.Merge(a)
	y.Merge(b)
	return x.Metadata == y.Metadata && len(x.Added) == len(y.Added) && len(x.Removed) == len(y.Removed) &&
		len(x.Moved) == len(y.Moved) && len(x.Cells) == len(y.Cells)
}
