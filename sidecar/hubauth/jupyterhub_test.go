package hubauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
)

// The verifier, built by name as the front builds it, refuses a misspelt option through
// the one decoder, naming key and verifier.
func TestJupyterHubRefusesUnknownOptions(t *testing.T) {
	_, err := auth.New("jupyterhub", auth.Settings{Token: "t", Registerer: prometheus.NewRegistry(),
		Options: map[string]any{"api_url": "http://127.0.0.1:1/hub/api", "service_name": "mcp", "max_retry": 3}})
	if !errors.Is(err, option.ErrUnknown) || !strings.Contains(err.Error(), `"jupyterhub": max_retry: unknown key (known: `) {
		t.Fatalf("New = %v, want option.ErrUnknown naming \"jupyterhub\" and max_retry", err)
	}
}

func TestHubOptions(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{"api_url": "http://127.0.0.1:8081/hub/api", "service_name": "mcp"}
	}
	tests := []struct {
		name   string
		mutate func(map[string]any)
		want   HubOptions
		err    string
	}{
		{"defaults", func(map[string]any) {}, HubOptions{APIURL: "http://127.0.0.1:8081/hub/api", ServiceName: "mcp",
			TokenCacheTTL: DefaultTokenCacheTTL, CacheSize: DefaultCacheSize, Timeout: DefaultHubTimeout}, ""},
		{"typed and strings", func(m map[string]any) {
			m["token_cache_ttl"], m["cache_size"], m["timeout"] = "10s", 16, 2*time.Second
		}, HubOptions{APIURL: "http://127.0.0.1:8081/hub/api", ServiceName: "mcp",
			TokenCacheTTL: 10 * time.Second, CacheSize: 16, Timeout: 2 * time.Second}, ""},
		{"unknown key", func(m map[string]any) { m["ttl"] = "1s" }, HubOptions{}, `ttl: unknown key (known: api_url, cache_size, service_name, timeout, token_cache_ttl)`},
		{"bad duration", func(m map[string]any) { m["timeout"] = "soon" }, HubOptions{}, "timeout"},
		{"no api url", func(m map[string]any) { delete(m, "api_url") }, HubOptions{}, `api_url: must be the Hub's http(s) API URL, e.g. http://127.0.0.1:8081/hub/api, got ""`},
		{"api url scheme", func(m map[string]any) { m["api_url"] = "ftp://hub/api" }, HubOptions{}, `api_url: must be the Hub's http(s) API URL, e.g. http://127.0.0.1:8081/hub/api, got "ftp://hub/api"`},
		{"no service", func(m map[string]any) { delete(m, "service_name") }, HubOptions{}, `service_name: must be a JupyterHub service name (letters, digits, . _ -), got ""`},
		{"service not a name", func(m map[string]any) { m["service_name"] = "mcp/../x" }, HubOptions{}, `service_name: must be a JupyterHub service name (letters, digits, . _ -), got "mcp/../x"`},
		{"negative cache", func(m map[string]any) { m["cache_size"] = -1 }, HubOptions{}, "cache_size: must be >= 0 (0: the default), got -1"},
		{"negative timeout", func(m map[string]any) { m["timeout"] = "-1s" }, HubOptions{}, "timeout: must be >= 0 (0: the default), got -1s"},
		{"negative ttl", func(m map[string]any) { m["token_cache_ttl"] = "-1s" }, HubOptions{}, "token_cache_ttl: must be > 0, got -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			tt.mutate(m)
			var got HubOptions
			err := option.Decode(m, &got)
			if err == nil {
				got, err = got.withDefaults()
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("options = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestLRU(t *testing.T) {
	t0 := time.Unix(1000, 0)
	k := func(b byte) [32]byte { return [32]byte{b} }
	c := newLRU[int](2)
	c.put(k(1), 1, t0.Add(time.Minute))
	c.put(k(2), 2, t0.Add(time.Second))
	if v, ok := c.get(k(1), t0); !ok || v != 1 { // 1 becomes the most recent
		t.Fatalf("get(1) = %v, %v", v, ok)
	}
	c.put(k(3), 3, t0.Add(time.Minute)) // evicts 2, the least recently used
	steps := []struct {
		key  byte
		at   time.Duration
		want int
		ok   bool
	}{
		{2, 0, 0, false},
		{1, 0, 1, true},
		{3, 59 * time.Second, 3, true},
		{3, time.Minute, 0, false}, // expired exactly at its deadline
	}
	for _, s := range steps {
		if v, ok := c.get(k(s.key), t0.Add(s.at)); ok != s.ok || v != s.want {
			t.Errorf("get(%d) at +%v = %v, %v; want %v, %v", s.key, s.at, v, ok, s.want, s.ok)
		}
	}
	if c.len() != 1 {
		t.Fatalf("len = %d after expiry, want 1", c.len())
	}
	c.put(k(1), 10, t0.Add(time.Hour)) // update in place
	if v, ok := c.get(k(1), t0.Add(2*time.Minute)); !ok || v != 10 || c.len() != 1 {
		t.Fatalf("updated get(1) = %v, %v (len %d)", v, ok, c.len())
	}
}

// TestJupyterHubUndecided checks that answers the verifier cannot read as a
// verdict (an unreachable Hub, a server error, a redirect, not a user model)
// are ErrUnavailable, counted, and not cached. The real Hub's verdicts are
// tested in internal/testenv/jhubtest.
func TestJupyterHubUndecided(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + closed.Addr().String() + "/hub/api"
	_ = closed.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/500/user", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "oops", 500) })
	mux.HandleFunc("/302/user", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) })
	mux.HandleFunc("/html/user", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) })
	mux.HandleFunc("/slow/user", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	tests := []struct {
		name, apiURL, kind string
	}{
		{"hub down", deadURL, "network"},
		{"server error", srv.URL + "/500", "status"},
		{"redirect", srv.URL + "/302", "status"},
		{"not json", srv.URL + "/html", "decode"},
		{"timeout", srv.URL + "/slow", "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			v, err := auth.New("jupyterhub", auth.Settings{Registerer: reg, Options: map[string]any{
				"api_url": tt.apiURL, "service_name": "mcp", "timeout": "200ms",
			}})
			if err != nil {
				t.Fatal(err)
			}
			h := v.(*jupyterHub)
			for range 2 {
				if _, err := v.Verify(context.Background(), "t0k3n"); !errors.Is(err, auth.ErrUnavailable) {
					t.Fatalf("Verify = %v, want ErrUnavailable", err)
				}
			}
			if got := testutil.ToFloat64(h.metrics.errors.WithLabelValues(tt.kind)); got != 2 {
				t.Errorf("hub_errors_total{kind=%q} = %v, want 2", tt.kind, got)
			}
			if got := testutil.ToFloat64(h.metrics.cache.WithLabelValues("miss")); got != 2 {
				t.Errorf("cache misses = %v, want 2 (undecided answers are not cached)", got)
			}
			if h.good.len()+h.bad.len() != 0 {
				t.Errorf("undecided answer cached")
			}
		})
	}
}

func TestJupyterHubRejectsWithoutAsking(t *testing.T) {
	v, err := auth.New("jupyterhub", auth.Settings{Options: map[string]any{"api_url": "http://127.0.0.1:1/hub/api", "service_name": "mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"", strings.Repeat("x", maxTokenBytes+1)} {
		if _, err := v.Verify(context.Background(), tok); !errors.Is(err, auth.ErrUnauthorized) {
			t.Errorf("Verify(%d bytes) = %v, want ErrUnauthorized", len(tok), err)
		}
	}
}

func TestJupyterHubCallerGivesUp(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	v, err := auth.New("jupyterhub", auth.Settings{Options: map[string]any{"api_url": srv.URL, "service_name": "mcp", "timeout": "1s"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := v.Verify(ctx, "t0k3n"); !errors.Is(err, auth.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Verify = %v, want ErrUnavailable and the context's error", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("Verify returned after %v, not when its context ended", d)
	}
}

// TestJupyterHubBoundsLookups checks that a Hub that does not answer holds at most
// maxLookups calls: a further token not cached is answered unavailable at once, not
// after the Hub's timeout, so a flood of made-up tokens cannot hold every connection.
func TestJupyterHubBoundsLookups(t *testing.T) {
	arrived := make(chan struct{}, maxLookups+1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	v, err := auth.New("jupyterhub", auth.Settings{Options: map[string]any{"api_url": srv.URL, "service_name": "mcp", "timeout": "1m"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range maxLookups {
		go func() { _, _ = v.Verify(ctx, fmt.Sprintf("made-up-%d", i)) }()
	}
	for range maxLookups {
		<-arrived
	}
	done := make(chan error, 1)
	go func() { _, err := v.Verify(context.Background(), "one-more"); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, auth.ErrUnavailable) {
			t.Fatalf("Verify beyond the bound = %v, want ErrUnavailable", err)
		}
	case <-arrived:
		t.Fatal("a call beyond the bound reached the Hub")
	}
}

// TestJupyterHubRenewsKnownTokens checks that a token admitted before is asked about
// again, once its cached answer expired, even while made-up tokens hold every Hub API
// call of maxLookups: the user already at work is not turned away by a flood.
func TestJupyterHubRenewsKnownTokens(t *testing.T) {
	arrived := make(chan struct{}, maxLookups+1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "token bobs" {
			_, _ = w.Write([]byte(`{"kind":"user","name":"bob","scopes":["access:services!service=mcp"]}`))
			return
		}
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	v, err := auth.New("jupyterhub", auth.Settings{Options: map[string]any{"api_url": srv.URL, "service_name": "mcp", "timeout": "1m", "token_cache_ttl": "1ns"}})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := v.Verify(context.Background(), "bobs"); err != nil || p.User != "bob" {
		t.Fatalf("bob's token: %v %v", p, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range maxLookups {
		go func() { _, _ = v.Verify(ctx, fmt.Sprintf("made-up-%d", i)) }()
	}
	for range maxLookups {
		<-arrived
	}
	if _, err := v.Verify(context.Background(), "never-seen"); !errors.Is(err, auth.ErrUnavailable) {
		t.Errorf("a token never admitted, every lookup taken: %v, want ErrUnavailable", err)
	}
	for range 3 { // its cached answer long expired: asked again, on a renewal's place
		if p, err := v.Verify(context.Background(), "bobs"); err != nil || p.User != "bob" {
			t.Fatalf("bob's token during the flood: %v %v, want admitted", p, err)
		}
	}
}
