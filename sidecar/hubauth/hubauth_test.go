package hubauth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

func testConfig() Config {
	return Config{
		Issuer: "https://hub.example.org/services/mcp", Resource: "https://hub.example.org/services/mcp/mcp",
		HubAuthorizeURL: "https://hub.example.org/hub/api/oauth2/authorize", HubTokenURL: "http://127.0.0.1:8081/hub/api/oauth2/token",
		HubClientID: "service-mcp", HubClientSecret: "secret", HubRedirectURI: "/services/mcp/oauth_callback",
		Verify: func(context.Context, string) (string, error) { return "alice", nil },
	}
}

// TestNew checks that New refuses every unusable configuration.
func TestNew(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"relative issuer":     func(c *Config) { c.Issuer = "/services/mcp" },
		"issuer with slash":   func(c *Config) { c.Issuer += "/" },
		"ftp resource":        func(c *Config) { c.Resource = "ftp://x/mcp" },
		"authorize query":     func(c *Config) { c.HubAuthorizeURL += "?x=1" },
		"no secret":           func(c *Config) { c.HubClientSecret = "" },
		"no verify":           func(c *Config) { c.Verify = nil },
		"no redirect":         func(c *Config) { c.HubRedirectURI = "" },
		"negative code ttl":   func(c *Config) { c.CodeTTL = -time.Second },
		"negative max client": func(c *Config) { c.MaxClients = -1 },
	} {
		c := testConfig()
		mod(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(testConfig()); err != nil {
		t.Fatal(err)
	}
}

// TestRegistered checks which redirect URIs of an authorization request match the
// client's registered ones: the same string, or a loopback IP literal over http on
// another port (VS Code registers http://127.0.0.1:33418/ and http://127.0.0.1/, and
// listens on another port when that one is taken).
func TestRegistered(t *testing.T) {
	list := []string{"http://127.0.0.1:33418/", "http://127.0.0.1/", "http://[::1]:8080/cb?x=1", "http://localhost:3000/cb",
		"https://vscode.dev/redirect", "vscode://vscode.mcp/cb"}
	for _, tt := range []struct {
		uri string
		ok  bool
	}{
		{"http://127.0.0.1:33418/", true},
		{"http://127.0.0.1:59656/", true},
		{"http://[::1]:9/cb?x=1", true},
		{"https://vscode.dev/redirect", true},
		{"vscode://vscode.mcp/cb", true},
		{"http://127.0.0.1:59656/other", false},
		{"http://127.0.0.1:59656", false},
		{"http://[::1]:9/cb?x=2", false},
		{"http://[::1]:9/cb", false},
		{"http://127.0.0.2:33418/", false},
		{"http://u@127.0.0.1:59656/", false},
		{"http://127.0.0.1:59656/#f", false},
		{"http://localhost:3001/cb", false}, // a name, not a loopback IP: exactly only
		{"https://vscode.dev:8443/redirect", false},
		{"vscode://vscode.mcp:1/cb", false},
		{"http://evil.example:33418/", false},
		// Ports no listener has, or written otherwise (red team of issue 39, pass 10, I3).
		{"http://127.0.0.1:0/", false},
		{"http://127.0.0.1:99999/", false},
		{"http://127.0.0.1:/", false},
		{"http://127.0.0.1:033418/", false},
		{"HTTP://127.0.0.1:33418/", false},
		{"http://127.0.0.1:65535/", true},
		{"http://[::1]:65536/cb?x=1", false},
	} {
		if got := registered(tt.uri, list); got != tt.ok {
			t.Errorf("%q: %v, want %v", tt.uri, got, tt.ok)
		}
	}
}

// TestBounded checks the stores' bounds: full, an expiring store refuses new entries
// (after dropping the expired), the clients' store forgets the oldest.
func TestBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newBounded[int](2, false)
	b.now = func() time.Time { return now }
	if !b.put("a", 1, time.Second) || !b.put("b", 2, time.Minute) || b.put("c", 3, time.Minute) {
		t.Fatal("a store of 2 took a third entry")
	}
	now = now.Add(2 * time.Second) // a expires
	if _, ok := b.get("a"); ok {
		t.Fatal("an expired entry was returned")
	}
	if !b.put("c", 3, time.Minute) {
		t.Fatal("an expired entry still took a place")
	}
	if v, ok := b.take("c"); !ok || v != 3 {
		t.Fatal("take")
	}
	if _, ok := b.take("c"); ok {
		t.Fatal("taken twice")
	}
	e := newBounded[int](2, true)
	e.put("a", 1, 0)
	e.put("b", 2, 0)
	e.put("c", 3, 0)
	if _, ok := e.get("a"); ok {
		t.Fatal("the oldest client was kept")
	}
	if _, ok := e.get("c"); !ok || len(e.m) != 2 {
		t.Fatal("the newest client was not kept")
	}
	// Taken and put again, a key is the newest: the eviction of its old place leaves it.
	e.take("b")
	e.put("b", 4, 0)
	e.put("d", 5, 0)
	if v, ok := e.get("b"); !ok || v != 4 {
		t.Fatal("a key put again was evicted in its old place")
	}
	for i := range 100 { // put and taken again and again: the order stays bounded
		e.put("x", i, 0)
		e.take("x")
	}
	if len(e.order) > 2*e.max+1 {
		t.Fatalf("eviction order of %d for %d entries", len(e.order), e.max)
	}
}

// TestLimits checks the rate limits, per source address (one source's flood leaves
// another's logins alone), and the bound on logins in progress, over HTTP.
func TestLimits(t *testing.T) {
	c := testConfig()
	c.MaxPending, c.Burst, c.Rate, c.RegisterBurst, c.RegisterRate, c.ProxyHops = 2, 5, 0.001, 2, 0.001, 1
	c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} // the test's proxy: the peer of every request
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	s.clients.put("c1", client{redirectURIs: []string{"http://127.0.0.1:1/cb"}}, 0)
	q := url.Values{"response_type": {"code"}, "client_id": {"c1"}, "redirect_uri": {"http://127.0.0.1:1/cb"}, "state": {"s"},
		"code_challenge": {strings.Repeat("A", 43)}, "code_challenge_method": {"S256"}}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// from is a request through the Hub's proxy from the address src (the proxy
	// appends it to what the client sent).
	from := func(src, method, path, body string) string {
		req, err := http.NewRequest(method, srv.URL+"/services/mcp"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", "203.0.113.99, "+src) // the first, the client's own: not believed
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Status + " " + resp.Header.Get("Location")
	}
	authorize := "/oauth/authorize?" + q.Encode()
	var locs []string
	for range 6 {
		locs = append(locs, from("192.0.2.1", http.MethodGet, authorize, ""))
	}
	for i, l := range locs {
		switch {
		case i < 5 && (!strings.Contains(l, c.HubAuthorizeURL+"?") || !strings.Contains(l, "code_challenge_method=S256")):
			// No store holds logins at the Hub (flowseal.go): MaxPending does not bound them.
			t.Errorf("login %d: %s, want the Hub's authorize with PKCE", i, l)
		case i == 5 && !strings.HasPrefix(l, "429"):
			t.Errorf("request %d beyond the burst: %s", i, l)
		}
	}
	// Another source is not limited by the first one's flood.
	if l := from("192.0.2.2", http.MethodGet, authorize, ""); !strings.Contains(l, c.HubAuthorizeURL+"?") {
		t.Errorf("another source's login: %s, want past the rate limit, to the Hub", l)
	}
	// Registrations have a budget of their own, per source, inside the requests'.
	reg := `{"redirect_uris":["http://127.0.0.1:1/cb"]}`
	for i, want := range []string{"201", "201", "429"} {
		if l := from("192.0.2.3", http.MethodPost, "/oauth/register", reg); !strings.HasPrefix(l, want) {
			t.Errorf("registration %d: %s, want %s", i, l, want)
		}
	}
	if l := from("192.0.2.4", http.MethodPost, "/oauth/register", reg); !strings.HasPrefix(l, "201") {
		t.Errorf("another source's registration: %s", l)
	}
	if l := from("192.0.2.3", http.MethodGet, authorize, ""); strings.HasPrefix(l, "429") {
		t.Errorf("the registering source's login: %s: its registrations spent its login budget", l)
	}
	// The metadata is not rate-limited and names the endpoints.
	resp, err := http.Get(srv.URL + "/services/mcp/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m["token_endpoint"] != c.Issuer+"/oauth/token" {
		t.Fatalf("metadata: %v %v", m, err)
	}
}

// TestLimiterBounded checks that the sources tracked are bounded: full, the idle are
// dropped first, then any; a limited source stays limited while idle ones go.
func TestLimiterBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLimiter(1, 2, 3)
	for _, src := range []string{"a", "a", "b", "c"} {
		l.allow(src, now)
	}
	if l.allow("a", now) {
		t.Fatal("a beyond its burst")
	}
	now = now.Add(5 * time.Second) // b and c refill; a too
	l.allow("a", now)
	l.allow("a", now)
	if !l.allow("d", now) || len(l.m) > 3 {
		t.Fatalf("a new source: %d tracked", len(l.m))
	}
	if _, ok := l.m["a"]; !ok || l.allow("a", now) {
		t.Fatal("the limited source was dropped for an idle one")
	}
	for i := range 10 {
		l.allow(fmt.Sprint(i), now)
	}
	if len(l.m) > 3 {
		t.Fatalf("%d sources tracked, max 3", len(l.m))
	}
}
