package mcp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/conns"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// rawConn opens a TCP connection to addr, closed at the end of the test.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// tryKeepAliveGet sends GET path on c and reads its response, leaving c open; the error
// is that of a connection the server closed.
func tryKeepAliveGet(c net.Conn, path string) (int, error) {
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: sidecar\r\n\r\n"); err != nil {
		return 0, err
	}
	_ = c.SetReadDeadline(time.Now().Add(testenv.Wait))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	ne, ok := err.(net.Error)
	return !ok || !ne.Timeout()
}

// TestConnectionLimits runs the binary with small connection limits: idle keep-alive
// connections, slow headers and slow bodies are closed, anonymous connections beyond
// their budget close the oldest idle one, counted, and live streams of both eras
// outlive every timeout and still deliver.
func TestConnectionLimits(t *testing.T) {
	const maxConns = 20
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_MAX_CONNECTIONS", "20")
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_IDLE_TIMEOUT", "2s")
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_READ_TIMEOUT", "1s")
	steps := sidecartest.Session(t)
	dir := t.TempDir()
	w := sidecartest.StartPreloaded(t, filepath.Join(dir, ".jupyter_ystore.db"), steps)
	sc := sidecartest.StartSidecar(t, dir, sidecartest.Options{Debounce: -1})
	sc.WaitHTTP("/readyz", http.StatusOK)
	http.DefaultClient.CloseIdleConnections()

	t.Run("idle connections and the cap", func(t *testing.T) {
		capAndIdle(t, strings.TrimPrefix(sc.URL, "http://"), maxConns, "mcp", sc.URL+"/metrics")
	})

	t.Run("slow header and slow body are cut", func(t *testing.T) {
		for name, partial := range map[string]string{
			"header": "GET /healthz HTTP/1.1\r\nHost: sidecar\r\n",
			"body": "POST /mcp HTTP/1.1\r\nHost: sidecar\r\nAuthorization: Bearer " + sidecartest.Token +
				"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":",
		} {
			c := rawConn(t, strings.TrimPrefix(sc.URL, "http://"))
			if _, err := io.WriteString(c, partial); err != nil {
				t.Fatal(err)
			}
			// A property: read_timeout (1 s) and a 2 s scheduling margin.
			if !closedWithin(c, 3*time.Second) {
				t.Fatalf("a slow %s held its connection 3 s (read_timeout 1s)", name)
			}
		}
	})

	t.Run("streams outlive the timeouts", func(t *testing.T) {
		cs := []sidecartest.MCPClient{sidecartest.DialRaw(t, sc.MCPURL()), sidecartest.DialGo(t, sc.MCPURL(), false), sidecartest.DialGo(t, sc.MCPURL(), true)}
		for _, c := range cs {
			c.Bind(sidecartest.NbName, sidecartest.NbPath)
			c.Subscribe(sidecartest.NbURI)
		}
		// The streams stay open past idle_timeout and read_timeout: elapsing time, not a wait.
		time.Sleep(3500 * time.Millisecond)
		for _, c := range cs {
			sidecartest.Drain(c, 100*time.Millisecond)
		}
		i, _ := sidecartest.ChangedCell(steps, sidecartest.Preloaded)
		for _, s := range steps[sidecartest.Preloaded : i+1] {
			w.Write(s.Update)
		}
		for _, c := range cs {
			sidecartest.Await(t, c, testenv.Wait, sidecartest.NbURI)
		}
	})
}

// capAndIdle checks the anonymous' budget of a listener whose principals hold max
// connections: of twice the budget (conns.AnonymousShare) of keep-alive probe
// connections opened one after the other, each is served, and the first half are
// closed for the second (the oldest idle anonymous connection is closed for a new
// one), counted in the metrics at metricsURL for the listener as reason anonymous;
// the second half are closed once idle (read_timeout 1s or idle_timeout 2s, the
// shorter).
func capAndIdle(t *testing.T, addr string, max int, listener, metricsURL string) {
	t.Helper()
	const name = "jupyter_mcp_sidecar_http_connections_refused_total"
	budget := conns.AnonymousShare(max)
	refused := func() float64 {
		return testenv.Sum(testenv.Scrape(t, metricsURL), name, "listener", listener, "reason", conns.ReasonAnonymous)
	}
	before := refused()
	http.DefaultClient.CloseIdleConnections()
	held := make([]net.Conn, 2*budget)
	for i := range held {
		held[i] = rawConn(t, addr)
		if code, err := tryKeepAliveGet(held[i], "/healthz"); err != nil || code != http.StatusOK {
			t.Fatalf("probe connection %d: %d, %v", i, code, err)
		}
	}
	for i, c := range held[:budget] {
		if !closedWithin(c, testenv.Wait) {
			t.Fatalf("anonymous connection %d stayed open with %d newer ones (the budget: %d)", i, budget, budget)
		}
	}
	// Properties: the newer half closed once idle (a 2 s scheduling margin).
	for i, c := range held[budget:] {
		if !closedWithin(c, 3*time.Second) {
			t.Fatalf("idle anonymous connection %d still open 3 s after its response", budget+i)
		}
	}
	if got := refused() - before; got < float64(budget) {
		t.Fatalf("%s{listener=%q,reason=anonymous} rose by %v, want at least %d", name, listener, got, budget)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestMetricsListenerLimits: the separate metrics listener has the same limits.
func TestMetricsListenerLimits(t *testing.T) {
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	extra := fmt.Sprintf("server: {listen: 127.0.0.1:%d, insecure_no_auth: true, metrics_listen: %q, max_connections: 5, idle_timeout: 2s, read_timeout: 1s}\n",
		testenv.FreePort(t), addr)
	// With a metrics listener, the probes are there: Start waits for its /healthz.
	sidecartest.Start(t, dir, "http://"+addr, fmt.Sprintf("store: {sqlite: {path: %q}}\n%s", filepath.Join(dir, "store.db"), extra), "serve")
	capAndIdle(t, addr, 5, "metrics", "http://"+addr+"/metrics")
}

// TestBindingLimits: use_notebook refuses, with a short clear error, paths that are
// no notebook path and bindings beyond server.limits.max_names and max_path_bytes;
// the refusals are counted and the state file stays small.
func TestBindingLimits(t *testing.T) {
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_LIMITS_MAX_NAMES", "3")
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_LIMITS_MAX_PATH_BYTES", "64")
	dir := t.TempDir()
	sc := sidecartest.StartSidecar(t, dir, sidecartest.Options{})
	c := sidecartest.DialRaw(t, sc.MCPURL())
	bind := func(name, path string) (string, bool) {
		return c.CallTool("use_notebook", map[string]any{"notebook_name": name, "notebook_path": path})
	}
	for _, name := range []string{"a", "b", "c"} {
		if msg, isErr := bind(name, name+".ipynb"); isErr {
			t.Fatalf("bind %s: %s", name, msg)
		}
	}
	refusals := []struct{ name, path, want string }{
		{"d", "d.ipynb", "limit"},                             // a fourth name
		{"a", strings.Repeat("x", 1<<20) + ".ipynb", "limit"}, // 1 MiB path
		{"a", strings.Repeat("x", 59) + ".ipynb", "limit"},    // 65 bytes
		{"a", "/etc/passwd", "relative"},
		{"a", "notes.txt", "not a notebook"},
		{"a", "../../etc/x.ipynb", "escapes"},
		{"a", "a\x00.ipynb", "control character"},
	}
	for _, r := range refusals {
		msg, isErr := bind(r.name, r.path)
		if !isErr || !strings.Contains(msg, r.want) || len(msg) > 300 {
			t.Errorf("bind %s to %.30q: isError %v, %q; want a short error saying %q", r.name, r.path, isErr, msg, r.want)
		}
	}
	if msg, isErr := bind("a", strings.Repeat("y", 58)+".ipynb"); isErr { // 64 bytes: fits
		t.Fatalf("a 64-byte path: %s", msg)
	}
	const refusalsTotal = "jupyter_mcp_sidecar_mcp_limit_refusals_total"
	for limit, want := range map[string]float64{"names": 1, "path_bytes": 2, "not_a_notebook_path": 4} {
		if got := sc.Metric(refusalsTotal, "limit", limit); got != want {
			t.Errorf("%s{limit=%q} = %v, want %v", refusalsTotal, limit, got, want)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "names.json")); err != nil || st.Size() > 1024 {
		t.Errorf("state file: %v, %v bytes", err, st.Size())
	}
}

// TestStateFile: a corrupt state file is moved aside and reported, never overwritten;
// a failed save tells the client no server path; an unusable state file stops serve
// at start with a clear error.
func TestStateFile(t *testing.T) {
	t.Run("corrupt file is moved aside", func(t *testing.T) {
		dir := t.TempDir()
		state := filepath.Join(dir, "names.json")
		corrupt := `{"version":1,"notebooks":{"kept":"work/kept.ipynb",`
		if err := os.WriteFile(state, []byte(corrupt), 0o600); err != nil {
			t.Fatal(err)
		}
		sc := sidecartest.StartSidecar(t, dir, sidecartest.Options{})
		c := sidecartest.DialRaw(t, sc.MCPURL())
		c.Bind("new", "new.ipynb")
		aside, _ := filepath.Glob(state + ".corrupt-*")
		if len(aside) != 1 {
			t.Fatalf("moved aside: %v", aside)
		}
		if got, _ := os.ReadFile(aside[0]); string(got) != corrupt {
			t.Fatalf("%s holds %q, want the corrupt file", aside[0], got)
		}
		logs := sc.Logs.String()
		if !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, filepath.Base(aside[0])) {
			t.Fatalf("no error log naming %s:\n%s", aside[0], logs)
		}
	})

	t.Run("failed save names no server path", func(t *testing.T) {
		dir := t.TempDir()
		sc := sidecartest.StartSidecar(t, dir, sidecartest.Options{})
		c := sidecartest.DialRaw(t, sc.MCPURL())
		if err := os.Mkdir(filepath.Join(dir, "names.json"), 0o700); err != nil { // the save's rename fails
			t.Fatal(err)
		}
		msg, isErr := c.CallTool("use_notebook", map[string]any{"notebook_name": "a", "notebook_path": "a.ipynb"})
		if !isErr || !strings.Contains(msg, "could not be saved") || strings.Contains(msg, dir) {
			t.Fatalf("use_notebook with an unwritable state file: isError %v, %q", isErr, msg)
		}
	})

	t.Run("unusable file stops serve at start", func(t *testing.T) {
		extra := fmt.Sprintf("server: {listen: 127.0.0.1:%d, insecure_no_auth: true}\n", testenv.FreePort(t))
		out, err, exited := serveOnce(t, t.TempDir(), extra, nil, 15*time.Second, "--state-file", "/dev/full")
		if !exited {
			t.Fatalf("serve --state-file /dev/full still running after 15 s:\n%s", out)
		}
		if err == nil || !strings.Contains(out, "/dev/full") || !strings.Contains(out, "not a regular file") {
			t.Fatalf("serve --state-file /dev/full: %v\n%s", err, out)
		}
	})
}

// serveOnce writes a config for a store in dir plus extra YAML and runs serve with
// args, stdin from in, until it exits or within passes; it returns the output and
// whether it exited.
func serveOnce(t *testing.T, dir, extra string, in io.Reader, within time.Duration, args ...string) (string, error, bool) {
	t.Helper()
	cfg := filepath.Join(dir, "serve.yaml")
	body := fmt.Sprintf("store: {sqlite: {path: %q}}\n%s", filepath.Join(dir, "store.db"), extra)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, sidecartest.Binary, append([]string{"serve", "--config", cfg}, args...)...)
	cmd.Stdin = in
	out, err := cmd.CombinedOutput()
	return string(out), err, ctx.Err() == nil
}

// TestStdioExitsOnEOF: serve --transport stdio answers its client, then exits cleanly
// once the client closes stdin.
func TestStdioExitsOnEOF(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n")
	out, err, exited := serveOnce(t, t.TempDir(), "server: {transport: stdio}\n", in, 15*time.Second)
	if !exited {
		t.Fatalf("serve --transport stdio still running 15 s after its stdin closed:\n%s", out)
	}
	if err != nil || !strings.Contains(out, `"id":2`) || !strings.Contains(out, "use_notebook") {
		t.Fatalf("serve --transport stdio: %v\n%s", err, out)
	}
}

// TestBlankTokenRefused: serve refuses a token of white space only, as it refuses a
// token file of white space only, naming the key.
func TestBlankTokenRefused(t *testing.T) {
	extra := fmt.Sprintf("server: {listen: 127.0.0.1:%d, token: \"   \"}\n", testenv.FreePort(t))
	out, err, exited := serveOnce(t, t.TempDir(), extra, nil, 10*time.Second)
	if !exited {
		t.Fatalf("serve with server.token \"   \" still running after 10 s:\n%s", out)
	}
	if err == nil || !strings.Contains(out, "server.token: is only white space") {
		t.Fatalf("serve with server.token \"   \": %v\n%s", err, out)
	}
}

// TestCORS: with server.allowed_origins, a browser page of an allowed origin can use
// the endpoint: its preflight (no token) is answered with the methods and headers an
// MCP client sends, and responses expose Mcp-Session-Id. Other origins get none of it.
func TestCORS(t *testing.T) {
	const page = "https://hub.example.org"
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_ALLOWED_ORIGINS", page)
	sc := sidecartest.StartSidecar(t, t.TempDir(), sidecartest.Options{})
	do := func(method, body string, headers ...string) *http.Response { // headers: name, value, …
		req, _ := http.NewRequest(method, sc.MCPURL(), strings.NewReader(body))
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	preflight := func(origin string) *http.Response {
		return do(http.MethodOptions, "", "Origin", origin, "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "authorization,content-type,mcp-protocol-version,mcp-session-id")
	}
	resp := preflight(page)
	h := resp.Header
	if resp.StatusCode/100 != 2 || h.Get("Access-Control-Allow-Origin") != page {
		t.Fatalf("preflight from %s: %s %v", page, resp.Status, h)
	}
	for header, wants := range map[string][]string{
		"Access-Control-Allow-Methods": {"GET", "POST", "DELETE"},
		"Access-Control-Allow-Headers": {"Authorization", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID", "Mcp-Method"},
	} {
		for _, want := range wants {
			if !strings.Contains(h.Get(header), want) {
				t.Errorf("%s %q lacks %s", header, h.Get(header), want)
			}
		}
	}
	if resp := preflight("https://evil.example"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: %s %v", resp.Status, resp.Header)
	}

	post := do(http.MethodPost,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"browser","version":"1"}}}`,
		"Origin", page, "Authorization", "Bearer "+sidecartest.Token, "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	if post.StatusCode != http.StatusOK || post.Header.Get("Access-Control-Allow-Origin") != page ||
		!strings.Contains(post.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") || post.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize from %s: %s %v", page, post.Status, post.Header)
	}
}

// TestConfigCheckBuildsSeams: config check refuses what serve refuses, such as the
// withhold gate without its templates.
func TestConfigCheckBuildsSeams(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "check.yaml")
	if err := os.WriteFile(cfg, []byte("gate: {name: withhold}\nserver: {insecure_no_auth: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	checked, err := exec.Command(sidecartest.Binary, "config", "check", "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(checked), `option "templates"`) {
		t.Fatalf("config check of a withhold gate without templates: %v\n%s", err, checked)
	}
	out, err, exited := serveOnce(t, dir, "gate: {name: withhold}\nserver: {insecure_no_auth: true}\n", nil, 10*time.Second)
	if !exited || err == nil || !strings.Contains(out, `option "templates"`) {
		t.Fatalf("serve with a withhold gate without templates: exited %v, %v\n%s", exited, err, out)
	}
}

// TestHubFrontLimits: in hub mode the front listener answers CORS preflights before
// the Hub token check, and has the connection cap and idle timeout (counted as
// listener "hub"). No Hub is needed: neither asks it anything. The test's clients are
// not the Hub's proxy (hub.oauth.trusted_proxies names another address): their
// connections are anonymous until admitted, as any client's but the proxy's.
func TestHubFrontLimits(t *testing.T) {
	const page = "https://hub.example.org"
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_ALLOWED_ORIGINS", page)
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_MAX_CONNECTIONS", "10")
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_IDLE_TIMEOUT", "2s")
	root := t.TempDir()
	sc := sidecartest.Launch(t, root, fmt.Sprintf(`hub:
  enabled: true
  api_url: http://127.0.0.1:%d/hub/api
  service_name: mcp
  stores: {sqlite_path: %q, fileid_db: %q, root_dir: %q}
  state_dir: %q
  oauth: {trusted_proxies: [192.0.2.1/32]}
`, testenv.FreePort(t), filepath.Join(root, "{username}", "store.db"), filepath.Join(root, "{username}", "fileid.db"),
		filepath.Join(root, "{username}"), filepath.Join(root, "state")), "serve")
	req, _ := http.NewRequest(http.MethodOptions, sc.URL+"/services/mcp/mcp", nil)
	req.Header.Set("Origin", page)
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 || resp.Header.Get("Access-Control-Allow-Origin") != page ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight at the hub front: %s %v", resp.Status, resp.Header)
	}
	capAndIdle(t, strings.TrimPrefix(sc.URL, "http://"), 10, "hub", sc.URL+"/metrics")
}

// limitsServer is serve with insecure_no_auth and the given server.limits (YAML
// lines indented for the mapping), started by the one launcher and stopped at the end
// of the test.
type limitsServer struct {
	*sidecartest.Sidecar
	t *testing.T
}

func serveLimits(t *testing.T, limits string) *limitsServer {
	t.Helper()
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	cfg := fmt.Sprintf("store: {sqlite: {path: %q}}\nserver:\n  listen: %s\n  insecure_no_auth: true\n  state_file: %q\n  limits:\n%s",
		filepath.Join(dir, "store.db"), addr, filepath.Join(dir, "names.json"), limits)
	return &limitsServer{Sidecar: sidecartest.Start(t, dir, "http://"+addr, cfg, "serve"), t: t}
}

// send sends a request of a 2025-11-25 session (none for initialize) and returns
// the response with its body read.
func (s *limitsServer) send(method, session, body string) (*http.Response, string) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.MCPURL(), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (s *limitsServer) initialize() (*http.Response, string) {
	return s.send(http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
}

// sessions is the sessions gauge of the 2025-11-25 era.
func (s *limitsServer) sessions() float64 {
	s.t.Helper()
	return s.Metric(sessionsGauge, "era", "2025-11-25")
}

const sessionsGauge = `jupyter_mcp_sidecar_mcp_sessions`

// TestSessionLimit runs the binary with server.limits.max_sessions: the sessions up to
// it are opened, every initialize beyond it is refused with 503, Retry-After and a
// JSON-RPC error, counted, and leaves nothing behind (RSS stays flat over thousands of
// them); ending a session lets the next one in.
func TestSessionLimit(t *testing.T) {
	const maxSessions, refused = 20, 5000
	s := serveLimits(t, fmt.Sprintf("    max_sessions: %d\n", maxSessions))
	var sessions []string
	for i := range maxSessions {
		resp, _ := s.initialize()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize %d of %d: %s, session %q", i+1, maxSessions, resp.Status, resp.Header.Get("Mcp-Session-Id"))
		}
		sessions = append(sessions, resp.Header.Get("Mcp-Session-Id"))
	}
	if got := s.sessions(); got != maxSessions {
		t.Fatalf("%s = %v, want %d", sessionsGauge, got, maxSessions)
	}
	before := testenv.ProcStatus(t, s.Cmd.Process.Pid, "VmRSS")
	for i := range refused {
		resp, body := s.initialize()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Mcp-Session-Id") != "" ||
			!strings.Contains(body, `"code":-32011`) || !strings.Contains(body, "too many sessions") {
			t.Fatalf("initialize %d beyond max_sessions %d: %s, Retry-After %q, session %q: %s",
				i+1, maxSessions, resp.Status, resp.Header.Get("Retry-After"), resp.Header.Get("Mcp-Session-Id"), body)
		}
	}
	after := testenv.ProcStatus(t, s.Cmd.Process.Pid, "VmRSS")
	t.Logf("RSS %.1f MB with %d sessions, %.1f MB after %d refused initializes", before, maxSessions, after, refused)
	// Unbounded, each would hold about 13 kB: 65 MB.
	if after-before > 16 {
		t.Errorf("RSS grew %.1f MB over %d refused initializes", after-before, refused)
	}
	const refusals = "jupyter_mcp_sidecar_mcp_limit_refusals_total"
	if got, n := s.Metric(refusals, "limit", "sessions"), s.sessions(); got != refused || n != maxSessions {
		t.Fatalf("%s{limit=\"sessions\"} = %v, %s = %v; want %d, %d", refusals, got, sessionsGauge, n, refused, maxSessions)
	}
	if resp, _ := s.send(http.MethodDelete, sessions[0], ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %s", resp.Status)
	}
	if resp, _ := s.initialize(); resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize after a session ended: %s", resp.Status)
	}
}

// TestSessionIdleTimeout: with server.limits.session_idle_timeout, sessions left idle
// are ended (the sessions gauge drops to 0, their ids answer 404).
func TestSessionIdleTimeout(t *testing.T) {
	s := serveLimits(t, "    session_idle_timeout: 1s\n")
	var sessions []string
	for range 3 {
		resp, _ := s.initialize()
		sessions = append(sessions, resp.Header.Get("Mcp-Session-Id"))
	}
	if got := s.sessions(); got != 3 {
		t.Fatalf("%s = %v, want 3", sessionsGauge, got)
	}
	for deadline := time.Now().Add(15 * time.Second); s.sessions() != 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v 15 s into a 1 s session_idle_timeout", sessionsGauge, s.sessions())
		}
	}
	for _, id := range sessions {
		if resp, _ := s.send(http.MethodPost, id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); resp.StatusCode != http.StatusNotFound {
			t.Errorf("ping of an expired session: %s, want 404", resp.Status)
		}
	}
}
