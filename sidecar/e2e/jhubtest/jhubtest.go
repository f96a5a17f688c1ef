// Package jhubtest starts, for the tests of any package, a throwaway JupyterHub (the
// `jupyterhub` command, Debian's package or pip's, with configurable-http-proxy) on free
// loopback ports in a temporary directory: DummyAuthenticator, users alice and bob who
// may use the service "mcp" and carol who may not, and "mcp" as an external service
// whose URL the test gives. The service's API token may create and revoke user tokens
// and add more users who may use the service (AddUsers).
// Without jupyterhub the test is skipped, or fails on CI (CI=true), where .ci/run
// installs it.
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
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/testutil"
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

// nodePath is where Debian's node-* packages live; Debian's configurable-http-proxy
// finds its modules there only when NODE_PATH says so under another Node.js.
const nodePath = "/usr/share/nodejs"

// startTimeout bounds the Hub's start, proxy routes included.
const startTimeout = 60 * time.Second

// Hub is a running throwaway JupyterHub.
type Hub struct {
	Dir          string // its working directory: config, database, log (hub.log)
	ProxyURL     string // the public proxy, e.g. http://127.0.0.1:40001 (no trailing slash)
	APIURL       string // the Hub's REST API, e.g. http://127.0.0.1:40003/hub/api (JUPYTERHUB_API_URL)
	ServiceURL   string // where the proxy sends /services/mcp/ (as given to Start)
	ServiceToken string // the service's API token (JUPYTERHUB_API_TOKEN): role with "tokens"

	t        testing.TB
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
	proxyAPI string
	proxyKey string
}

// Token is a user's API token.
type Token struct {
	User  string
	ID    string // the Hub's token id, for Revoke
	Value string // what a client sends: Authorization: token <Value> (or Bearer)
}

// Available reports whether jupyterhub and configurable-http-proxy are on PATH.
func Available() error {
	for _, bin := range []string{"jupyterhub", "configurable-http-proxy"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found (apt-get install jupyterhub)", bin)
		}
	}
	return nil
}

// require skips the test without JupyterHub, or fails it on CI.
func require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v on CI; .ci/run installs it", err)
		}
		t.Skipf("%v; .ci/run installs it", err)
	}
}

// FreeAddr returns a loopback host:port nothing listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Start runs a Hub whose proxy sends /services/mcp/… to serviceURL (e.g.
// http://127.0.0.1:41234), waits until the Hub and the service's route are up, and stops
// it when the test ends. At start the Hub probes serviceURL: serve there before Start,
// or have nothing listen there yet; a listener that accepts without answering delays the
// start by the probe's timeout. A Hub that exits while starting (another process took
// one of its free ports) is started again on new ports, up to three times.
func Start(t testing.TB, serviceURL string) *Hub {
	t.Helper()
	require(t)
	var err error
	for range 3 {
		var h *Hub
		if h, err = start(t, serviceURL); err == nil {
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

func start(t testing.TB, serviceURL string) (*Hub, error) {
	h := &Hub{
		Dir: t.TempDir(), ServiceURL: strings.TrimRight(serviceURL, "/"), ServiceToken: randomHex(t),
		t: t, done: make(chan struct{}), proxyKey: randomHex(t),
	}
	hubAddr := FreeAddr(t)
	h.ProxyURL = "http://" + FreeAddr(t)
	h.proxyAPI = "http://" + FreeAddr(t)
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
	h.cmd = exec.Command("jupyterhub", "-f", cfg)
	h.cmd.Dir = h.Dir
	h.cmd.Env = append(os.Environ(), "NODE_PATH="+joinPath(nodePath, os.Getenv("NODE_PATH")))
	h.cmd.Stdout, h.cmd.Stderr = logf, logf
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the proxy is its child: stop both
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
		`c.JupyterHub.services = [{"name": ` + py(ServiceName) + `, "url": ` + py(h.ServiceURL) +
			`, "api_token": ` + py(h.ServiceToken) + `}]`,
		`c.JupyterHub.load_groups = {` + py(AccessGroup) + `: []}`,
		`c.JupyterHub.load_roles = [`,
		`    {"name": "mcp-users", "scopes": [` + py(AccessScope) + `], "users": ` + py(Users) + `, "groups": [` + py(AccessGroup) + `]},`,
		`    {"name": "mcp-service", "scopes": ["tokens", "admin:users", "admin:groups"], "services": [` + py(ServiceName) + `]},`,
		`]`,
		``,
	}, "\n")
}

// waitReady polls until the Hub's API answers and the proxy routes /services/mcp/.
func (h *Hub) waitReady() error {
	var last error
	exited := false
	if testutil.Within(startTimeout, func() bool {
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

// Revoke deletes a user token through the Hub's API.
func (h *Hub) Revoke(tok Token) {
	h.t.Helper()
	if _, err := h.call(http.MethodDelete, h.APIURL+"/users/"+url.PathEscape(tok.User)+"/tokens/"+url.PathEscape(tok.ID),
		"token "+h.ServiceToken, nil, http.StatusNoContent, http.StatusOK); err != nil {
		h.t.Fatalf("revoke token %s of %s: %v", tok.ID, tok.User, err)
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
	// A proxy that outlived the Hub is in the same group.
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
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

func joinPath(first, rest string) string {
	if rest == "" {
		return first
	}
	return first + string(os.PathListSeparator) + rest
}
