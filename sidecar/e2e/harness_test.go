package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/demo"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite/sqlitetest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

const (
	token    = "e2e-secret-token"
	fileID   = "0b5e2f5c-6a57-4d55-9d4c-1f6f0c3b8a11"
	nbPath   = "work/analysis.ipynb"
	roomKey  = ".notebook:" + fileID + ".y"
	repoRoot = "../.."
)

// binary is the sidecar built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	if spec := os.Getenv(holdEnv); spec != "" {
		os.Exit(holdNotebooks(spec))
	}
	dir, err := os.MkdirTemp("", "sidecar-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "jupyter-mcp-sidecar")
	args := []string{"build", "-o", binary}
	if raceBuild {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../../cmd/jupyter-mcp-sidecar")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the sidecar:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// step is one recorded Yjs update with what it changes in the notebook.
type step struct {
	update  []byte
	changes ynotebook.Changes
	after   *ynotebook.Snapshot // the notebook once this update is applied
}

// session is the demo recording (real Yjs updates of one notebook session), with the
// change set and notebook after each update, computed by the engine.
func session(t testing.TB) []step {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "sidecar", "demo", "session.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := demo.ParseSession(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	nb := ynotebook.New()
	out := make([]step, len(steps))
	for i, s := range steps {
		ch, err := nb.Apply(s.Update)
		if err != nil {
			t.Fatalf("session update %d: %v", i, err)
		}
		out[i] = step{update: s.Update, changes: ch, after: nb.Snapshot()}
	}
	return out
}

// writer is the pycrdt-store-like writer on the test's store, writing the notebook room.
type writer struct {
	*sqlitetest.Writer
	t testing.TB
}

func startWriter(t testing.TB, store string) writer { return writer{sqlitetest.Start(t, store), t} }

// startPreloaded starts the writer on store and writes the session's first preloaded steps.
func startPreloaded(t testing.TB, store string, steps []step) writer {
	t.Helper()
	w := startWriter(t, store)
	for _, s := range steps[:preloaded] {
		w.write(s.update)
	}
	return w
}

// do sends one command; a write lost by the writer fails the test.
func (w writer) do(cmd map[string]any) sqlitetest.Reply {
	w.t.Helper()
	r := w.Do(cmd)
	if len(r.Errors) > 0 {
		w.t.Fatalf("writer %v lost writes: %v", cmd["op"], r.Errors)
	}
	return r
}

// write stores one update and returns its commit time.
func (w writer) write(update []byte) time.Time {
	r := w.do(map[string]any{"op": "write", "room": roomKey, "update": base64.StdEncoding.EncodeToString(update)})
	return unixTime(r.Committed)
}

// flood stores updates as fast as the writer can.
func (w writer) flood(updates [][]byte) {
	enc := make([]string, len(updates))
	for i, u := range updates {
		enc[i] = base64.StdEncoding.EncodeToString(u)
	}
	w.do(map[string]any{"op": "flood", "room": roomKey, "updates": enc})
}

func unixTime(sec float64) time.Time {
	return time.Unix(0, int64(sec*1e9))
}

// sidecar is the running binary with its store, fileid database and config.
type sidecar struct {
	t      testing.TB
	dir    string
	store  string
	url    string // http://127.0.0.1:port
	cmd    *exec.Cmd
	logs   *bytes.Buffer
	logsMu *sync.Mutex
	done   chan error
}

type options struct {
	debounce time.Duration     // 0: the default 250 ms; <0: off
	extra    string            // more configuration (YAML, top-level keys other than store, fileid, notifications, server)
	files    map[string]string // more notebooks of the fileid database: file id → path under the directory
}

// startSidecar creates the fileid database naming the notebook (and o.files), writes a
// config and starts the binary on a free loopback port, then waits until it answers
// /healthz.
func startSidecar(t testing.TB, dir string, o options) *sidecar {
	t.Helper()
	fileidDB := filepath.Join(dir, "file_id_manager.db")
	createFileIDDB(t, fileidDB, filepath.Join(dir, nbPath))
	for id, p := range o.files {
		execSQL(t, fileidDB, `INSERT INTO Files(id, path) VALUES (?, ?)`, id, filepath.Join(dir, p))
	}
	debounce := "250ms"
	if o.debounce > 0 {
		debounce = o.debounce.String()
	} else if o.debounce < 0 {
		debounce = "0s"
	}
	store := filepath.Join(dir, ".jupyter_ystore.db")
	return launch(t, dir, fmt.Sprintf(`store:
  backend: sqlite
  sqlite: {path: %q, poll_interval: 500ms}
fileid: {db_path: %q, root_dir: %q}
notifications: {debounce: %s, max_delay: 2s}
%s`, store, fileidDB, dir, debounce, o.extra), "serve")
}

// launch writes cfg (plus logging and, for serve, a loopback listener with the test
// token; for ship, its probes' listener) as the config of a new process of the binary
// running args in dir.
func launch(t testing.TB, dir, cfg string, args ...string) *sidecar {
	t.Helper()
	return launchOn(t, dir, testenv.FreePort(t), cfg, args...)
}

// launchOn is launch with serve listening on the given loopback port.
func launchOn(t testing.TB, dir string, port int, cfg string, args ...string) *sidecar {
	t.Helper()
	s := &sidecar{t: t, dir: dir, store: filepath.Join(dir, ".jupyter_ystore.db"),
		logs: &bytes.Buffer{}, logsMu: &sync.Mutex{}, done: make(chan error, 1)}
	cfg = "log: {level: debug, format: json}\n" + cfg
	serve := args[0] == "serve"
	if serve {
		tokenFile := filepath.Join(dir, "token")
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s.url = fmt.Sprintf("http://127.0.0.1:%d", port)
		cfg += fmt.Sprintf("server: {listen: 127.0.0.1:%d, token_file: %q, state_file: %q}\n",
			port, tokenFile, filepath.Join(dir, "names.json"))
	}
	if args[0] == "ship" { // its probes
		s.url = fmt.Sprintf("http://127.0.0.1:%d", port)
		cfg += fmt.Sprintf("server: {listen: 127.0.0.1:%d}\n", port)
	}
	cfgPath := filepath.Join(dir, args[0]+".yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(binary, append(args, "--config", cfgPath)...)
	s.cmd.Stdout = lockedWriter{s.logsMu, s.logs}
	s.cmd.Stderr = lockedWriter{s.logsMu, s.logs}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			s.logsMu.Lock()
			t.Logf("%s logs:\n%s", args[0], s.logs.String())
			s.logsMu.Unlock()
		}
	})
	if serve {
		s.waitHTTP("/healthz", http.StatusOK)
	}
	return s
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// stop sends SIGTERM and waits for a clean exit within the drain deadline.
func (s *sidecar) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Errorf("sidecar exited with %v after SIGINT", err)
		}
	case <-time.After(15 * time.Second): // the drain timeout (10 s) and a margin: a clean exit is one in time
		_ = s.cmd.Process.Kill()
		s.t.Error("sidecar did not stop within 15 s of SIGINT")
	}
}

// get fetches a path of the sidecar's HTTP listener.
func (s *sidecar) get(path string) (int, string) {
	resp, err := http.Get(s.url + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitHTTP waits until path answers code and returns the body.
func (s *sidecar) waitHTTP(path string, code int) string {
	s.t.Helper()
	return waitStatus(s.t, s, path, code)
}

// metric returns the sum of the samples of series on /metrics whose labels include
// labels (name, value pairs); 0 when it has none (a labelled metric before its first
// sample). See testenv.Sum.
func (s *sidecar) metric(series string, labels ...string) float64 {
	s.t.Helper()
	return testenv.Sum(testenv.Scrape(s.t, s.url+"/metrics"), series, labels...)
}

// metrics returns the sum of the samples of each series, from one scrape.
func (s *sidecar) metrics(series ...string) []float64 {
	s.t.Helper()
	fams := testenv.Scrape(s.t, s.url+"/metrics")
	out := make([]float64, len(series))
	for i, name := range series {
		out[i] = testenv.Sum(fams, name)
	}
	return out
}

func (s *sidecar) mcpURL() string { return s.url + "/mcp" }

// createFileIDDB writes a jupyter_server_fileid database naming the notebook.
func createFileIDDB(t testing.TB, dbPath, nbAbs string) {
	t.Helper()
	execSQL(t, dbPath, fileid.Schema)
	execSQL(t, dbPath, `INSERT INTO Files(id, path) VALUES (?, ?)`, fileID, nbAbs)
}

// renameInFileIDDB records a rename the way jupyter_server_fileid does: same id, new path.
func renameInFileIDDB(t testing.TB, dbPath, nbAbs string) {
	t.Helper()
	execSQL(t, dbPath, `UPDATE Files SET path = ? WHERE id = ?`, nbAbs, fileID)
}

func execSQL(t testing.TB, dbPath, stmt string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt, args...); err != nil {
		t.Fatal(err)
	}
}

// waitCtx is a context bounded by d and the test.
func waitCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// cellURI names a cell resource of the bound notebook.
func cellURI(name, id string) string { return "notebook://" + name + "/cells/" + id }

// visible reports whether a slice of steps changes anything a read would show.
func visible(steps []step) bool {
	for _, s := range steps {
		if !s.changes.Empty() {
			return true
		}
	}
	return false
}

// changedCell returns the first step at or after from that changes the source of a
// cell that already exists before it, with that cell's id.
func changedCell(steps []step, from int) (int, string) {
	for i := from; i < len(steps); i++ {
		for id, c := range steps[i].changes.Cells {
			if c.Source && !strings.Contains(id, "/") {
				if _, _, ok := steps[i-1].after.Cell(id); ok {
					return i, id
				}
			}
		}
	}
	return -1, ""
}
