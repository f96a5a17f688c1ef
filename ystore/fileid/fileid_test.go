package fileid

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
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
		// climbing out of the root is refused, not read as a path inside it (red team
		// of issue 42, pass 20, R4)
		{"/home/u/work/../secret/x.ipynb", "/home/u/work", "", false},
		{"/home/u/work/..", "/home/u/work", "", false},
		{"/home/u/work/a/../../b.ipynb", "/home/u/work", "", false},
		{"/home/u/work/a/../b.ipynb", "/home/u/work", "b.ipynb", true},
		{"/home/u/work/./a//b.ipynb", "/home/u/work", "a/b.ipynb", true},
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
		if got != "" && (path.Clean(got) != got || got == ".." || strings.HasPrefix(got, "../")) {
			t.Fatalf("apiPath(%q, %q) = %q: not a clean path inside the root", stored, root, got)
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
	c := testenv.StartChild(t, exec.Command("python3", "-c", managerScript, db, kind), testenv.CleanExit)
	stop = func() { _ = c.Stop() } // its clean exit is checked when the test ends
	lines := bufio.NewReader(c.Out)
	wait := func() {
		if line, err := lines.ReadString('\n'); err != nil {
			t.Fatalf("manager: %q, %v", line, err)
		}
	}
	wait()
	return func(op, id, path string) {
		if _, err := c.In.Write([]byte(op + "\t" + id + "\t" + path + "\n")); err != nil {
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

// The answers of a real jupyter_server 2.21 with jupyter_server_fileid 0.10 (the pinned
// stack, testdata/jupyter/requirements.txt), copied from curl: FilePathHandler's 200 and
// 404, the 400 without an id, the 403 of a wrong token, and Tornado's HTML 404 for a
// route that does not exist (the /api/fileid/path/<id> route removed in fileid 0.6).
const (
	realPathOK      = `{"id": "6df62b4e-e578-4a2f-b302-7200e73c8190", "path": "sub/b c.ipynb"}`
	realPathUnknown = `{"message": "The path for file, %s, could not be found.", "reason": "The path for file, %s, could not be found."}`
	realNoID        = `{"message": "'id' parameter was not provided in the request.", "reason": null}`
	realForbidden   = `{"message": "Forbidden", "reason": null}`
	realNoRoute     = "<!DOCTYPE HTML>\n<html>\n<head>\n    <meta charset=\"utf-8\">\n    <title>Jupyter Server</title>\n</head>\n<body>\n<div class=\"error\">\n    <h1>404 : Not Found</h1>\n<p>You are requesting a page that does not exist!</p>\n</div>\n</body>\n</html>"
	realID          = "6df62b4e-e578-4a2f-b302-7200e73c8190"
)

// fakeJupyter answers like the real server under base: only GET /api/fileid/path?id=,
// with token s3cret, knowing realID and rootID (the root directory itself, ".").
func fakeJupyter(t *testing.T, base string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		api := func(status int, body string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
		if req.URL.Path != base+"/api/fileid/path" {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, realNoRoute)
			return
		}
		if req.Header.Get("Authorization") != "token s3cret" {
			api(http.StatusForbidden, realForbidden)
			return
		}
		id, ok := req.URL.Query()["id"]
		switch {
		case !ok:
			api(http.StatusBadRequest, realNoID)
		case id[0] == realID:
			api(http.StatusOK, realPathOK)
		case id[0] == rootID:
			api(http.StatusOK, `{"id": "`+rootID+`", "path": "."}`)
		default:
			b, _ := json.Marshal(id[0])
			msg := string(b[1 : len(b)-1])
			api(http.StatusNotFound, fmt.Sprintf(realPathUnknown, msg, msg))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

const rootID = "0b9016bc-ff03-4917-a299-ddaf6dcc62c1"

func TestREST(t *testing.T) {
	srv := fakeJupyter(t, "/base")
	ctx := context.Background()
	good, err := NewREST(RESTConfig{BaseURL: srv.URL + "/base/", Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, id, want string
		err            error
	}{
		{"known", realID, "sub/b c.ipynb", nil},
		{"root", rootID, "", nil},
		{"unknown", "x", "", ErrNotFound},
		{"query characters", "a/b?c&d=e#f", "", ErrNotFound},
		{"empty", "", "", ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := good.Path(ctx, tt.id)
			if p != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("Path(%q) = %q, %v; want %q, %v", tt.id, p, err, tt.want, tt.err)
			}
		})
	}

	bad, err := NewREST(RESTConfig{BaseURL: srv.URL + "/base", Token: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Path(ctx, realID); !errors.Is(err, ErrStatus) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("bad token: %v, want ErrStatus without the token", err)
	}
	noRoute, err := NewREST(RESTConfig{BaseURL: srv.URL + "/elsewhere", Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noRoute.Path(ctx, realID); !errors.Is(err, ErrStatus) || errors.Is(err, ErrNotFound) {
		t.Fatalf("no route: %v, want ErrStatus, not ErrNotFound", err)
	}
	if _, err := NewREST(RESTConfig{BaseURL: "not a url"}); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad url: %v", err)
	}

	chain := Chain{bad, good}
	if p, err := chain.Path(ctx, realID); err != nil || p != "sub/b c.ipynb" {
		t.Fatalf("chain: %q, %v", p, err)
	}
	if _, err := chain.Path(ctx, "missing"); !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrStatus) {
		t.Fatalf("chain missing: %v, want ErrNotFound and ErrStatus", err)
	}
	if _, err := (Chain{}).Path(ctx, realID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty chain: %v", err)
	}
}

// TestRESTBoundedAnswer checks that an answer is read to at most MaxRESTAnswer+1 bytes
// and refused when larger, whatever the server goes on sending.
func TestRESTBoundedAnswer(t *testing.T) {
	sent := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n, _ := io.Copy(w, io.LimitReader(spaces{}, 1024*MaxRESTAnswer))
		sent <- n
	}))
	defer srv.Close()
	r, err := NewREST(RESTConfig{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Path(context.Background(), realID); !errors.Is(err, ErrAnswer) {
		t.Fatalf("huge answer: %v, want ErrAnswer", err)
	}
	if n := testenv.Receive(t, testenv.Wait, "the handler's end", sent); n >= 1024*MaxRESTAnswer {
		t.Fatalf("the whole answer (%d bytes) was read", n)
	}
}

// spaces is an endless reader of spaces (valid JSON whitespace).
type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

func TestDecodeAnswer(t *testing.T) {
	const js = "application/json; charset=UTF-8"
	tests := []struct {
		name   string
		status int
		ctype  string
		body   string
		want   string
		err    error
	}{
		{"real 200", 200, js, realPathOK, "sub/b c.ipynb", nil},
		{"root", 200, js, `{"id": "` + realID + `", "path": "."}`, "", nil},
		{"real 404", 404, js, fmt.Sprintf(realPathUnknown, realID, realID), "", ErrNotFound},
		{"real 400", 400, js, realNoID, "", ErrStatus},
		{"real 403", 403, js, realForbidden, "", ErrStatus},
		{"html 404", 404, "text/html", realNoRoute, "", ErrStatus},
		{"json 404 without message", 404, js, `{}`, "", ErrStatus},
		{"500", 500, js, `{"message": "boom"}`, "", ErrStatus},
		{"old text answer", 200, "text/plain", "sub/a.ipynb", "", ErrAnswer},
		{"other id", 200, js, `{"id": "other", "path": "a.ipynb"}`, "", ErrAnswer},
		{"no path", 200, js, `{"id": "` + realID + `"}`, "", ErrAnswer},
		{"null path", 200, js, `{"id": "` + realID + `", "path": null}`, "", ErrAnswer},
		{"path not a string", 200, js, `{"id": "` + realID + `", "path": 3}`, "", ErrAnswer},
		{"truncated", 200, js, realPathOK[:20], "", ErrAnswer},
		{"too large", 200, js, realPathOK + strings.Repeat(" ", MaxRESTAnswer), "", ErrAnswer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeAnswer(tt.status, tt.ctype, []byte(tt.body), realID)
			if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("decodeAnswer = %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func FuzzDecodeAnswer(f *testing.F) {
	f.Add(200, "application/json", []byte(realPathOK), realID)
	f.Add(404, "application/json", []byte(fmt.Sprintf(realPathUnknown, "x", "x")), "x")
	f.Add(404, "text/html", []byte(realNoRoute), "x")
	f.Fuzz(func(t *testing.T, status int, ctype string, body []byte, id string) {
		p, err := decodeAnswer(status, ctype, body, id)
		if err != nil && p != "" {
			t.Fatalf("path %q with error %v", p, err)
		}
		if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrStatus) && !errors.Is(err, ErrAnswer) {
			t.Fatalf("error without a sentinel: %v", err)
		}
		if err == nil && status != http.StatusOK {
			t.Fatalf("status %d answered %q", status, p)
		}
	})
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
	testenv.Eventually(t, testenv.Wait, "the files to settle", func() bool { _, settled := r.stampFiles(); return settled })
	lookup("a.ipynb") // settled: asked once more, remembered
	returned := time.Now()
	testenv.Eventually(t, dbIdle+testenv.Wait, "the idle connections to close", func() bool { return r.db.Stats().MaxIdleTimeClosed > 0 && open() == 0 },
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

// A database that is no file id database, or whose files lie outside the root, is a
// Fault: warned once however many lookups fail (the rooms look every id up every 2 s),
// counted at each, and cleared, with a line saying so, by a lookup that works.
func TestDBFaults(t *testing.T) {
	const root = "/srv/jupyter/work"
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dbPath string) (fix func())
		fault error
		label string
	}{
		{"not a database", func(t *testing.T, dbPath string) func() {
			if err := os.WriteFile(dbPath, []byte(strings.Repeat("not sqlite ", 100)), 0o600); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := os.Remove(dbPath); err != nil {
					t.Fatal(err)
				}
				edit, _ := startManager(t, dbPath, "arbitrary")
				edit("add", id1, root+"/a.ipynb")
			}
		}, ErrUnreadable, "unreadable"},
		{"outside the root", func(t *testing.T, dbPath string) func() {
			edit, _ := startManager(t, dbPath, "arbitrary")
			edit("add", id1, "/home/someone/a.ipynb")
			edit("add", "b", "/home/someone/b.ipynb")
			return func() { edit("move", id1, root+"/a.ipynb") }
		}, ErrOutsideRoot, "outside_root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbPath := filepath.Join(t.TempDir(), "file_id_manager.db")
			var logs testenv.LockedBuffer
			reg := prometheus.NewPedanticRegistry()
			r, err := NewDB(DBConfig{Path: dbPath, RootDir: root, Registerer: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			fix := tc.setup(t, dbPath)
			ctx := context.Background()
			const lookups = 10
			for i := range lookups {
				id := []string{id1, "b"}[i%2]
				if _, err := r.Path(ctx, id); !errors.Is(err, tc.fault) {
					t.Fatalf("Path(%s): %v, want %v", id, err, tc.fault)
				}
			}
			if err := r.Fault(); !errors.Is(err, tc.fault) {
				t.Fatalf("Fault() = %v, want %v", err, tc.fault)
			}
			if err := (Chain{r}).Fault(); !errors.Is(err, tc.fault) {
				t.Fatalf("Chain.Fault() = %v, want %v", err, tc.fault)
			}
			if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
				t.Fatalf("%d warnings for %d failed lookups, want 1:\n%s", n, lookups, logs.String())
			}
			if got := testenv.Metric(t, reg, "jupyter_mcp_sidecar_fileid_lookup_faults_total", "fault", tc.label); got != lookups {
				t.Errorf("lookup_faults_total{fault=%q} = %v, want %d", tc.label, got, lookups)
			}
			fix()
			if p, err := r.Path(ctx, id1); err != nil || p != "a.ipynb" {
				t.Fatalf("after the fix: Path = %q, %v", p, err)
			}
			if err := r.Fault(); err != nil {
				t.Fatalf("after the fix: Fault() = %v", err)
			}
			if !strings.Contains(logs.String(), "file id lookups work again") {
				t.Errorf("the fix not logged:\n%s", logs.String())
			}
		})
	}
}
