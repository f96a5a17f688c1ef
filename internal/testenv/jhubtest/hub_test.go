package jhubtest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
	_ "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/hubauth" // registers the "jupyterhub" verifier
)

// whoami answers 200 with the admitted principal's user name.
var whoami = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	p, _ := auth.PrincipalFrom(r.Context())
	_, _ = w.Write([]byte(p.User))
})

// get sends one request with an Authorization header (and header name, value
// pairs) and returns status and body.
func get(t *testing.T, url, authz string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b [256]byte
	n, _ := resp.Body.Read(b[:])
	return resp.StatusCode, string(b[:n])
}

// TestJupyterHubVerifier checks the "jupyterhub" verifier against a real Hub: users
// admitted by name with either scheme, a user without the access scope and unknown
// tokens refused, a revoked token refused within the cache TTL, a stopped Hub 503.
func TestJupyterHubVerifier(t *testing.T) {
	hub := jhubtest.Start(t, "http://"+testenv.FreeAddr(t))
	const ttl = time.Second
	reg := prometheus.NewPedanticRegistry()
	v, err := auth.New("jupyterhub", auth.Settings{Registerer: reg, Options: map[string]any{
		"api_url": hub.APIURL, "service_name": jhubtest.ServiceName, "token_cache_ttl": ttl.String(), "timeout": "2s",
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(auth.RequireBearer(v, whoami))
	defer srv.Close()

	alice, bob, carol := hub.Token("alice"), hub.Token("bob"), hub.Token(jhubtest.NoAccessUser)
	tests := []struct {
		name, authz string
		status      int
		user        string
	}{
		{"alice bearer", "Bearer " + alice.Value, http.StatusOK, "alice"},
		{"alice token scheme", "token " + alice.Value, http.StatusOK, "alice"},
		{"bob", "token " + bob.Value, http.StatusOK, "bob"},
		{"carol without the access scope", "token " + carol.Value, http.StatusUnauthorized, ""},
		{"unknown token", "token 0123456789abcdef0123456789abcdef", http.StatusUnauthorized, ""},
		{"service token (not a user)", "token " + hub.ServiceToken, http.StatusUnauthorized, ""},
		{"no token", "", http.StatusUnauthorized, ""},
	}
	for _, tt := range tests {
		status, body := get(t, srv.URL, tt.authz)
		if status != tt.status || (status == http.StatusOK && body != tt.user) {
			t.Errorf("%s: %d %q, want %d %q", tt.name, status, body, tt.status, tt.user)
		}
	}
	if hits := testenv.Sum(testenv.Gather(t, reg), "jupyter_mcp_sidecar_auth_jupyterhub_cache_total", "result", "hit"); hits < 1 {
		t.Errorf("cache hits = %v, want ≥ 1 (alice's second request)", hits)
	}
	if n, err := promtestutil.GatherAndCount(reg); err != nil || n == 0 {
		t.Errorf("metrics: %d, %v", n, err)
	}

	// Revoked: refused within the TTL of its last admitted answer.
	if status, _ := get(t, srv.URL, "token "+alice.Value); status != http.StatusOK {
		t.Fatalf("alice before revoke: %d", status)
	}
	cachedAt := time.Now()
	hub.Revoke(alice)
	// The property is when an admitted request was sent, not when its answer came back
	// on a loaded machine: none sent more than the TTL (and a second's margin) after the
	// answer was cached is admitted.
	testenv.Eventually(t, testenv.Wait, "the revoked token refused", func() bool {
		sent := time.Now()
		status, _ := get(t, srv.URL, "token "+alice.Value)
		switch {
		case status == http.StatusUnauthorized:
			return true
		case status != http.StatusOK:
			t.Fatalf("revoked token: status %d", status)
		case sent.Sub(cachedAt) > ttl+time.Second:
			t.Fatalf("revoked token still admitted on a request sent %v after it was cached (TTL %v)", sent.Sub(cachedAt), ttl)
		}
		return false
	})
	t.Logf("revoked token refused %v after its answer was cached (TTL %v)", time.Since(cachedAt).Round(time.Millisecond), ttl)

	// Concurrent requests with a token not yet cached make one Hub call.
	bob2 := hub.Token("bob") // a second token of bob's, never verified yet
	lookups := func() float64 {
		return testenv.Sum(testenv.Gather(t, reg), "jupyter_mcp_sidecar_auth_jupyterhub_lookup_seconds_count")
	}
	before := lookups()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if p, err := v.Verify(t.Context(), bob2.Value); err != nil || p.User != "bob" {
				t.Errorf("concurrent Verify = %+v, %v", p, err)
			}
		})
	}
	wg.Wait()
	if n := lookups() - before; n != 1 {
		t.Errorf("20 concurrent requests with one token made %v Hub calls, want 1", n)
	}

	// A stopped Hub: answers cached before still hold for their TTL (here a long
	// one); a token not in the cache cannot be decided, and is not admitted.
	long, err := auth.New("jupyterhub", auth.Settings{Options: map[string]any{
		"api_url": hub.APIURL, "service_name": jhubtest.ServiceName, "token_cache_ttl": "1h",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := long.Verify(t.Context(), bob.Value); err != nil || p.User != "bob" {
		t.Fatalf("bob before the stop: %+v, %v", p, err)
	}
	hub.Stop()
	if p, err := long.Verify(t.Context(), bob.Value); err != nil || p.User != "bob" {
		t.Errorf("bob's cached answer with the Hub stopped: %+v, %v", p, err)
	}
	time.Sleep(ttl) // every answer of the 1 s verifier expires: elapsing time, not a wait
	for _, tok := range []jhubtest.Token{bob, carol} {
		if status, _ := get(t, srv.URL, "token "+tok.Value); status != http.StatusServiceUnavailable {
			t.Errorf("%s with the Hub stopped: %d, want 503", tok.User, status)
		}
	}
	if e := testenv.Sum(testenv.Gather(t, reg), "jupyter_mcp_sidecar_auth_jupyterhub_hub_errors_total", "kind", "network"); e < 2 {
		t.Errorf("hub network errors = %v, want ≥ 2", e)
	}
}

// TestProxyForwardsService checks that the Hub's proxy forwards /services/mcp/… to the
// service URL with the prefix kept and the Authorization header as the client sent it.
func TestProxyForwardsService(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	type seen struct{ uri, authz string }
	got := make(chan seen, 10)
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test") == t.Name() { // not the Hub's own probe of the service at start
			got <- seen{r.URL.RequestURI(), r.Header.Get("Authorization")}
		}
		w.WriteHeader(http.StatusTeapot)
	})}}
	srv.Start()
	defer srv.Close()
	hub := jhubtest.Start(t, srv.URL)

	for _, tt := range []struct{ path, authz string }{
		{"mcp", "Bearer abc123"},
		{"mcp?x=1", "token def456"},
		{"healthz", ""},
	} {
		status, _ := get(t, hub.ServicePrefix()+tt.path, tt.authz, "X-Test", t.Name())
		if status != http.StatusTeapot {
			t.Fatalf("GET %s through the proxy: %d, want the service's 418", tt.path, status)
		}
		s := <-got
		if want := "/services/" + jhubtest.ServiceName + "/" + tt.path; s.uri != want || s.authz != tt.authz {
			t.Errorf("service saw %q with Authorization %q, want %q with %q", s.uri, s.authz, want, tt.authz)
		}
	}
}

// TestPrincipalInMCPHandlers checks the seam hub mode builds on: an mcp-go Streamable
// HTTP server behind auth.RequireBearer, reached through the Hub's proxy at
// /services/mcp/mcp with each user's token, sees the user in its tool handlers'
// context (auth.PrincipalFrom) in both protocol eras.
func TestPrincipalInMCPHandlers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Serving before the Hub starts: the Hub waits for its probe of the service URL.
	var handler atomic.Pointer[http.Handler]
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := handler.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "starting", http.StatusServiceUnavailable)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	hub := jhubtest.Start(t, "http://"+ln.Addr().String())
	v, err := auth.New("jupyterhub", auth.Settings{Options: map[string]any{"api_url": hub.APIURL, "service_name": jhubtest.ServiceName}})
	if err != nil {
		t.Fatal(err)
	}
	m := server.NewMCPServer("jhubtest", "1", server.WithToolCapabilities(false))
	m.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, ok := auth.PrincipalFrom(ctx)
		if !ok {
			return mcp.NewToolResultError("no principal in the handler's context"), nil
		}
		return mcp.NewToolResultText(p.User), nil
	})
	endpoint := "/services/" + jhubtest.ServiceName + "/mcp"
	var h http.Handler = auth.RequireBearer(v, server.NewStreamableHTTPServer(m, server.WithEndpointPath(endpoint)))
	handler.Store(&h)

	tokens := map[string]jhubtest.Token{}
	for _, u := range append([]string{jhubtest.NoAccessUser}, jhubtest.Users...) {
		tokens[u] = hub.Token(u)
	}
	for _, era := range []string{mcp.ProtocolVersion20251125, mcp.ProtocolVersion20260728} {
		for user, tok := range tokens {
			t.Run(era+"/"+user, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				tr, err := transport.NewStreamableHTTP(hub.ProxyURL+endpoint,
					transport.WithHTTPHeaders(map[string]string{"Authorization": "token " + tok.Value}))
				if err != nil {
					t.Fatal(err)
				}
				c := client.NewClient(tr, client.WithProtocolVersion(era))
				defer c.Close()
				if err := c.Start(ctx); err != nil {
					t.Fatal(err)
				}
				init := mcp.InitializeRequest{}
				init.Params.ClientInfo = mcp.Implementation{Name: "jhubtest", Version: "1"}
				_, err = c.Initialize(ctx, init)
				if user == jhubtest.NoAccessUser {
					if !errors.Is(err, transport.ErrAuthorizationRequired) {
						t.Fatalf("initialize without the access scope: %v, want the client's answer to a 401", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				req := mcp.CallToolRequest{}
				req.Params.Name = "whoami"
				res, err := c.CallTool(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if text := res.Content[0].(mcp.TextContent).Text; res.IsError || text != user {
					t.Fatalf("whoami = %q (error %v), want %q", text, res.IsError, user)
				}
			})
		}
	}
}

// TestAddUsers checks that users added through the Hub's API may use the service: their
// tokens are admitted under their own names.
func TestAddUsers(t *testing.T) {
	hub := jhubtest.Start(t, "http://"+testenv.FreeAddr(t))
	v, err := auth.New("jupyterhub", auth.Settings{Options: map[string]any{
		"api_url": hub.APIURL, "service_name": jhubtest.ServiceName,
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(auth.RequireBearer(v, whoami))
	defer srv.Close()
	added := []string{"user-0001", "user-0002", "user-0003"}
	hub.AddUsers(added...)
	for _, name := range added {
		if status, body := get(t, srv.URL, "token "+hub.Token(name).Value); status != http.StatusOK || body != name {
			t.Errorf("%s: %d %q, want 200 %q", name, status, body, name)
		}
	}
}

// TestSpawn checks the users' real servers: each user's server, started through the
// Hub, serves its user's notebook to a collaboration client with that user's token,
// writes its Y-store and file id database where the hub-mode store templates look
// (Homes/{username}/StoreFile and FileIDFile), and refuses the other user's token.
func TestSpawn(t *testing.T) {
	hub := jhubtest.Start(t, "http://"+testenv.FreeAddr(t))
	tokens := map[string]jhubtest.Token{}
	for _, u := range jhubtest.Users {
		nb := filepath.Join(hub.Homes, u, "work", "analysis.ipynb")
		if err := os.MkdirAll(filepath.Dir(nb), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(nb, []byte(jupytertest.NotebookJSON([2]string{"c1", "print('" + u + "')"})), 0o644); err != nil {
			t.Fatal(err)
		}
		tokens[u] = hub.Token(u)
	}
	for _, u := range jhubtest.Users {
		srv := hub.Spawn(u)
		c := jupytertest.Connect(t, srv, tokens[u].Value)
		c.Do(map[string]any{"op": "join", "path": "work/analysis.ipynb"})
		c.Do(map[string]any{"op": "type", "path": "work/analysis.ipynb", "index": 0, "text": "\n# edited"})
		if got := string(c.Notebook("a", "work/analysis.ipynb")); !strings.Contains(got, "print('"+u+"')\\n# edited") {
			t.Fatalf("%s's notebook through their server: %s", u, got)
		}
		for _, f := range []string{jhubtest.StoreFile, jhubtest.FileIDFile} {
			testenv.Eventually(t, testenv.Wait, u+"'s "+f, func() bool {
				_, err := os.Stat(filepath.Join(hub.Homes, u, f))
				return err == nil
			})
		}
	}
	// Alice's token on bob's server.
	if status, _ := get(t, hub.UserURL("bob")+"/api/contents/work", "token "+tokens["alice"].Value); status != http.StatusForbidden {
		t.Errorf("alice's token on bob's server: %d, want 403", status)
	}
	if status, _ := get(t, hub.UserURL("bob")+"/api/contents/work", "token "+tokens["bob"].Value); status != http.StatusOK {
		t.Errorf("bob's token on bob's server: %d, want 200", status)
	}
}

// TestStopEndsTheProxyOfAKilledHub kills the Hub alone, as Stop does to a Hub that has
// not exited 10 s after SIGTERM: JupyterHub starts its proxy in a session of its own, so
// only Stop's pid-file step ends it (a CI run under load left one running).
func TestStopEndsTheProxyOfAKilledHub(t *testing.T) {
	hub := jhubtest.Start(t, "http://"+testenv.FreeAddr(t))
	pid := func(file string) int {
		b, err := os.ReadFile(filepath.Join(hub.Dir, file))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	hubPID, proxyPID := pid("jupyterhub.pid"), pid(jhubtest.ProxyPIDFile)
	if err := syscall.Kill(hubPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	hub.Stop()
	testenv.Eventually(t, testenv.Wait, fmt.Sprintf("the proxy (pid %d) ended", proxyPID), func() bool {
		// It is not this process's child: once killed, init reaps it.
		return syscall.Kill(proxyPID, 0) == syscall.ESRCH
	})
}
