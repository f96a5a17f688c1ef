// Package jupytertest starts, for the tests of any package, a real Jupyter server with
// jupyter-collaboration (the pinned stack of testdata/jupyter/requirements.txt, in the
// virtual environment SIDECAR_TEST_JUPYTER_VENV names; scripts/jupyter-venv.sh builds it)
// on a free loopback port, with its Y-store, file id database and root directory in a
// temporary directory, and drives the Python clients of testdata/jupyter/client.py: people
// and agents editing through the collaboration websocket, a real kernel, and the oracle
// (the server's own view of a notebook, jupyter_ydoc's YNotebook.get()).
//
// Without the environment the test is skipped, or fails on CI (CI=true), where .ci/run
// builds it.
package jupytertest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// VenvEnv names the environment variable holding the virtual environment's directory.
const VenvEnv = "SIDECAR_TEST_JUPYTER_VENV"

// Token is the server's API token (an empty one makes PUT requests fail on _xsrf).
const Token = "jupytertest-token"

// File id managers of jupyter_server_fileid.
const (
	ArbitraryFileIDManager = "jupyter_server_fileid.manager.ArbitraryFileIdManager"
	LocalFileIDManager     = "jupyter_server_fileid.manager.LocalFileIdManager"
)

// startTimeout bounds a start of the server (3-10 s on a loaded 2-core machine).
const startTimeout = 90 * time.Second

// stopTimeout is how long the server gets to exit after SIGTERM before SIGKILL. With
// clients still connected, jupyter_server 2.21 often waits for them far longer.
const stopTimeout = 10 * time.Second

// Python returns the virtual environment's interpreter, or why there is none.
func Python() (string, error) {
	venv := os.Getenv(VenvEnv)
	if venv == "" {
		return "", fmt.Errorf("%s is not set", VenvEnv)
	}
	py := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(py); err != nil {
		return "", fmt.Errorf("%s: %w", VenvEnv, err)
	}
	return py, nil
}

// Need skips the test without the environment, or fails it on CI.
func Need(t testing.TB) string {
	t.Helper()
	py, err := Python()
	testenv.Need(t, err, "export "+VenvEnv+"=$(scripts/jupyter-venv.sh)")
	return py
}

// Options configure a server. The zero value is jupyter-collaboration's defaults but
// for short delays (cleanup 5 s, save 0.5 s) and the ArbitraryFileIdManager.
type Options struct {
	Notebooks             map[string]string // API path → nbformat JSON, written into the root before start
	CleanupDelay          time.Duration     // YDocExtension.document_cleanup_delay; 0: 5 s
	SaveDelay             time.Duration     // YDocExtension.document_save_delay; 0: 0.5 s
	SquashAfterInactivity time.Duration     // SQLiteYStore.squash_after_inactivity_of (whole seconds); 0: off
	CheckpointInterval    int               // pycrdt-store's checkpoint_interval; 0: its default (100)
	FileIDManager         string            // FileIdExtension.file_id_manager_class; "": ArbitraryFileIDManager
	Lab                   bool              // run `jupyter lab` instead of `jupyter server`
}

// Server is a running (or stopped) Jupyter server.
type Server struct {
	URL        string // http://127.0.0.1:port, no trailing slash
	Dir        string // its temporary directory: store, file id db, log
	Root       string // ServerApp.root_dir (absolute), holding the notebooks
	StorePath  string // the Y-store (SQLiteYStore.db_path)
	FileIDPath string // jupyter_server_fileid's database (BaseFileIdManager.db_path)

	t      testing.TB
	python string
	opts   Options
	port   int
	cmd    *exec.Cmd
	done   chan struct{}
	logf   string
}

// labSettings turns off what JupyterLab would fetch from the internet (news, update
// checks) and the notification asking about it, in the user settings of the server.
func (s *Server) labSettings() {
	s.t.Helper()
	dir := filepath.Join(s.Dir, "config", "lab", "user-settings", "@jupyterlab", "apputils-extension")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	settings := `{"fetchNews": "false", "checkForUpdates": false}`
	if err := os.WriteFile(filepath.Join(dir, "notification.jupyterlab-settings"), []byte(settings), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// Options are the options s was started with.
func (s *Server) Options() Options { return s.opts }

// Start runs a server with o and stops it when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{t: t, python: Need(t), opts: o, Dir: t.TempDir()}
	s.Root = filepath.Join(s.Dir, "root")
	s.StorePath = filepath.Join(s.Dir, "ystore.db")
	s.FileIDPath = filepath.Join(s.Dir, "fileid.db")
	s.logf = filepath.Join(s.Dir, "server.log")
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, nb := range o.Notebooks {
		s.WriteFile(p, nb)
	}
	if o.Lab {
		s.labSettings()
	}
	if o.CheckpointInterval > 0 {
		py := fmt.Sprintf("from jupyter_server_ydoc.stores import SQLiteYStore\n\n\n"+
			"class Store(SQLiteYStore):\n    checkpoint_interval = %d\n", o.CheckpointInterval)
		if err := os.WriteFile(filepath.Join(s.Dir, "jupytertest_ystore.py"), []byte(py), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	for range 3 { // a port taken between choosing and binding: choose again
		s.port = testenv.FreePort(t)
		s.URL = fmt.Sprintf("http://127.0.0.1:%d", s.port)
		if err = s.start(); !errors.Is(err, errExited) {
			break
		}
	}
	if err != nil {
		t.Fatalf("jupyter server did not start: %v\n%s", err, s.Log())
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("jupyter server log:\n%s", s.Log())
		}
	})
	return s
}

var errExited = errors.New("jupyter server exited")

// args is the server's command line.
func (s *Server) args() []string {
	o := s.opts
	cleanup, save := o.CleanupDelay, o.SaveDelay
	if cleanup == 0 {
		cleanup = 5 * time.Second
	}
	if save == 0 {
		save = 500 * time.Millisecond
	}
	fid := o.FileIDManager
	if fid == "" {
		fid = ArbitraryFileIDManager
	}
	app := "jupyter_server"
	if o.Lab {
		app = "jupyterlab"
	}
	a := []string{"-m", app, "--allow-root", "--no-browser",
		"--IdentityProvider.token=" + Token,
		fmt.Sprintf("--ServerApp.port=%d", s.port), "--ServerApp.port_retries=0",
		"--ServerApp.ip=127.0.0.1", "--ServerApp.root_dir=" + s.Root,
		"--SQLiteYStore.db_path=" + s.StorePath,
		"--BaseFileIdManager.db_path=" + s.FileIDPath,
		"--FileIdExtension.file_id_manager_class=" + fid,
		fmt.Sprintf("--YDocExtension.document_cleanup_delay=%g", cleanup.Seconds()),
		fmt.Sprintf("--YDocExtension.document_save_delay=%g", save.Seconds()),
	}
	if o.SquashAfterInactivity > 0 {
		a = append(a, fmt.Sprintf("--SQLiteYStore.squash_after_inactivity_of=%d", int(o.SquashAfterInactivity.Seconds())))
	}
	if o.CheckpointInterval > 0 {
		a = append(a, "--YDocExtension.ystore_class=jupytertest_ystore.Store")
	}
	if o.Lab {
		a = append(a, "--LabApp.expose_app_in_browser=True") // window.jupyterapp, for the browser driver
	}
	return a
}

// start runs the process and waits until GET /api/status answers.
func (s *Server) start() error {
	logf, err := os.OpenFile(s.logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	s.cmd = exec.Command(s.python, s.args()...)
	s.cmd.Dir = s.Dir
	s.cmd.Env = append(os.Environ(), "PYTHONPATH="+s.Dir, "JUPYTER_CONFIG_DIR="+filepath.Join(s.Dir, "config"),
		"JUPYTER_DATA_DIR="+filepath.Join(s.Dir, "data"), "JUPYTER_RUNTIME_DIR="+filepath.Join(s.Dir, "runtime"),
		"IPYTHONDIR="+filepath.Join(s.Dir, "ipython"))
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // kernels are its children: stop them too
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start jupyter server: %w", err)
	}
	done := make(chan struct{})
	s.done = done
	cmd := s.cmd
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(startTimeout)
	for {
		if code, _, err := s.try(http.MethodGet, "/api/status", nil); err == nil && code == http.StatusOK {
			return nil
		}
		select {
		case <-done:
			return errExited
		case <-time.After(100 * time.Millisecond): // polling interval of the readiness probe
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("not ready within %v", startTimeout)
		}
	}
}

// Stop ends the server: SIGTERM, then SIGKILL of its process group after stopTimeout.
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		s.t.Logf("jupyter server (pid %d) did not stop within %v of SIGTERM: killed", pid, stopTimeout)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-s.done
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL) // what it left behind in its group (kernels)
	s.cmd = nil
}

// Restart stops the server and starts it again on the same port and files; before, if
// not nil, runs while it is stopped (to change its store, say).
func (s *Server) Restart(before func()) {
	s.t.Helper()
	s.Stop()
	if before != nil {
		before()
	}
	if err := s.start(); err != nil {
		s.t.Fatalf("jupyter server did not restart: %v\n%s", err, s.Log())
	}
}

// Log returns what the server wrote to stdout and stderr so far, every run.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logf)
	return string(b)
}

// lockError matches what sqlite-anyio logs when it swallows a failed store write
// (exception_logger: "SQLite exception" with the traceback) and SQLite's busy errors.
var lockError = regexp.MustCompile(`(?i)database is locked|database table is locked|SQLITE_BUSY|SQLite exception`)

// LockErrors counts the lines of the server's log that report a store write lost to
// SQLite's locking (or any SQLite exception sqlite-anyio swallowed).
func (s *Server) LockErrors() int {
	return len(lockError.FindAllStringIndex(s.Log(), -1))
}

// WriteFile writes a file under the root (creating directories), as an editor or git would.
func (s *Server) WriteFile(path, content string) {
	s.t.Helper()
	abs := filepath.Join(s.Root, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(abs, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// REST calls the server's API with the token and returns the status and body; a body
// given is sent as JSON.
func (s *Server) REST(method, path string, body any) (int, []byte) {
	s.t.Helper()
	code, b, err := s.try(method, path, body)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, b
}

func (s *Server) try(method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "token "+Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Client is one process of testdata/jupyter/client.py: any number of people (the
// commands' "client") joined to any number of notebooks of the server.
type Client struct {
	t   testing.TB
	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Scanner
}

// Reply is one answer of the client: "ok", "error" and the command's own fields.
type Reply map[string]any

// Client starts a client process of the server; it ends when the test ends.
func (s *Server) Client() *Client {
	s.t.Helper()
	return Connect(s.t, s.URL, Token)
}

// Connect starts a client process of the Jupyter server at url (e.g. a JupyterHub
// user's server, http://proxy/user/alice) that sends token in every request and
// websocket; it ends when the test ends.
func Connect(t testing.TB, url, token string) *Client {
	t.Helper()
	return Process(t, exec.Command(Need(t), testenv.Testdata("jupyter", "client.py"), "--url", url, "--token", token))
}

// Process starts cmd, a client speaking JSON lines whose first line says it is ready;
// it ends when the test ends.
func Process(t testing.TB, cmd *exec.Cmd) *Client {
	t.Helper()
	child := testenv.StartChild(t, cmd, testenv.CleanExit)
	c := &Client{t: t, in: child.In, out: bufio.NewScanner(child.Out)}
	c.out.Buffer(make([]byte, 1<<20), 256<<20)
	if !c.out.Scan() {
		t.Fatalf("client did not start: %s", child.Stderr)
	}
	return c
}

// Try sends one command and returns its reply, with an error if it failed.
func (c *Client) Try(cmd map[string]any) (Reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("send %s: %w", b, err)
	}
	if !c.out.Scan() {
		return nil, fmt.Errorf("no reply to %s: %v", b, c.out.Err())
	}
	var r Reply
	if err := json.Unmarshal(c.out.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("reply %q: %w", c.out.Bytes(), err)
	}
	if ok, _ := r["ok"].(bool); !ok {
		return r, fmt.Errorf("%v: %v\n%v", cmd["op"], r["error"], r["trace"])
	}
	return r, nil
}

// Do sends one command and fails the test unless it succeeded.
func (c *Client) Do(cmd map[string]any) Reply {
	c.t.Helper()
	r, err := c.Try(cmd)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// Notebook returns the oracle: the server's view of path as client who sees it
// (YNotebook.get() of their document), as JSON.
func (c *Client) Notebook(who, path string) []byte {
	c.t.Helper()
	b, err := json.Marshal(c.Do(map[string]any{"op": "get", "client": who, "path": path})["nb"])
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// NotebookJSON is a minimal nbformat 4.5 notebook with code cells of the given ids and
// sources, for Options.Notebooks.
func NotebookJSON(cells ...[2]string) string {
	list := make([]map[string]any, len(cells))
	for i, c := range cells {
		list[i] = map[string]any{"cell_type": "code", "id": c[0], "source": c[1], "metadata": map[string]any{},
			"outputs": []any{}, "execution_count": nil}
	}
	b, _ := json.Marshal(map[string]any{"cells": list, "metadata": map[string]any{}, "nbformat": 4, "nbformat_minor": 5})
	return string(b)
}

// RoomKey is pycrdt-store's row path of a notebook's room: .notebook:{fileId}.y.
func RoomKey(fileID string) string { return ".notebook:" + fileID + ".y" }
