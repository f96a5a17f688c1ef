package sqlite

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite/sqlitetest"
)

// damages are writes over a live store outside SQLite's locking, each leaving a file
// that cannot be read as a Y-store.
var damages = []struct {
	name string
	do   func(t *testing.T, path string, good []byte)
}{
	{"truncated", func(t *testing.T, path string, _ []byte) {
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
	}},
	{"garbage over the table pages", func(t *testing.T, path string, good []byte) {
		// Page 1 (the header and the schema) stays; every later page is overwritten.
		sqlitetest.WriteInPlace(t, path, append(good[:4096:4096], bytes.Repeat([]byte{0xa5}, len(good)-4096)...))
	}},
	{"garbage over the header", func(t *testing.T, path string, good []byte) {
		sqlitetest.WriteInPlace(t, path, append(bytes.Repeat([]byte{0x5a}, 100), good[100:]...))
	}},
}

// A store damaged in place is unreachable for as long as it is damaged, the last
// state stays delivered, and a restore in place is noticed without a writer commit.
func TestDamagedInPlace(t *testing.T) {
	for _, mode := range modes {
		for _, d := range damages {
			t.Run(mode.name+"/"+d.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "store.db")
				m := newModel(startWriter(t, path))
				m.write(roomA, "a1")
				m.write(roomB, "b1")
				m.write(roomA, "a2")
				tl, s := tailing(t, mode.cfg(path), m)
				testenv.Eventually(t, testenv.Wait, "reachable status", func() bool { return tl.Status().Reachable })
				good, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				s.mu.Lock()
				delivered := len(s.events)
				s.mu.Unlock()

				// The file's modification time has the kernel clock's tick (a few ms) as
				// its resolution: a write in the tick of the last commit, of the same size
				// and header, cannot be told from no write by stat.
				afterMtimeTick(t, path)
				d.do(t, path, good)
				testenv.Eventually(t, testenv.Wait, "unreachable status", func() bool {
					st := tl.Status()
					return !st.Reachable && st.LastError != ""
				})
				// It stays unreachable: each round writes the same damage again, which
				// wakes the tailer (a file event, or its next poll) to read the file
				// afresh, and waits for that read to fail too.
				for range 3 {
					before := tl.Status().LastErrorAt
					d.do(t, path, good)
					var st ystore.Status
					testenv.Eventually(t, testenv.Wait, "another read of the damaged store", func() bool {
						st = tl.Status()
						return st.Reachable || st.LastErrorAt.After(before)
					})
					if st.Reachable {
						t.Fatalf("damaged store reported reachable: %+v", st)
					}
				}
				if got, want := s.String(), m.docs.String(); got != want {
					t.Fatalf("damaged store changed the delivered state:\n got %s\nwant %s", got, want)
				}

				sqlitetest.WriteInPlace(t, path, good)
				testenv.Eventually(t, testenv.Wait, "reachable status after the restore", func() bool { return tl.Status().Reachable })
				s.mu.Lock()
				extra := s.events[delivered:]
				s.mu.Unlock()
				if len(extra) != 0 {
					t.Fatalf("restoring the same file delivered %v", extra)
				}
				converge(t, s, m)
				m.write(roomB, "b2")
				converge(t, s, m)
			})
		}
	}
}

// afterMtimeTick waits until a file created now gets a later modification time than
// path has: the file system's clock has ticked past path's last write.
func afterMtimeTick(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // not path's directory, whose tailers would be woken
	testenv.Eventually(t, testenv.Wait, "the file clock to tick past the last commit", func() bool {
		f, err := os.CreateTemp(dir, "tick")
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		probe, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return probe.ModTime().After(fi.ModTime())
	})
}
