package fileid

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/testutil"
)

func TestAPIPath(t *testing.T) {
	tests := []struct {
		stored, root, want string
		ok                 bool
	}{
		{"/home/u/work/a.ipynb", "/home/u/work", "a.ipynb", true},
		{"/home/u/work/sub/b c.ipynb", "/home/u/work/", "sub/b c.ipynb", true},
		{"/home/u/work", "/home/u/work", "", true},
		{"/home/u/workshop/a.ipynb", "/home/u/work", "", false},
		{"/elsewhere/a.ipynb", "/home/u/work", "", false},
		{"/a.ipynb", "/", "a.ipynb", true},
		{"relative/a.ipynb", "/home/u", "", false},
	}
	for _, tt := range tests {
		got, ok := apiPath(tt.stored, tt.root)
		if got != tt.want || ok != tt.ok {
			t.Errorf("apiPath(%q, %q) = %q, %v; want %q, %v", tt.stored, tt.root, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzAPIPath(f *testing.F) {
	f.Add("/home/u/work/a.ipynb", "/home/u/work")
	f.Add("/a", "/")
	f.Fuzz(func(t *testing.T, stored, root string) {
		got, ok := apiPath(stored, root)
		if !ok {
			return
		}
		if strings.HasPrefix(got, "/") {
			t.Fatalf("apiPath(%q, %q) = %q: absolute", stored, root, got)
		}
		if !strings.HasSuffix(stored, got) {
			t.Fatalf("apiPath(%q, %q) = %q: not a suffix", stored, root, got)
		}
	})
}

// managerScript creates and edits a file_id_manager.db the way jupyter_server_fileid
// does (WAL journal, its Files table), keeping its connection open like a running server.
const managerScript = `
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("PRAGMA journal_mode = WAL")
if sys.argv[2] == "local":
    con.execute("CREATE TABLE IF NOT EXISTS Files(id TEXT PRIMARY KEY NOT NULL, path TEXT NOT NULL, "
                "ino INTEGER NOT NULL UNIQUE, crtime INTEGER, mtime INTEGER NOT NULL, is_dir TINYINT NOT NULL)")
else:
    con.execute("CREATE TABLE IF NOT EXISTS Files(id TEXT PRIMARY KEY NOT NULL, path TEXT NOT NULL UNIQUE)")
con.execute("CREATE INDEX IF NOT EXISTS ix_Files_path ON Files (path)")
con.commit()
print("ready", flush=True)
ino = 1
for line in sys.stdin:
    op, id, path = line.rstrip("\n").split("\t")
    if op == "add" and sys.argv[2] == "local":
        con.execute("INSERT INTO Files (id, path, ino, crtime, mtime, is_dir) VALUES (?, ?, ?, NULL, 1, 0)", (id, path, ino))
        ino += 1
    elif op == "add":
        con.execute("INSERT INTO Files (id, path) VALUES (?, ?)", (id, path))
    elif op == "move":
        con.execute("UPDATE Files SET path = ? WHERE id = ?", (path, id))
    con.commit()
    print("ok", flush=True)
`

func startManager(t *testing.T, db, kind string) (edit func(op, id, path string), stop func()) {
	t.Helper()
	cmd := exec.Command("python3", "-c", managerScript, db, kind)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			in.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("manager: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	lines := bufio.NewReader(out)
	wait := func() {
		if line, err := lines.ReadString('\n'); err != nil {
			t.Fatalf("manager: %q, %v", line, err)
		}
	}
	wait()
	return func(op, id, path string) {
		if _, err := in.Write([]byte(op + "\t" + id + "\t" + path + "\n")); err != nil {
			t.Fatal(err)
		}
		wait()
	}, stop
}

const id1 = "0f3c3a4e-6c0f-4a8e-9f3e-2b7d3c1a9e11"

func TestDB(t *testing.T) {
	for _, kind := range []string{"arbitrary", "local"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			dbPath := filepath.Join(dir, "file_id_manager.db")
			root := "/srv/jupyter/work"
			r, err := NewDB(DBConfig{Path: dbPath, RootDir: root})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx := context.Background()
			if _, err := r.Path(ctx, id1); !errors.Is(err, ErrNotFound) {
				t.Fatalf("before the database exists: %v, want ErrNotFound", err)
			}
			edit, _ := startManager(t, dbPath, kind)
			edit("add", id1, root+"/notebooks/a.ipynb")
			edit("add", "other", "/elsewhere/b.ipynb")
			if p, err := r.Path(ctx, id1); err != nil || p != "notebooks/a.ipynb" {
				t.Fatalf("Path = %q, %v", p, err)
			}
			edit("move", id1, root+"/renamed.ipynb")
			if p, err := r.Path(ctx, id1); err != nil || p != "renamed.ipynb" {
				t.Fatalf("after rename: Path = %q, %v", p, err)
			}
			for _, id := range []string{"other", "missing"} {
				if _, err := r.Path(ctx, id); !errors.Is(err, ErrNotFound) {
					t.Errorf("Path(%s): %v, want ErrNotFound", id, err)
				}
			}
		})
	}
}

func TestDBAfterServerStopped(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "file_id_manager.db")
	edit, stop := startManager(t, dbPath, "arbitrary")
	edit("add", id1, "/r/a.ipynb")
	stop()
	if _, err := os.Stat(dbPath + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stopped server left its WAL: %v", err)
	}
	r, err := NewDB(DBConfig{Path: dbPath, RootDir: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if p, err := r.Path(context.Background(), id1); err != nil || p != "a.ipynb" {
		t.Fatalf("Path = %q, %v", p, err)
	}
}

func TestREST(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "token s3cret" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		switch req.URL.Path {
		case "/base/api/fileid/path/" + id1:
			w.Write([]byte("notebooks/a.ipynb"))
		default:
			http.Error(w, "no path", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	good, err := NewREST(RESTConfig{BaseURL: srv.URL + "/base/", Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := good.Path(ctx, id1); err != nil || p != "notebooks/a.ipynb" {
		t.Fatalf("Path = %q, %v", p, err)
	}
	if _, err := good.Path(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v, want ErrNotFound", err)
	}
	bad, err := NewREST(RESTConfig{BaseURL: srv.URL + "/base", Token: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Path(ctx, id1); !errors.Is(err, ErrStatus) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("bad token: %v, want ErrStatus without the token", err)
	}
	if _, err := NewREST(RESTConfig{BaseURL: "not a url"}); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad url: %v", err)
	}

	chain := Chain{bad, good}
	if p, err := chain.Path(ctx, id1); err != nil || p != "notebooks/a.ipynb" {
		t.Fatalf("chain: %q, %v", p, err)
	}
	if _, err := chain.Path(ctx, "missing"); !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrStatus) {
		t.Fatalf("chain missing: %v, want ErrNotFound and ErrStatus", err)
	}
	if _, err := (Chain{}).Path(ctx, id1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty chain: %v", err)
	}
}

func TestDefaultDBPath(t *testing.T) {
	t.Setenv("JUPYTER_DATA_DIR", "/data/jupyter")
	if got := DefaultDBPath(); got != "/data/jupyter/file_id_manager.db" {
		t.Fatalf("with JUPYTER_DATA_DIR: %s", got)
	}
	t.Setenv("JUPYTER_DATA_DIR", "")
	t.Setenv("XDG_DATA_HOME", "/xdg")
	if got := DefaultDBPath(); got != "/xdg/jupyter/file_id_manager.db" {
		t.Fatalf("with XDG_DATA_HOME: %s", got)
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := DefaultDBPath(); got != "/home/u/.local/share/jupyter/file_id_manager.db" {
		t.Fatalf("default: %s", got)
	}
	if _, err := NewDB(DBConfig{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewDB without root: %v", err)
	}
}

// TestDBQuietDatabase checks that lookups of a database that has not changed are answered
// without a connection, which the constructor's resolver closes after dbIdle, and that a
// change is seen at once.
func TestDBQuietDatabase(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "file_id_manager.db")
	edit, _ := startManager(t, dbPath, "arbitrary")
	edit("add", id1, "/r/a.ipynb")
	r, err := NewDB(DBConfig{Path: dbPath, RootDir: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	lookup := func(want string) {
		t.Helper()
		if p, err := r.Path(ctx, id1); err != nil || p != want {
			t.Fatalf("Path = %q, %v; want %q", p, err, want)
		}
		if _, err := r.Path(ctx, "missing"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Path(missing): %v, want ErrNotFound", err)
		}
	}
	open := func() int { return r.db.Stats().OpenConnections }

	lookup("a.ipynb") // the files just changed: asked, not remembered
	// The files settle once their last change is racyWindow old.
	testutil.Eventually(t, testutil.Wait, "the files to settle", func() bool { _, settled := r.stampFiles(); return settled })
	lookup("a.ipynb") // settled: asked once more, remembered
	returned := time.Now()
	testutil.Eventually(t, dbIdle+testutil.Wait, "the idle connections to close", func() bool { return r.db.Stats().MaxIdleTimeClosed > 0 && open() == 0 },
		func() string {
			return fmt.Sprintf("%d connections still open %v after the last lookup (idle time %v): %+v", open(), time.Since(returned), dbIdle, r.db.Stats())
		})
	if waited := time.Since(returned); waited < dbIdle-time.Second {
		t.Fatalf("the idle connection closed after %v, well before dbIdle (%v)", waited, dbIdle)
	}
	for range 3 {
		lookup("a.ipynb")
		if n := open(); n != 0 {
			t.Fatalf("a lookup of an unchanged database opened %d connections", n)
		}
	}
	edit("move", id1, "/r/b.ipynb")
	lookup("b.ipynb")
	if n := open(); n != 1 {
		t.Fatalf("a lookup after a change used %d connections, want 1", n)
	}
}
