// Package jhubtest starts, for the tests of any package, a throwaway JupyterHub 6 (the
// pinned `jupyterhub` of testdata/jupyter/requirements.txt, in the virtual environment
// of the real Jupyter stack, with the pinned configurable-http-proxy of
// testdata/jupyterhub) on free loopback ports in a temporary directory:
// DummyAuthenticator, users alice and bob who may use the service "mcp" and carol who may
// not, and "mcp" as an external service whose URL the test gives. The service's API
// token may create and revoke user tokens, add more users who may use the service
// (AddUsers) and start users' servers (Spawn): real single-user servers
// (jupyterhub-singleuser with jupyter-collaboration) run by SimpleLocalProcessSpawner as
// the test's own user, each in its home directory Homes/{username}, where it writes its
// Y-store (.jupyter_ystore.db) and file id database
// (.local/share/jupyter/file_id_manager.db) at their default places.
// Without the environment or the proxy the test is skipped, or fails on CI (CI=true),
// where .ci/run provides both.
package jhubtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
)

// ServiceName is the Hub's name of the service under test; its proxy prefix is
// /services/mcp/.
const ServiceName = "mcp"

// AccessScope is the scope the "mcp-users" role grants alice and bob.
const AccessScope = "access:services!service=" + ServiceName

// Users may use the service; NoAccessUser is a Hub user without AccessScope.
var Users = []string{"alice", "bob"}

// AccessGroup is the Hub group whose members hold AccessScope; AddUsers puts users there.
const AccessGroup = "mcp-users"

// NoAccessUser is a Hub user who may not use the service.
const NoAccessUser = "carol"

// startTimeout bounds the Hub's start, proxy routes included.
const startTimeout = 60 * time.Second

// serviceProbe bounds the Hub's wait at start for the service's URL to answer (its
// default, 30 s, is every test's wait when the service starts after the Hub).
const serviceProbe = 2 * time.Second

// spawnTimeout bounds a user's server start (5-30 s on a loaded 2-core machine).
const spawnTimeout = 120 * time.Second

// Store paths in a user's home directory: where a single-user server started by Spawn
// writes its Y-store (jupyter_server_ydoc's default, relative to the server's working
// directory, the home) and its file id database (jupyter_server_fileid's default,
// jupyter_data_dir()/file_id_manager.db).
const (
	StoreFile  = ".jupyter_ystore.db"
	FileIDFile = ".local/share/jupyter/file_id_manager.db"
)

// Hub is a running throwaway JupyterHub.
type Hub struct {
	Dir          string // its working directory: config, database, log (hub.log)
	ProxyURL     string // the public proxy, e.g. http://127.0.0.1:40001 (no trailing slash)
	APIURL       string // the Hub's REST API, e.g. http://127.0.0.1:40003/hub/api (JUPYTERHUB_API_URL)
	ServiceURL   string // where the proxy sends /services/mcp/ (as given to Start)
	ServiceToken string // the service's API token (JUPYTERHUB_API_TOKEN): role with "tokens"
	Homes        string // users' home directories, Homes/{username}: their servers' roots

	t        testing.TB
	python   string
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
	proxyAPI string
	proxyKey string
	spawned  []int // process ids of the users' servers Spawn started
}

// Options configure a Hub.
type Options struct {
	ServiceURL string // where the proxy sends /services/mcp/ (see Start)
	Homes      string // users' home directories, Homes/{username}; "": Dir/home
}

// Token is a user's API token.
type Token struct {
	User  string
	ID    string // the Hub's token id, for Revoke
	Value string // what a client sends: Authorization: token <Value> (or Bearer)
}

// Proxy returns the path of the pinned configurable-http-proxy (testdata/jupyterhub's
// node_modules, filled by npm ci).
func Proxy() string {
	return testenv.Testdata("jupyterhub", "node_modules", ".bin", "configurable-http-proxy")
}

// Available returns the virtual environment's Python if it holds jupyterhub and the
// pinned configurable-http-proxy is installed, or why not.
func Available() (string, error) {
	py, err := jupytertest.Python()
	if err != nil {
		return "", err
	}
	if err := exec.Command(py, "-c", "import jupyterhub.singleuser").Run(); err != nil {
		return "", fmt.Errorf("no jupyterhub in %s (rebuild it: scripts/jupyter-venv.sh): %w", py, err)
	}
	if _, err := os.Stat(Proxy()); err != nil {
		return "", fmt.Errorf("configurable-http-proxy: %w (npm ci in testdata/jupyterhub)", err)
	}
	return py, nil
}

// require returns the environment's Python; it skips the test without JupyterHub, or
// fails it on CI.
func require(t testing.TB) string {
	t.Helper()
	py, err := Available()
	testenv.Need(t, err, "export "+jupytertest.VenvEnv+"=$(scripts/jupyter-venv.sh); npm ci in testdata/jupyterhub")
	return py
}

// Start runs a Hub whose proxy sends /services/mcp/… to serviceURL (e.g.
// http://127.0.0.1:41234), waits until the Hub and the service's route are up, and stops
// it when the test ends. At start the Hub probes serviceURL: serve there before Start,
// or have nothing listen there yet; a listener that accepts without answering delays the
// start by the probe's timeout (serviceProbe). A Hub that exits while starting (another process took
// one of its free ports) is started again on new ports, up to three times.
func Start(t testing.TB, serviceURL string) *Hub {
	t.Helper()
	return StartWith(t, Options{ServiceURL: serviceURL})
}

// StartWith runs a Hub configured by o, as Start does.
func StartWith(t testing.TB, o Options) *Hub {
	t.Helper()
	py := require(t)
	var err error
	for range 3 {
		var h *Hub
		if h, err = start(t, py, o); err == nil {
			return h
		}
		if !errors.Is(err, errExited) {
			break
		}
	}
	t.Fatalf("jupyterhub did not start: %v", err)
	return nil
}

// errExited is the Hub process ending before it was ready.
var errExited = errors.New("jupyterhub exited")

func start(t testing.TB, python string, o Options) (*Hub, error) {
	h := &Hub{
		Dir: t.TempDir(), ServiceURL: strings.TrimRight(o.ServiceURL, "/"), ServiceToken: randomHex(t),
		Homes: o.Homes, t: t, python: python, done: make(chan struct{}), proxyKey: randomHex(t),
	}
	if h.Homes == "" {
		h.Homes = filepath.Join(h.Dir, "home")
	}
	hubAddr := testenv.FreeAddr(t)
	h.ProxyURL = "http://" + testenv.FreeAddr(t)
	h.proxyAPI = "http://" + testenv.FreeAddr(t)
	h.APIURL = "http://" + hubAddr + "/hub/api"
	cfg := filepath.Join(h.Dir, "jupyterhub_config.py")
	if err := os.WriteFile(cfg, []byte(h.config(hubAddr)), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(h.Dir, "hub.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	h.cmd = exec.Command(python, "-m", "jupyterhub", "-f", cfg)
	h.cmd.Dir = h.Dir
	h.cmd.Stdout, h.cmd.Stderr = logf, logf
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group Stop can end; the proxy leads a session of its own
	if err := h.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start jupyterhub: %w", err)
	}
	go func() { _ = h.cmd.Wait(); close(h.done) }()
	if err := h.waitReady(); err != nil {
		h.Stop()
		return nil, fmt.Errorf("%w\n%s", err, h.Log())
	}
	t.Cleanup(func() {
		h.Stop()
		if t.Failed() {
			t.Logf("jupyterhub log:\n%s", h.Log())
		}
	})
	return h, nil
}

// config is the Hub's jupyterhub_config.py.
func (h *Hub) config(hubAddr string) string {
	py := func(v any) string { b, _ := json.Marshal(v); return string(b) } // JSON strings and lists are Python literals
	users := append([]string{NoAccessUser}, Users...)
	return strings.Join([]string{
		`c.JupyterHub.authenticator_class = "jupyterhub.auth.DummyAuthenticator"`,
		`c.Authenticator.allowed_users = set(` + py(users) + `)`,
		`c.JupyterHub.bind_url = ` + py(h.ProxyURL),
		`c.JupyterHub.hub_bind_url = ` + py("http://"+hubAddr),
		`c.ConfigurableHTTPProxy.api_url = ` + py(h.proxyAPI),
		`c.ConfigurableHTTPProxy.auth_token = ` + py(h.proxyKey),
		`c.ConfigurableHTTPProxy.should_start = True`,
		`c.JupyterHub.db_url = "sqlite:///jupyterhub.sqlite"`,
		`c.JupyterHub.cookie_secret_file = "jupyterhub_cookie_secret"`,
		`c.JupyterHub.pid_file = "jupyterhub.pid"`,
		`c.JupyterHub.cleanup_servers = True`,
		`c.ConfigurableHTTPProxy.command = [` + py(Proxy()) + `]`,
		// Users' servers: the stack's jupyterhub-singleuser as the test's user (root on
		// CI), each in its home, with jupytertest's short collaboration delays.
		`c.JupyterHub.spawner_class = "jupyterhub.spawner.SimpleLocalProcessSpawner"`,
		`c.SimpleLocalProcessSpawner.home_dir_template = ` + py(filepath.Join(h.Homes, "{username}")),
		`c.Spawner.cmd = [` + py(h.python) + `, "-m", "jupyterhub.singleuser"]`,
		`c.Spawner.args = ["--allow-root", "--YDocExtension.document_cleanup_delay=5", "--YDocExtension.document_save_delay=0.5"]`,
		`c.JupyterHub.tornado_settings = {"slow_spawn_timeout": 0}`, // POST …/server answers at once; Spawn waits for ready
		`c.Spawner.start_timeout = ` + fmt.Sprint(int(spawnTimeout.Seconds())),
		`c.Spawner.http_timeout = ` + fmt.Sprint(int(spawnTimeout.Seconds())),
		`c.JupyterHub.services = [{"name": ` + py(ServiceName) + `, "url": ` + py(h.ServiceURL) +
			`, "api_token": ` + py(h.ServiceToken) + `, "timeout": ` + fmt.Sprint(int(serviceProbe.Seconds())) + `}]`,
		`c.JupyterHub.load_groups = {` + py(AccessGroup) + `: []}`,
		`c.JupyterHub.load_roles = [`,
		`    {"name": "mcp-users", "scopes": [` + py(AccessScope) + `], "users": ` + py(Users) + `, "groups": [` + py(AccessGroup) + `]},`,
		`    {"name": "mcp-service", "scopes": ["tokens", "admin:users", "admin:groups", "servers", "admin:server_state"], "services": [` + py(ServiceName) + `]},`,
		`]`,
		``,
	}, "\n")
}

// waitReady polls until the Hub's API answers and the proxy routes /services/mcp/.
func (h *Hub) waitReady() error {
	var last error
	exited := false
	if testenv.Within(startTimeout, func() bool {
		select {
		case <-h.done:
			exited = true
			return true
		default:
		}
		last = h.ping()
		return last == nil
	}) != nil {
		return last
	}
	if exited {
		return errExited
	}
	return nil
}

func (h *Hub) ping() error {
	if _, err := h.call(http.MethodGet, h.APIURL+"/", "", nil, http.StatusOK); err != nil {
		return err
	}
	body, err := h.call(http.MethodGet, h.proxyAPI+"/api/routes", "token "+h.proxyKey, nil, http.StatusOK)
	if err != nil {
		return err
	}
	var routes map[string]any
	if err := json.Unmarshal(body, &routes); err != nil {
		return fmt.Errorf("proxy routes: %w", err)
	}
	if _, ok := routes["/services/"+ServiceName]; !ok {
		return fmt.Errorf("proxy has no route for /services/%s yet", ServiceName)
	}
	return nil
}

// ServicePrefix is the service's URL through the proxy: ProxyURL + /services/mcp/.
func (h *Hub) ServicePrefix() string { return h.ProxyURL + "/services/" + ServiceName + "/" }

// Token creates an API token for user with the service's token, through the Hub's API.
func (h *Hub) Token(user string) Token {
	h.t.Helper()
	body, err := h.call(http.MethodPost, h.APIURL+"/users/"+url.PathEscape(user)+"/tokens", "token "+h.ServiceToken,
		map[string]any{"note": "jhubtest"}, http.StatusCreated, http.StatusOK)
	if err != nil {
		h.t.Fatalf("create token for %s: %v", user, err)
	}
	var tok struct{ ID, Token string }
	if err := json.Unmarshal(body, &tok); err != nil || tok.ID == "" || tok.Token == "" {
		h.t.Fatalf("create token for %s: answer %s: %v", user, body, err)
	}
	return Token{User: user, ID: tok.ID, Value: tok.Token}
}

// AddUsers creates Hub users who may use the service (members of AccessGroup), through
// the Hub's API with the service's token, in one request each for the users and the group.
func (h *Hub) AddUsers(names ...string) {
	h.t.Helper()
	if _, err := h.call(http.MethodPost, h.APIURL+"/users", "token "+h.ServiceToken,
		map[string]any{"usernames": names}, http.StatusCreated); err != nil {
		h.t.Fatalf("create %d users: %v", len(names), err)
	}
	if _, err := h.call(http.MethodPost, h.APIURL+"/groups/"+url.PathEscape(AccessGroup)+"/users", "token "+h.ServiceToken,
		map[string]any{"users": names}, http.StatusOK); err != nil {
		h.t.Fatalf("add %d users to %s: %v", len(names), AccessGroup, err)
	}
}

// UserURL is user's server through the proxy, e.g. http://127.0.0.1:40001/user/alice
// (no trailing slash).
func (h *Hub) UserURL(user string) string { return h.ProxyURL + "/user/" + url.PathEscape(user) }

// Spawn starts user's server through the Hub's API with the service's token, waits until
// the Hub reports it ready, and returns its URL through the proxy (UserURL). Its home,
// Homes/{user}, is created if missing; write notebooks there before Spawn to have them
// served. The server stops with the Hub.
func (h *Hub) Spawn(user string) string {
	h.t.Helper()
	if _, err := h.call(http.MethodPost, h.APIURL+"/users/"+url.PathEscape(user)+"/server", "token "+h.ServiceToken,
		nil, http.StatusCreated, http.StatusAccepted); err != nil {
		h.t.Fatalf("start %s's server: %v", user, err)
	}
	var model struct {
		Servers map[string]struct {
			Ready bool
			State struct{ PID int }
		}
	}
	var last error
	if testenv.Within(spawnTimeout, func() bool {
		body, err := h.call(http.MethodGet, h.APIURL+"/users/"+url.PathEscape(user), "token "+h.ServiceToken, nil, http.StatusOK)
		if last = err; err != nil {
			return false
		}
		if last = json.Unmarshal(body, &model); last != nil {
			return false
		}
		return model.Servers[""].Ready
	}) != nil {
		h.t.Fatalf("%s's server not ready within %v: %v\n%s", user, spawnTimeout, last, h.Log())
	}
	if pid := model.Servers[""].State.PID; pid > 0 {
		h.spawned = append(h.spawned, pid)
	}
	return h.UserURL(user)
}

// Revoke deletes a user token through the Hub's API.
func (h *Hub) Revoke(tok Token) {
	h.t.Helper()
	if _, err := h.call(http.MethodDelete, h.APIURL+"/users/"+url.PathEscape(tok.User)+"/tokens/"+url.PathEscape(tok.ID),
		"token "+h.ServiceToken, nil, http.StatusNoContent, http.StatusOK); err != nil {
		h.t.Fatalf("revoke token %s of %s: %v", tok.ID, tok.User, err)
	}
}

// Route has the proxy send prefix (e.g. /pages/, path kept) to target (e.g.
// http://127.0.0.1:41235), through the proxy's own API: a page there has the Hub's
// origin, as another user's server has on a Hub without subdomains. The Hub leaves
// routes it did not make alone.
func (h *Hub) Route(prefix, target string) {
	h.t.Helper()
	if _, err := h.call(http.MethodPost, h.proxyAPI+"/api/routes"+prefix, "token "+h.proxyKey, map[string]string{"target": target},
		http.StatusCreated, http.StatusOK); err != nil {
		h.t.Fatalf("proxy route %s: %v", prefix, err)
	}
}

// Stop ends the Hub and its proxy (SIGTERM, then SIGKILL to their process group after
// 10 s) and waits for them. Stopping twice is a no-op.
func (h *Hub) Stop() {
	select {
	case <-h.done:
	default:
		_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
			<-h.done
		}
	}
	// What outlived the Hub (it stops them on SIGTERM, not when killed): its group; the
	// proxy, which JupyterHub starts in a session of its own (start_new_session); a
	// user's server, which leads one too, kernels included.
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	if pid := h.proxyPID(); pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	for _, pid := range h.spawned {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	h.spawned = nil
}

// ProxyPIDFile is the file, in Dir, where the Hub writes its proxy's process id.
const ProxyPIDFile = "jupyterhub-proxy.pid"

// proxyPID is the process id in ProxyPIDFile while that process is still this Hub's
// proxy (its command line names this Hub's proxy API port), else 0: a pid the system
// has since given to another process is never signalled.
func (h *Hub) proxyPID() int {
	b, err := os.ReadFile(filepath.Join(h.Dir, ProxyPIDFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	u, uerr := url.Parse(h.proxyAPI)
	if err != nil || uerr != nil || !bytes.Contains(cmdline, []byte("--api-port\x00"+u.Port()+"\x00")) {
		return 0
	}
	return pid
}

// Log returns what the Hub and its proxy wrote so far.
func (h *Hub) Log() string {
	b, _ := os.ReadFile(filepath.Join(h.Dir, "hub.log"))
	return string(b)
}

// call makes one request with an optional Authorization header and JSON body,
// and returns the body when the status is one of want.
func (h *Hub) call(method, u, authz string, body any, want ...int) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	for _, w := range want {
		if resp.StatusCode == w {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%s %s: status %d: %s", method, u, resp.StatusCode, b)
}

func randomHex(t testing.TB) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}
