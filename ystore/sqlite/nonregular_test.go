package sqlite

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// nonRegular are the things other than a regular file that can be at a store path, each
// made at path and removed by its remove.
var nonRegular = []struct {
	kind string // as the reason names it
	make func(t *testing.T, path string) (remove func())
}{
	{"a named pipe (FIFO)", func(t *testing.T, path string) func() {
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
		return func() { removeAll(t, path) }
	}},
	{"a directory", func(t *testing.T, path string) func() {
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		return func() { removeAll(t, path) }
	}},
	{"a socket", func(t *testing.T, path string) func() {
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return func() { l.Close(); removeAll(t, path) }
	}},
}

func removeAll(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

// stopped waits for a Run to return, failing the test if it has not within 5 s: a
// tailer blocked in a system call would never return.
func stopped(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still running 5 s after its context was cancelled: the tailer is blocked")
	}
}

// A store path naming something other than a regular file (a named pipe, which blocks
// whoever opens it, a directory, a socket) is never opened: the store is unreachable
// with the reason, Load says why, the tailer stops when told to; and a store file put
// at the path in its place is read whole and then tailed.
func TestNonRegularStorePath(t *testing.T) {
	for _, k := range nonRegular {
		for _, mode := range modes {
			t.Run(k.kind+"/"+mode.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "store.db")
				remove := k.make(t, path)
				tl := newTailer(t, mode.cfg(path))
				unreachable := func() bool {
					st := tl.Status()
					return !st.Reachable && strings.Contains(st.LastError, "not a regular file") &&
						strings.Contains(st.LastError, k.kind) && !st.LastErrorAt.IsZero()
				}

				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- tl.Run(ctx, newSink().deliver) }()
				testenv.Eventually(t, testenv.Wait, "unreachable with the reason", unreachable)
				cancel()
				stopped(t, done)
				if _, err := tl.Load(context.Background()); !errors.Is(err, ErrNotRegular) {
					t.Fatalf("Load = %v, want ErrNotRegular", err)
				}

				s := newSink()
				runTailer(t, tl, s.deliver)
				testenv.Eventually(t, testenv.Wait, "unreachable with the reason", unreachable)
				// The store is made aside and renamed into place whole: a store read while
				// it is being created is another test's matter.
				m := newModel(startWriter(t, path+".new"))
				m.write(roomA, "a1")
				remove()
				if err := os.Rename(path+".new", path); err != nil {
					t.Fatal(err)
				}
				converge(t, s, m)
				// SQLite refuses to write to a file renamed since it was opened.
				m = &model{w: startWriter(t, path), docs: m.docs}
				m.write(roomA, "a2")
				m.write(roomB, "b1")
				converge(t, s, m)
				if n := s.kinds("")[ystore.EventUpdates]; n == 0 {
					t.Fatalf("events %v: want the rows after the load tailed as updates", s.kinds(""))
				}
				testenv.Eventually(t, testenv.Wait, "reachable", func() bool {
					st := tl.Status()
					return st.Reachable && st.LastError == ""
				})
			})
		}
	}
}

// A named pipe put at a served store's path makes it unreachable with the reason, the
// last state stays served, and the store file put back is read again.
func TestStoreReplacedByFIFO(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "store.db")
	aside := filepath.Join(dir, "aside.db")
	m := newModel(startWriter(t, path))
	m.write(roomA, "a1")
	tl, s := tailing(t, modes[0].cfg(path), m)
	if err := os.Rename(path, aside); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.Wait, "unreachable with the reason", func() bool {
		st := tl.Status()
		return !st.Reachable && strings.Contains(st.LastError, "a named pipe (FIFO)")
	})
	converge(t, s, m) // still served
	if err := os.Rename(aside, path); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.Wait, "reachable", func() bool { return tl.Status().Reachable })
	converge(t, s, m)
}

// A named pipe at the journal's path, which SQLite opens to check for a hot journal,
// does not block the tailer either.
func TestFIFOAtTheJournalPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	m := newModel(startWriter(t, path))
	m.write(roomA, "a1")
	cfg := modes[2].cfg(path) // polling: every poll reads the store
	tl, s := newTailer(t, cfg), newSink()
	if err := syscall.Mkfifo(path+"-journal", 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx, s.deliver) }()
	testenv.Eventually(t, testenv.Wait, "a read, failed or not", func() bool {
		st := tl.Status()
		return !st.LastReadAt.IsZero() || !st.LastErrorAt.IsZero()
	})
	cancel()
	stopped(t, done)
	removeAll(t, path+"-journal")
	runTailer(t, tl, s.deliver)
	converge(t, s, m)
}
