package sidecartest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/demo"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres/pgtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite/sqlitetest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

const (
	// Token is the MCP bearer token of a sidecar Launch starts with serve.
	Token = "e2e-secret-token"
	// fileID is the file id of the notebook the session records.
	fileID = "0b5e2f5c-6a57-4d55-9d4c-1f6f0c3b8a11"
	// NbPath is that notebook's path under the sidecar's directory.
	NbPath = "work/analysis.ipynb"
	// roomKey is that notebook's room in the Y-store.
	roomKey = ".notebook:" + fileID + ".y"
)

// RepoRoot is the repository's root, an absolute path: commands started with another
// working directory (cmd.Dir) find what is named under it.
var RepoRoot = repoRoot()

func repoRoot() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "..")
}

// Binary is the sidecar built once for a package's tests, by Main.
var Binary string

// Main builds the sidecar (a -race build when the tests are) for the tests of a package,
// runs them and exits; a package's TestMain calls it.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "sidecar-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	Binary = filepath.Join(dir, "jupyter-mcp-sidecar")
	args := []string{"build", "-o", Binary}
	if RaceBuild {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/cmd/jupyter-mcp-sidecar")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the sidecar:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Step is one recorded Yjs update with what it changes in the notebook.
type Step struct {
	Update  []byte
	Changes ynotebook.Changes
	After   *ynotebook.Snapshot // the notebook once this update is applied
}

// Session is the demo recording (real Yjs updates of one notebook session), with the
// change set and notebook after each update, computed by the engine.
func Session(t testing.TB) []Step {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot, "sidecar", "demo", "session.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := demo.ParseSession(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	nb := ynotebook.New()
	out := make([]Step, len(steps))
	for i, s := range steps {
		ch, err := nb.Apply(s.Update)
		if err != nil {
			t.Fatalf("session update %d: %v", i, err)
		}
		out[i] = Step{Update: s.Update, Changes: ch, After: nb.Snapshot()}
	}
	return out
}

// Writer is the pycrdt-store-like writer on the test's store, writing the notebook room.
type Writer struct {
	*sqlitetest.Writer
	t testing.TB
}

// StartWriter starts the writer on the store file at store.
func StartWriter(t testing.TB, store string) Writer { return Writer{sqlitetest.Start(t, store), t} }

// StartPreloaded starts the writer on store and writes the session's first preloaded steps.
func StartPreloaded(t testing.TB, store string, steps []Step) Writer {
	t.Helper()
	w := StartWriter(t, store)
	for _, s := range steps[:Preloaded] {
		w.Write(s.Update)
	}
	return w
}

// Send sends one command; a write lost by the writer fails the test.
func (w Writer) Send(cmd map[string]any) sqlitetest.Reply {
	w.t.Helper()
	r := w.Do(cmd)
	if len(r.Errors) > 0 {
		w.t.Fatalf("writer %v lost writes: %v", cmd["op"], r.Errors)
	}
	return r
}

// Write stores one update and returns its commit time.
func (w Writer) Write(update []byte) time.Time {
	r := w.Send(map[string]any{"op": "write", "room": roomKey, "update": base64.StdEncoding.EncodeToString(update)})
	return UnixTime(r.Committed)
}

// Flood stores updates as fast as the writer can.
func (w Writer) Flood(updates [][]byte) {
	enc := make([]string, len(updates))
	for i, u := range updates {
		enc[i] = base64.StdEncoding.EncodeToString(u)
	}
	w.Send(map[string]any{"op": "flood", "room": roomKey, "updates": enc})
}

// UnixTime is a commit time of the writer, in seconds since the epoch, as a time.
func UnixTime(sec float64) time.Time {
	return time.Unix(0, int64(sec*1e9))
}

// Sidecar is a running process of the binary: its directory, listener and output.
type Sidecar struct {
	t     testing.TB
	dir   string
	store string
	URL   string // http://127.0.0.1:port
	Cmd   *exec.Cmd
	Logs  *testenv.LockedBuffer // its stdout and stderr
	Done  chan error
}

// Options configure StartSidecar.
type Options struct {
	Debounce time.Duration     // 0: the default 250 ms; <0: off
	Extra    string            // more configuration (YAML, top-level keys other than store, fileid, notifications, server)
	Files    map[string]string // more notebooks of the fileid database: file id → path under the directory
}

// StartSidecar creates the fileid database naming the notebook (and o.files), writes a
// config and starts the binary on a free loopback port, then waits until it answers
// /healthz.
func StartSidecar(t testing.TB, dir string, o Options) *Sidecar {
	t.Helper()
	fileidDB := filepath.Join(dir, "file_id_manager.db")
	CreateFileIDDB(t, fileidDB, filepath.Join(dir, NbPath))
	for id, p := range o.Files {
		ExecSQL(t, fileidDB, `INSERT INTO Files(id, path) VALUES (?, ?)`, id, filepath.Join(dir, p))
	}
	debounce := "250ms"
	if o.Debounce > 0 {
		debounce = o.Debounce.String()
	} else if o.Debounce < 0 {
		debounce = "0s"
	}
	store := filepath.Join(dir, ".jupyter_ystore.db")
	return Launch(t, dir, fmt.Sprintf(`store:
  backend: sqlite
  sqlite: {path: %q, poll_interval: 500ms}
fileid: {db_path: %q, root_dir: %q}
notifications: {debounce: %s, max_delay: 2s}
%s`, store, fileidDB, dir, debounce, o.Extra), "serve")
}

// Launch writes cfg (plus logging and, for serve, a loopback listener with the test
// token; for ship, its probes' listener) as the config of a new process of the binary
// running args in dir.
func Launch(t testing.TB, dir, cfg string, args ...string) *Sidecar {
	t.Helper()
	return LaunchOn(t, dir, testenv.FreePort(t), cfg, args...)
}

// LaunchOn is Launch with serve listening on the given loopback port.
func LaunchOn(t testing.TB, dir string, port int, cfg string, args ...string) *Sidecar {
	t.Helper()
	cfg = "log: {level: debug, format: json}\n" + cfg
	var url string
	switch args[0] {
	case "serve":
		tokenFile := filepath.Join(dir, "token")
		if err := os.WriteFile(tokenFile, []byte(Token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		url = fmt.Sprintf("http://127.0.0.1:%d", port)
		cfg += fmt.Sprintf("server: {listen: 127.0.0.1:%d, token_file: %q, state_file: %q}\n",
			port, tokenFile, filepath.Join(dir, "names.json"))
	case "ship": // its probes
		url = fmt.Sprintf("http://127.0.0.1:%d", port)
		cfg += fmt.Sprintf("server: {listen: 127.0.0.1:%d}\n", port)
	}
	return Start(t, dir, url, cfg, args...)
}

// Start is the tests' one launcher of the binary: it writes cfg, as it is, as the config
// of a new process running args in dir, whose HTTP listener is url ("" for none). The
// process's output is kept (Logs) and shown when the test fails; the process is stopped
// when the test ends (Stop). Serve is waited for until url answers /healthz.
func Start(t testing.TB, dir, url, cfg string, args ...string) *Sidecar {
	t.Helper()
	s := &Sidecar{t: t, dir: dir, store: filepath.Join(dir, ".jupyter_ystore.db"), URL: url,
		Logs: &testenv.LockedBuffer{}, Done: make(chan error, 1)}
	cfgPath := filepath.Join(dir, args[0]+".yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Cmd = exec.Command(Binary, append(args, "--config", cfgPath)...)
	s.Cmd.Stdout = s.Logs
	s.Cmd.Stderr = s.Logs
	if err := s.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.Done <- s.Cmd.Wait() }()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("%s logs:\n%s", args[0], s.Logs.String())
		}
	})
	if args[0] == "serve" {
		s.WaitHTTP("/healthz", http.StatusOK)
	}
	return s
}

// Stop sends SIGTERM and waits for a clean exit within the drain deadline.
func (s *Sidecar) Stop() {
	if s.Cmd.ProcessState != nil {
		return
	}
	_ = s.Cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-s.Done:
		if err != nil {
			s.t.Errorf("sidecar exited with %v after SIGINT", err)
		}
	case <-time.After(15 * time.Second): // the drain timeout (10 s) and a margin: a clean exit is one in time
		_ = s.Cmd.Process.Kill()
		s.t.Error("sidecar did not stop within 15 s of SIGINT")
	}
}

// Get fetches a path of the sidecar's HTTP listener.
func (s *Sidecar) Get(path string) (int, string) {
	resp, err := http.Get(s.URL + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// WaitHTTP waits until path answers code and returns the body.
func (s *Sidecar) WaitHTTP(path string, code int) string {
	s.t.Helper()
	return WaitStatus(s.t, s, path, code)
}

// Metric returns the sum of the samples of series on /metrics whose labels include
// labels (name, value pairs); 0 when it has none (a labelled metric before its first
// sample). See testenv.Sum.
func (s *Sidecar) Metric(series string, labels ...string) float64 {
	s.t.Helper()
	return testenv.Sum(testenv.Scrape(s.t, s.URL+"/metrics"), series, labels...)
}

// Metrics returns the sum of the samples of each series, from one scrape.
func (s *Sidecar) Metrics(series ...string) []float64 {
	s.t.Helper()
	fams := testenv.Scrape(s.t, s.URL+"/metrics")
	out := make([]float64, len(series))
	for i, name := range series {
		out[i] = testenv.Sum(fams, name)
	}
	return out
}

// MCPURL is the sidecar's MCP endpoint.
func (s *Sidecar) MCPURL() string { return s.URL + "/mcp" }

// CreateFileIDDB writes a jupyter_server_fileid database naming the notebook.
func CreateFileIDDB(t testing.TB, dbPath, nbAbs string) {
	t.Helper()
	ExecSQL(t, dbPath, fileid.Schema)
	ExecSQL(t, dbPath, `INSERT INTO Files(id, path) VALUES (?, ?)`, fileID, nbAbs)
}

// RenameInFileIDDB records a rename the way jupyter_server_fileid does: same id, new path.
func RenameInFileIDDB(t testing.TB, dbPath, nbAbs string) {
	t.Helper()
	ExecSQL(t, dbPath, `UPDATE Files SET path = ? WHERE id = ?`, nbAbs, fileID)
}

// OpenSQL opens the SQLite database at dbPath as a live store's other writers do: a
// statement waits up to 10 s for a lock another process holds (the server's writer, a
// sidecar's read) instead of failing at once with SQLITE_BUSY.
func OpenSQL(t testing.TB, dbPath string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// ExecSQL runs one statement on the SQLite database at dbPath, opened with OpenSQL.
func ExecSQL(t testing.TB, dbPath, stmt string, args ...any) {
	t.Helper()
	db := OpenSQL(t, dbPath)
	defer db.Close()
	if _, err := db.Exec(stmt, args...); err != nil {
		t.Fatal(err)
	}
}

// WaitCtx is a context bounded by d and the test.
func WaitCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// CellURI names a cell resource of the bound notebook.
func CellURI(name, id string) string { return "notebook://" + name + "/cells/" + id }

// Visible reports whether a slice of steps changes anything a read would show.
func Visible(steps []Step) bool {
	for _, s := range steps {
		if !s.Changes.Empty() {
			return true
		}
	}
	return false
}

// ChangedCell returns the first step at or after from that changes the source of a
// cell that already exists before it, with that cell's id.
func ChangedCell(steps []Step, from int) (int, string) {
	for i := from; i < len(steps); i++ {
		for id, c := range steps[i].Changes.Cells {
			if c.Source && !strings.Contains(id, "/") {
				if _, _, ok := steps[i-1].After.Cell(id); ok {
					return i, id
				}
			}
		}
	}
	return -1, ""
}

// WaitStatus waits until path answers code and returns the body, failing t (not the
// sidecar's test, so that it can run in a subtest).
func WaitStatus(t testing.TB, sc *Sidecar, path string, code int) string {
	t.Helper()
	var got int
	var body string
	testenv.Eventually(t, testenv.Wait, fmt.Sprintf("%s answering %d", path, code), func() bool {
		got, body = sc.Get(path)
		return got == code
	}, func() string { return fmt.Sprintf("last answer %d %q", got, body) })
	return body
}

// LogCount counts the binary's JSON log lines of level whose message starts with msg.
func (s *Sidecar) LogCount(level, msg string) int {
	n := 0
	for line := range strings.SplitSeq(s.Logs.String(), "\n") {
		var l struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Level == level && strings.HasPrefix(l.Msg, msg) {
			n++
		}
	}
	return n
}

// InitPostgres creates a fresh schema on the test cluster with `postgres init` and
// returns the DSN and the schema.
func InitPostgres(t *testing.T) (dsn, schema string) {
	t.Helper()
	dsn, schema = pgtest.DSN(t), pgtest.Schema("e2e_")
	if out, err := exec.Command(Binary, "postgres", "init", "--dsn", dsn, "--schema", schema).CombinedOutput(); err != nil {
		t.Fatalf("postgres init: %v\n%s", err, out)
	}
	return dsn, schema
}

// Histogram summarises a Prometheus histogram of the sidecar: count, mean and the
// count of observations above each bucket bound from 0.1 s up.
func (s *Sidecar) Histogram(name string) string {
	s.t.Helper()
	fams := testenv.Scrape(s.t, s.URL+"/metrics")
	count := testenv.Sum(fams, name+"_count")
	out := fmt.Sprintf("%v observations, mean %.4fs", count, testenv.Sum(fams, name+"_sum")/max(count, 1))
	for _, m := range fams[name].GetMetric() {
		for _, b := range m.GetHistogram().GetBucket() {
			if le := b.GetUpperBound(); le >= 0.1 && !math.IsInf(le, 1) {
				out += fmt.Sprintf("; >%vs: %v", le, count-float64(b.GetCumulativeCount()))
			}
		}
	}
	return out
}

// BulkStore creates a pycrdt-store file at path (its schema, demo.StoreSchema) opened
// for writing many rows fast: no journal, no sync, one connection. It is closed when
// the test ends.
func BulkStore(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(off)&_pragma=synchronous(off)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	for _, q := range demo.StoreSchema {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}
