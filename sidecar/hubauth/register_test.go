package hubauth

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCheckRedirectURI checks which redirect URIs a client may register: https, http on
// a loopback host, reverse-domain private-use schemes (RFC 8252 section 7.1) and the
// short schemes the operator allows; never a browser's scheme, which would hand the
// URL, code included, to a browser that loads it from the network.
func TestCheckRedirectURI(t *testing.T) {
	allowed := []string{"vscode", "cursor"}
	for _, tt := range []struct {
		uri string
		ok  bool
	}{
		// What the real clients register.
		{"https://claude.ai/api/mcp/auth_callback", true},          // Claude (claude.ai, Claude Desktop's connectors)
		{"http://localhost:56648/callback", true},                  // Claude Code
		{"http://127.0.0.1:33418/", true},                          // VS Code
		{"https://vscode.dev/redirect", true},                      // VS Code
		{"http://localhost:6274/oauth/callback", true},             // the MCP Inspector
		{"http://localhost:6274/oauth/callback/debug", true},       // the MCP Inspector
		{"cursor://anysphere.cursor-mcp/oauth/callback", true},     // Cursor: allowed by the operator
		{"https://www.cursor.com/agents/mcp/oauth/callback", true}, // Cursor
		{"vscode://vscode.mcp/callback", true},
		{"http://[::1]:8080/cb", true},
		{"http://127.0.0.1:0/cb", false},
		{"http://localhost:99999/cb", false},
		{"http://127.0.0.1:/cb", false},
		{"http://127.0.0.1:08080/cb", false},
		{"com.example.app:/oauth2redirect", true},
		{"com.googleusercontent.apps.123-abc:/oauth2redirect", true},
		{"COM.Example.App:/cb", true},
		{"operations.example.app:/cb", true}, // not a browser's family: only short schemes are matched by prefix
		{"firefoxapp.example:/cb", true},
		// Browsers' schemes (issue 39).
		{"microsoft-edge:https://evil.example/x", false},
		{"microsoft-edge-https://evil.example/x", false},
		{"googlechromes://evil.example/x", false},
		{"googlechrome://evil.example/x", false},
		{"x-safari-https://evil.example/x", false},
		{"firefox://open-url?url=https%3A%2F%2Fevil.example%2Fx", false},
		{"opera-https://evil.example/x", false},
		{"brave://open-url?url=https://evil.example/x", false},
		{"touch-https://evil.example/x", false},
		// Short schemes nobody allowed, and not a reverse domain.
		{"myapp://cb", false},
		{"claude://callback", false},
		{"com.:/cb", false},
		{".com.example:/cb", false},
		{"com..example:/cb", false},
		{"web+com.example://x", false},
		{"chrome.example:/cb", false},
		// The rest.
		{"http://evil.example/cb", false},
		{"ftp://evil.com/", false},
		{"ws://evil.com/", false},
		{"WSS://evil.com/", false},
		{"mailto:evil@evil.com", false},
		{"chrome-extension://abc/cb", false},
		{"web+evil://x/", false},
		{"https://x.example/cb#f", false},
		{"https://user@x.example/cb", false},
		{"javascript:alert(1)", false},
		{"data:text/html,x", false},
		{"/relative", false},
		{"https:///nohost", false},
		{"https://x.example/" + strings.Repeat("a", maxURILen), false},
	} {
		if err := CheckRedirectURI(tt.uri, allowed); (err == nil) != tt.ok {
			t.Errorf("%q: %v, want ok %v", tt.uri, err, tt.ok)
		}
	}
	// Not allowed by the operator, cursor: is refused with the reason.
	err := CheckRedirectURI("cursor://anysphere.cursor-mcp/oauth/callback", nil)
	if err == nil || !strings.Contains(err.Error(), "reverse-domain") || !strings.Contains(err.Error(), `"cursor"`) {
		t.Errorf("cursor: without the operator's allowing: %v", err)
	}
}

// TestCheckAllowedScheme checks which short schemes an operator may allow: an
// application's, never a browser's, the network's or a document's.
func TestCheckAllowedScheme(t *testing.T) {
	for s, ok := range map[string]bool{
		"vscode": true, "cursor": true, "vscode-insiders": true, "claude": true,
		"https": false, "http": false, "javascript": false, "file": false, "firefox": false, "googlechromes": false,
		"microsoft-edge": false, "x-safari-https": false, "Vscode": false, "": false, "a b": false, "1x": false, "chrome": false,
	} {
		if err := CheckAllowedScheme(s); (err == nil) != ok {
			t.Errorf("%q: %v, want ok %v", s, err, ok)
		}
	}
}

// TestCleanName checks the client names kept and shown: no control, format (bidi) or
// separator characters, valid UTF-8, bounded in whole characters.
func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{
		"Visual Studio Code":                                           "Visual Studio Code",
		"Visual Studio Code\u202e":                                     "Visual Studio Code",
		"\u202eedoC oiduts lausiV":                                     "edoC oiduts lausiV",
		"a\u202ab\u202bc\u202cd\u202de\u2066f\u2067g\u2068h\u2069":     "abcdefgh",
		"a\u200eb\u200fc\u061cd\u200be\ufefff\u00adg":                  "abcdefg",
		"line\nbreak\r\ttab\x00nul\x1b[31m":                            "linebreaktabnul[31m",
		"para\u2029graph\u2028line":                                    "paragraphline",
		"  Cursor  ":                                                   "Cursor",
		"VS Code\u3164\u3164\u115f\u1160\uffa0(verified)":              "VS Code(verified)",
		"VS Code\u2800\u2800\u3000\u2007\u00a0 \ufe0f\u180b(verified)": "VS Code (verified)",
		"bad\xffutf8":                                                  "badutf8",
		"Ünïcödé 日本語":                                                  "Ünïcödé 日本語",
		strings.Repeat("é", maxNameLen):                                strings.Repeat("é", maxNameLen/2),
		"Code" + strings.Repeat("\u0301\u0336", 45) + " x\u20dd":       "Code\u0301\u0336\u0301 x\u20dd", // stacked marks: 3 a character (pass 10, L3)
		"Vi\u1ec7\u0323\u0302t अ\u093c\u0951\u0952\u0953":              "Vi\u1ec7\u0323\u0302t अ\u093c\u0951\u0952",
	} {
		if got := cleanName(in); got != want {
			t.Errorf("cleanName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestConsentPageName checks that a client's name cannot reorder the consent page: it
// is kept without bidi controls, shown isolated (<bdi dir="auto">), with the client's
// ID and when it registered.
func TestConsentPageName(t *testing.T) {
	e := newConsentEnv(t)
	at := time.Date(2026, 12, 6, 10, 1, 0, 0, time.UTC)
	e.s.now = func() time.Time { return at }
	id := e.register("Visual Studio Code\u202e", ownRedirect)
	e.s.now = func() time.Time { return at.Add(3*time.Minute + 10*time.Second) }
	p := consentPageOf(t, e.back(id, ownRedirect, "alice", nil))
	for _, want := range []string{
		`<bdi dir="auto" id="client-name">Visual Studio Code</bdi>`,
		`<bdi dir="auto">Visual Studio Code</bdi> <span id="name-warning">(the name is the client's own; it is not checked)</span>`,
		"client ID <code>" + id + "</code>",
		`<span id="registered">registered 3 minutes ago, 2026-12-06 10:01 UTC</span>`,
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the consent page lacks %s:\n%s", want, p.body)
		}
	}
	if strings.ContainsAny(p.body, "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c") {
		t.Errorf("the consent page holds a bidi control:\n%q", p.body)
	}
	for d, want := range map[time.Duration]string{0: "just now", 90 * time.Second: "a minute ago", 5 * time.Hour: "5 hours ago", 72 * time.Hour: "3 days ago"} {
		if got := registeredText(at, at.Add(d)); got != "registered "+want+", 2026-12-06 10:01 UTC" {
			t.Errorf("registered %v ago: %q", d, got)
		}
	}
	if got := registeredText(time.Time{}, at); got != "registered by the Hub's operator" {
		t.Errorf("the operator's client: %q", got)
	}
}

// TestSource checks which address a request counts as coming from: X-Forwarded-For is
// believed only from a trusted proxy.
func TestSource(t *testing.T) {
	loop := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	for _, tt := range []struct {
		remote  string
		xff     []string
		hops    int
		trusted []netip.Prefix
		want    string
	}{
		{"127.0.0.1:5000", nil, 1, loop, "127.0.0.1"},
		{"127.0.0.1:5000", []string{"192.0.2.1"}, 0, loop, "127.0.0.1"},
		{"127.0.0.1:5000", []string{"192.0.2.1"}, 1, loop, "192.0.2.1"},
		{"127.0.0.1:5000", []string{"10.0.0.1, 192.0.2.1"}, 1, loop, "192.0.2.1"},
		{"127.0.0.1:5000", []string{"10.0.0.1", "192.0.2.1"}, 1, loop, "192.0.2.1"},
		{"127.0.0.1:5000", []string{"10.0.0.1, 192.0.2.1, 10.1.1.1"}, 2, loop, "192.0.2.1"},
		{"127.0.0.1:5000", []string{"192.0.2.1"}, 3, loop, "192.0.2.1"},
		{"127.0.0.1:5000", []string{"::ffff:127.0.0.2"}, 1, loop, "127.0.0.2"}, // node's IPv4 on a dual-stack socket
		{"[::ffff:127.0.0.1]:5000", []string{"192.0.2.1"}, 1, loop, "192.0.2.1"},
		{"[2001:db8::1]:5000", nil, 1, loop, "2001:db8::/64"},
		{"[2001:db8::2]:5000", nil, 0, loop, "2001:db8::/64"},
		{"127.0.0.1:5000", []string{"unknown"}, 1, loop, "unknown"},
		// Not from a trusted proxy: the peer, whatever the header says.
		{"127.0.0.1:5000", []string{"192.0.2.1"}, 1, nil, "127.0.0.1"},
		{"127.0.0.3:5000", []string{"192.0.2.1"}, 1, loop, "127.0.0.3"},
		{"10.0.0.9:5000", []string{"192.0.2.1"}, 1, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, "192.0.2.1"},
		{"[2001:db8::1]:5000", []string{"192.0.2.1"}, 1, loop, "2001:db8::/64"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tt.remote
		for _, v := range tt.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got, _ := source(r, tt.hops, tt.trusted); got != tt.want {
			t.Errorf("%s %q hops %d trusted %v: %q, want %q", tt.remote, tt.xff, tt.hops, tt.trusted, got, tt.want)
		}
	}
}

// TestParseTrustedProxies checks hub.oauth.trusted_proxies' forms.
func TestParseTrustedProxies(t *testing.T) {
	got, err := ParseTrustedProxies([]string{"127.0.0.1", "10.1.2.3/8", "::1", "::ffff:192.168.0.0/112", "2001:db8::/32"})
	if err != nil || fmt.Sprint(got) != "[127.0.0.1/32 10.0.0.0/8 ::1/128 192.168.0.0/16 2001:db8::/32]" {
		t.Fatalf("ParseTrustedProxies = %v, %v", got, err)
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", "", "1.2.3.4:80"} {
		if _, err := ParseTrustedProxies([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// regEnv is a Server with its handler, served to requests from peer.
type regEnv struct {
	t *testing.T
	s *Server
}

func newRegEnv(t *testing.T, mod func(*Config)) *regEnv {
	t.Helper()
	c := testConfig()
	c.ProxyHops, c.Logger = DefaultProxyHops, slog.New(slog.DiscardHandler)
	if mod != nil {
		mod(&c)
	}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return &regEnv{t: t, s: s}
}

// do serves a request from peer (with X-Forwarded-For xff unless "") to path.
func (e *regEnv) do(method, path, peer, xff, body string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "https://hub.example.org/services/mcp"+path, strings.NewReader(body))
	r.RemoteAddr = peer + ":40000"
	if xff != "" {
		r.Header.Set("X-Forwarded-For", xff)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	e.s.Handler().ServeHTTP(rec, r)
	return rec
}

// register registers a client with redirect from peer (xff), returning the answer and
// the client's id.
func (e *regEnv) register(peer, xff, redirect string, header ...string) (*httptest.ResponseRecorder, string) {
	rec := e.do(http.MethodPost, "/oauth/register", peer, xff, `{"client_name":"c","redirect_uris":["`+redirect+`"]}`, header...)
	var out struct {
		ClientID string `json:"client_id"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec, out.ClientID
}

// authorize is client id's authorization request with redirect: the Hub's authorize
// (302) while the client is known, 400 once it is not.
func (e *regEnv) authorize(id, redirect string) int {
	q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {redirect}, "state": {"s"},
		"code_challenge": {strings.Repeat("A", 43)}, "code_challenge_method": {"S256"}}
	return e.do(http.MethodGet, "/oauth/authorize?"+q.Encode(), "192.0.2.200", "", "").Code
}

// TestRegistrationFlood is issue 39's: from a direct connection, registrations each
// with its own X-Forwarded-For. The proxy not trusted, they all count as the peer's and
// are refused after its burst; from a trusted proxy's address (a local user on the
// Hub's host reaching the listener directly), the global bound refuses them, 503 with
// Retry-After, instead of forgetting a client registered before, or one approved. A
// registration whose login no user took to its consent page expires after
// RegistrationLoginWindow, so the flood closes registration for minutes, not for
// RegistrationTTL (red team pass 11, M2: 24 hours).
func TestRegistrationFlood(t *testing.T) {
	const redirect = "http://127.0.0.1:7/cb"
	t.Run("untrusted peer", func(t *testing.T) {
		e := newRegEnv(t, func(c *Config) { c.MaxClients = 50 })
		_, early := e.register("192.0.2.1", "", redirect)
		created := 0
		for i := range 100 {
			if rec, _ := e.register("127.0.0.1", fmt.Sprintf("198.51.%d.%d", i/250, i%250), redirect); rec.Code == http.StatusCreated {
				created++
			}
		}
		if created != 10 { // RegisterBurst's default
			t.Errorf("%d registrations of 100 with forged X-Forwarded-For from one peer, want its burst of 10", created)
		}
		if code := e.authorize(early, redirect); code != http.StatusFound {
			t.Errorf("the client registered before the flood: authorize %d, want 302", code)
		}
	})
	t.Run("trusted peer", func(t *testing.T) {
		now := time.Unix(1_000_000, 0)
		e := newRegEnv(t, func(c *Config) {
			c.MaxClients, c.RegistrationTTL = 50, time.Hour
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		})
		e.s.now, e.s.clients.now, e.s.kept.now = func() time.Time { return now }, func() time.Time { return now }, func() time.Time { return now }
		_, early := e.register("192.0.2.1", "", redirect)
		_, approved := e.register("192.0.2.1", "", redirect)
		_, abandoned := e.register("192.0.2.1", "", redirect)
		if !e.s.keep(approved) {
			t.Fatal("keep")
		}
		// Five minutes on, a user's login reaches early's consent page: early waits for her
		// decision as long as the page may (FlowTTL); abandoned's login never starts.
		now = now.Add(5 * time.Minute)
		req := httptest.NewRequest(http.MethodGet, "/services/mcp/oauth_callback", nil)
		e.s.consentOrCode(httptest.NewRecorder(), req, flow{clientID: early, redirectURI: redirect, state: "s"}, "alice", "hub-token", 3600)
		now = now.Add(RegistrationLoginWindow - 5*time.Minute + time.Second)
		if _, ok := e.s.client(abandoned); ok {
			t.Error("a registration no login reached is kept past RegistrationLoginWindow")
		}
		var codes []int
		var refused *httptest.ResponseRecorder
		for i := range 100 {
			rec, _ := e.register("127.0.0.1", fmt.Sprintf("198.51.%d.%d", i/250, i%250), redirect)
			if codes = append(codes, rec.Code); rec.Code != http.StatusCreated && refused == nil {
				refused = rec
			}
		}
		if n := strings.Count(fmt.Sprint(codes), "201"); n != 49 || refused == nil || refused.Code != http.StatusServiceUnavailable {
			t.Fatalf("flood through a trusted peer: %d registered (want 49, to the bound of 50 waiting), then %v", n, refused)
		}
		// The first registration to expire is early, its consent page's time up 299 s on.
		if ra, _ := strconv.Atoi(refused.Header().Get("Retry-After")); ra != 299 {
			t.Errorf("Retry-After %q, want 299 s: when early's consent page times out", refused.Header().Get("Retry-After"))
		}
		for name, id := range map[string]string{"registered before": early, "approved": approved} {
			if code := e.authorize(id, redirect); code != http.StatusFound {
				t.Errorf("the client %s the flood: authorize %d, want 302", name, code)
			}
		}
		// A user approves a waiting client: its place is free at once, for one more.
		if !e.s.keep(early) {
			t.Fatal("keep the early client")
		}
		for i, want := range []int{http.StatusCreated, http.StatusServiceUnavailable} {
			if rec, _ := e.register("192.0.2.7", "", redirect); rec.Code != want {
				t.Errorf("registration %d after an approval freed a place: %d, want %d", i, rec.Code, want)
			}
		}
		// Registrations no user approved expire: places free again; the approved stays.
		now = now.Add(time.Hour + time.Second) // past the RegistrationTTL
		if rec, _ := e.register("192.0.2.9", "", redirect); rec.Code != http.StatusCreated {
			t.Errorf("a registration after the flood's expired: %d", rec.Code)
		}
		if e.authorize(early, redirect) != http.StatusFound || e.authorize(approved, redirect) != http.StatusFound {
			t.Error("after the registration TTL: want the approved clients kept")
		}
	})
}

// TestKeptClients checks that an approved client is never forgotten: the approved are
// kept apart, bounded, and a client beyond the bound is not approved (keep fails)
// rather than another forgotten.
func TestKeptClients(t *testing.T) {
	e := newRegEnv(t, func(c *Config) { c.MaxClients = 2 })
	var ids []string
	for i := range 2 {
		_, id := e.register(fmt.Sprint("192.0.2.", i), "", "http://127.0.0.1:7/cb")
		ids = append(ids, id)
	}
	for _, id := range []string{ids[0], ids[0], ids[1]} { // kept twice: still one place
		if !e.s.keep(id) {
			t.Fatalf("keep %s", id)
		}
	}
	_, third := e.register("192.0.2.3", "", "http://127.0.0.1:7/cb")
	if e.s.keep(third) || e.s.keep("nobody") {
		t.Fatal("a third client kept in 2 places, or an unknown one")
	}
	for _, id := range append(ids, third) {
		if _, ok := e.s.client(id); !ok {
			t.Errorf("client %s forgotten", id)
		}
	}
}

// TestRegistrationPolicy checks hub.oauth.registration: token asks for the initial
// access token, closed refuses every registration and the metadata names no
// registration endpoint; the operator's clients log in under every policy.
func TestRegistrationPolicy(t *testing.T) {
	const tok = "initial-access-token-0123456789"
	const redirect = "com.example.app:/cb"
	op := Client{ID: "team-client", Name: "Team client", RedirectURIs: []string{redirect}}
	for _, tt := range []struct {
		policy   Registration
		auth     map[string]int // Authorization header → registration status
		endpoint bool           // the metadata names the registration endpoint
	}{
		{"", map[string]int{"": 201, "Bearer x": 201}, true},
		{RegistrationOpen, map[string]int{"": 201}, true},
		{RegistrationToken, map[string]int{"": 401, "Bearer wrong": 401, "Bearer " + tok[:len(tok)-1]: 401, "Basic " + tok: 401,
			"Bearer " + tok + "x": 401, "Bearer " + tok: 201, "bearer " + tok: 201}, true},
		{RegistrationClosed, map[string]int{"": 403, "Bearer " + tok: 403}, false},
	} {
		e := newRegEnv(t, func(c *Config) {
			c.Registration, c.Clients, c.RegisterBurst = tt.policy, []Client{op}, 100
			if tt.policy == RegistrationToken {
				c.RegistrationToken = tok
			}
		})
		for auth, want := range tt.auth {
			rec, _ := e.register("192.0.2.1", "", redirect, "Authorization", auth)
			if rec.Code != want {
				t.Errorf("%q: registration with Authorization %q: %d %s, want %d", tt.policy, auth, rec.Code, rec.Body, want)
			}
			if want == 401 && !strings.Contains(rec.Header().Get("WWW-Authenticate"), `error="invalid_token"`) {
				t.Errorf("%q: 401 without its challenge: %v", tt.policy, rec.Header())
			}
		}
		var m map[string]any
		if err := json.Unmarshal(e.do(http.MethodGet, "/.well-known/oauth-authorization-server", "192.0.2.1", "", "").Body.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m["registration_endpoint"]; ok != tt.endpoint {
			t.Errorf("%q: the metadata's registration_endpoint %v, want %v", tt.policy, m["registration_endpoint"], tt.endpoint)
		}
		if code := e.authorize(op.ID, redirect); code != http.StatusFound {
			t.Errorf("%q: the operator's client: authorize %d", tt.policy, code)
		}
		if code := e.authorize(op.ID, "com.example.app:/other"); code != http.StatusBadRequest {
			t.Errorf("%q: the operator's client with another redirect URI: authorize %d", tt.policy, code)
		}
	}
}

// TestNewRegistration checks that New refuses unusable registration settings.
func TestNewRegistration(t *testing.T) {
	good := Client{ID: "c1", Name: "C", RedirectURIs: []string{"https://app.example/cb"}}
	for name, mod := range map[string]func(*Config){
		"unknown policy":         func(c *Config) { c.Registration = "sometimes" },
		"token without a token":  func(c *Config) { c.Registration = RegistrationToken },
		"short token":            func(c *Config) { c.Registration, c.RegistrationToken = RegistrationToken, "short" },
		"negative ttl":           func(c *Config) { c.RegistrationTTL = -time.Second },
		"browser scheme allowed": func(c *Config) { c.AllowedRedirectSchemes = []string{"googlechromes"} },
		"https allowed":          func(c *Config) { c.AllowedRedirectSchemes = []string{"https"} },
		"client id":              func(c *Config) { c.Clients = []Client{{ID: "a\x00b", RedirectURIs: good.RedirectURIs}} },
		"client twice":           func(c *Config) { c.Clients = []Client{good, good} },
		"client redirect": func(c *Config) {
			c.Clients = []Client{{ID: "c2", RedirectURIs: []string{"x-safari-https://evil.example/"}}}
		},
		"client no redirect": func(c *Config) { c.Clients = []Client{{ID: "c2"}} },
		"client name bidi":   func(c *Config) { c.Clients = []Client{{ID: "c2", Name: "a\u202e", RedirectURIs: good.RedirectURIs}} },
	} {
		c := testConfig()
		mod(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := testConfig()
	c.Clients, c.AllowedRedirectSchemes = []Client{good, {ID: "c2", RedirectURIs: []string{"vscode://x/cb"}}}, []string{"vscode"}
	if _, err := New(c); err != nil {
		t.Fatal(err)
	}
}

// TestRegisterRefusesBrowserSchemes checks the registration endpoint's answer to issue
// 39's redirect URIs: 400 invalid_redirect_uri with the reason, nothing registered.
func TestRegisterRefusesBrowserSchemes(t *testing.T) {
	e := newRegEnv(t, func(c *Config) { c.RegisterBurst = 100 })
	for _, uri := range []string{"microsoft-edge:https://evil.example/x", "googlechromes://evil.example/x", "x-safari-https://evil.example/x",
		"firefox://open-url?url=https://evil.example/x", "myapp://cb"} {
		rec, _ := e.register("192.0.2.1", "", uri)
		var out oauthError
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		if rec.Code != http.StatusBadRequest || out.Error != "invalid_redirect_uri" || !strings.Contains(out.Description, "reverse-domain") {
			t.Errorf("%s: %d %+v, want 400 invalid_redirect_uri with the reason", uri, rec.Code, out)
		}
	}
	if n := len(e.s.clients.m); n != 0 {
		t.Errorf("%d clients registered", n)
	}
	// A name is kept clean: the registration's answer says what is kept.
	rec := e.do(http.MethodPost, "/oauth/register", "192.0.2.1", "", `{"client_name":"Visual Studio Code\u202e","redirect_uris":["http://127.0.0.1:1/"]}`)
	var out struct {
		Name string `json:"client_name"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != http.StatusCreated || out.Name != "Visual Studio Code" {
		t.Errorf("a name with U+202E: %d %q", rec.Code, out.Name)
	}
}

// TestRedirectURIsASCII checks that a redirect URI is ASCII: a look-alike international
// host, bidi controls and invisible characters are refused, their percent-encoded or
// IDNA forms taken.
func TestRedirectURIsASCII(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://\u0430\u0440\u0440\u04cf\u0435.com/cb": false, // Cyrillic "apple"
		"https://xn--80ak6aa92e.com/cb":                 true,
		"https://app.example/cb\u202etxt.exe":           false,
		"https://app.example/cb?q=\u3164":               false,
		"com.example.app:/cb\u200b":                     false,
		"https://app.example/cb%E2%80%AE":               true,
		"https://app.example/c b":                       false,
		"http://127.0.0.1:33418/cb?x=%D0%B0":            true,
	} {
		if err := CheckRedirectURI(raw, nil); (err == nil) != ok {
			t.Errorf("CheckRedirectURI(%q) = %v, want accepted %v", raw, err, ok)
		}
	}
}

// TestFormTargetIPv6 checks the consent page's form-action for a loopback redirect URI
// on an IPv6 literal, which a CSP host-source cannot name: its scheme.
func TestFormTargetIPv6(t *testing.T) {
	for in, want := range map[string]string{
		"http://[::1]:40000/cb":          " http:",
		"http://[::ffff:127.0.0.1]:1/cb": " http:",
		"http://127.0.0.1:40000/cb":      " http://127.0.0.1:40000",
		"https://app.example/cb":         " https://app.example",
		"com.example.app:/cb":            " com.example.app:",
	} {
		if got := formTarget(in); got != want {
			t.Errorf("formTarget(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedirectURIsBounded: a registration's redirect URIs hold at most maxRedirectBytes
// together, so the clients waiting for an approval hold at most 40 MB of them (10,000
// registrations of 15 kB grew the process by 212 MB: red team pass 11, M2).
func TestRedirectURIsBounded(t *testing.T) {
	uri := func(n int) string { return "https://example.org/" + strings.Repeat("p", n-len("https://example.org/")) }
	if err := checkRedirectURIs([]string{uri(2000), uri(2000)}, nil); err != nil {
		t.Errorf("two URIs of 2,000 bytes: %v", err)
	}
	if err := checkRedirectURIs([]string{uri(2000), uri(2000), uri(200)}, nil); err == nil {
		t.Error("three URIs of 4,200 bytes together registered")
	}
}
