package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// inotifyInstances counts the inotify instances this process holds.
func inotifyInstances(t testing.TB) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.Contains(target, "inotify") {
			n++
		}
	}
	return n
}

// TestSharedWatcher follows many stores, two of them in one directory, with one Watcher:
// every tailer hears its own store's commits through file events alone (an hour between
// polls), and the process holds one inotify instance for all of them.
func TestSharedWatcher(t *testing.T) {
	const stores = 12
	x := NewWatcher(WatcherConfig{})
	t.Cleanup(func() { _ = x.Close() })
	before := inotifyInstances(t)
	root := t.TempDir()
	models, sinks := make([]*model, stores), make([]*sink, stores)
	for i := range stores {
		dir := filepath.Join(root, fmt.Sprintf("u%02d", min(i, stores-2))) // the last two share a directory
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprintf("store%02d.db", i))
		models[i] = newModel(startWriter(t, path))
		models[i].write(roomA, fmt.Sprintf("s%d-0", i))
		_, sinks[i] = tailing(t, Config{Path: path, PollInterval: time.Hour, Watcher: x}, models[i])
	}
	if n := inotifyInstances(t) - before; n != 1 {
		t.Errorf("%d tailers hold %d inotify instances, want 1", stores, n)
	}
	for round := 1; round <= 3; round++ {
		for i, m := range models {
			m.write(roomA, fmt.Sprintf("s%d-%d", i, round))
		}
		for i := range models {
			converge(t, sinks[i], models[i])
		}
	}
	x.mu.Lock()
	dirs := len(x.dirs)
	x.mu.Unlock()
	if dirs != stores-1 {
		t.Errorf("%d directories watched, want %d", dirs, stores-1)
	}
}

// TestSharedWatcherRelease stops the tailers of a Watcher: their directories are
// unregistered, and a tailer registered later is woken again.
func TestSharedWatcherRelease(t *testing.T) {
	x := NewWatcher(WatcherConfig{})
	t.Cleanup(func() { _ = x.Close() })
	dir := t.TempDir()
	k1 := newWaker(x, filepath.Join(dir, "a.db"))
	k2 := newWaker(x, filepath.Join(dir, "b.db"))
	k1.close()
	x.mu.Lock()
	if d := x.dirs[dir]; d == nil || d.wakers != 1 || !d.watched {
		t.Fatalf("after one of two tailers left: %+v", d)
	}
	x.mu.Unlock()
	k2.close()
	x.mu.Lock()
	if len(x.dirs) != 0 || len(x.byName) != 0 {
		t.Fatalf("after both left: %d directories, %d files registered", len(x.dirs), len(x.byName))
	}
	x.mu.Unlock()
	k3 := newWaker(x, filepath.Join(dir, "c.db"))
	defer k3.close()
	if err := os.WriteFile(filepath.Join(dir, "c.db"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Receive(t, testenv.Wait, "a tailer registered after the others left woken by its store", k3.wake)
	select {
	case <-k1.wake:
		t.Fatal("a tailer that left was woken")
	default:
	}
}

// TestWatcherWakesOnCommits: the store file's events and the journal's removal wake its
// tailer; a journal created or written (a writer inside its transaction) does not.
func TestWatcherWakesOnCommits(t *testing.T) {
	x := NewWatcher(WatcherConfig{})
	path := filepath.Join(t.TempDir(), "y.db")
	k := newWaker(x, path)
	t.Cleanup(k.close)
	for _, tt := range []struct {
		file string
		op   fsnotify.Op
		wake bool
	}{
		{"-journal", fsnotify.Create, false},
		{"-journal", fsnotify.Write, false},
		{"-journal", fsnotify.Chmod, false},
		{"", fsnotify.Write, true},
		{"-journal", fsnotify.Remove, true},
		{"-journal", fsnotify.Rename, true},
		{"-wal", fsnotify.Write, true},
		{"", fsnotify.Create, true},
	} {
		x.event(fsnotify.Event{Name: path + tt.file, Op: tt.op})
		select {
		case <-k.wake:
			if !tt.wake {
				t.Errorf("%s %v woke the tailer", "y.db"+tt.file, tt.op)
			}
		default:
			if tt.wake {
				t.Errorf("%s %v did not wake the tailer", "y.db"+tt.file, tt.op)
			}
		}
	}
}
