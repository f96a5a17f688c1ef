package hubauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
)

// consentEnv is a Server over HTTP with Hub users by token: "tok-alice" is alice's,
// "tok-bob" bob's; the Hub token a login of user's gets is "hub-token-of-{user}".
// Tokens in revoked are refused as the Hub refuses a revoked token; with down set, the
// Hub does not answer.
type consentEnv struct {
	t        *testing.T
	s        *Server
	srv      *httptest.Server
	noFollow *http.Client
	reg      *prometheus.Registry
	revoked  sync.Map // Hub tokens revoked at the Hub
	down     atomic.Bool
}

func newConsentEnv(t *testing.T, mod ...func(*Config)) *consentEnv {
	t.Helper()
	e := &consentEnv{t: t, reg: prometheus.NewRegistry(),
		noFollow: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	c := testConfig()
	c.Registerer = e.reg
	c.AllowedRedirectSchemes = []string{"vscode"}
	c.Verify = func(_ context.Context, tok string) (string, error) {
		if e.down.Load() {
			return "", fmt.Errorf("%w: the Hub does not answer", auth.ErrUnavailable)
		}
		if _, ok := e.revoked.Load(tok); ok {
			return "", fmt.Errorf("%w: revoked", auth.ErrUnauthorized)
		}
		for _, prefix := range []string{"tok-", "hub-token-of-"} {
			if u, ok := strings.CutPrefix(tok, prefix); ok {
				return u, nil
			}
		}
		return "", errors.New("not a Hub token")
	}
	for _, m := range mod {
		m(&c)
	}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	e.s = s
	e.srv = httptest.NewServer(s.Handler())
	t.Cleanup(e.srv.Close)
	return e
}

// register registers a client named name with redirects and returns its id.
func (e *consentEnv) register(name string, redirects ...string) string {
	e.t.Helper()
	b, _ := json.Marshal(map[string]any{"client_name": name, "redirect_uris": redirects})
	resp, err := http.Post(e.srv.URL+"/services/mcp/oauth/register", "application/json", strings.NewReader(string(b)))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ClientID string `json:"client_id"`
	}
	if resp.StatusCode != http.StatusCreated || json.NewDecoder(resp.Body).Decode(&out) != nil {
		e.t.Fatalf("register %q: %d", name, resp.StatusCode)
	}
	return out.ClientID
}

// back is the Hub's callback for user's login through client's authorization request
// (the authorize endpoint over HTTP, then the step after the Hub's token exchange):
// the consent page, or the redirect to the client. cookie is the browser's consent
// cookie, if it has one.
func (e *consentEnv) back(clientID, redirect, user string, cookie *http.Cookie) *httptest.ResponseRecorder {
	e.t.Helper()
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect}, "state": {"st"},
		"code_challenge": {s256(strings.Repeat("v", 43))}, "code_challenge_method": {"S256"}}
	resp, err := e.noFollow.Get(e.srv.URL + "/services/mcp/oauth/authorize?" + q.Encode())
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		e.t.Fatalf("authorize: %d %v", resp.StatusCode, err)
	}
	f, _, err := e.s.open(loc.Query().Get("state"))
	if err != nil {
		e.t.Fatalf("no flow in the Hub's state: %v", err)
	}
	req := httptest.NewRequest(http.MethodGet, e.srv.URL+"/services/mcp/oauth_callback", nil)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	rec := httptest.NewRecorder()
	e.s.consentOrCode(rec, req, f, user, "hub-token-of-"+user, 3600)
	return rec
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)">`)

// page is a consent page as a browser holds it: the form's fields and the cookie.
type page struct {
	form   url.Values
	cookie *http.Cookie
	body   string
}

// consentPageOf is the page rec holds, in a browser that had cookie (nil: none).
func consentPageOf(t *testing.T, rec *httptest.ResponseRecorder, cookie ...*http.Cookie) page {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("want the consent page, got %d %v", rec.Code, rec.Header())
	}
	p := page{form: url.Values{}, body: rec.Body.String()}
	if len(cookie) > 0 {
		p.cookie = cookie[0]
	}
	for _, m := range hiddenInput.FindAllStringSubmatch(p.body, -1) {
		p.form.Set(m[1], html.UnescapeString(m[2]))
	}
	for _, c := range rec.Result().Cookies() {
		if c.Name == consentCookie {
			p.cookie = c
		}
	}
	if p.form.Get("consent") == "" || p.form.Get("csrf") == "" || p.cookie == nil {
		t.Fatalf("consent page without its form or cookie: %s", p.body)
	}
	return p
}

// submit posts form to the consent endpoint as a browser at the issuer's origin does,
// with cookie, changed by mod; it returns the status and the redirect's Location.
func (e *consentEnv) submit(form url.Values, cookie *http.Cookie, mod func(*http.Request)) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/services/mcp/oauth/consent", strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://hub.example.org")
	click(req)
	if cookie != nil {
		req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	}
	if mod != nil {
		mod(req)
	}
	resp, err := e.noFollow.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// click sets the Sec-Fetch-* headers Chromium sends with a form posted by a person's
// click on a page of the same origin.
func click(r *http.Request) {
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	r.Header.Set("Sec-Fetch-Mode", "navigate")
	r.Header.Set("Sec-Fetch-Dest", "document")
	r.Header.Set("Sec-Fetch-User", "?1")
}

func with(v url.Values, key, value string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	if value == "" {
		out.Del(key)
	} else {
		out.Set(key, value)
	}
	return out
}

const (
	ownRedirect  = "http://127.0.0.1:33418/cb"
	evilRedirect = "https://evil.example/steal"
)

// TestConsentPage checks what the consent page shows and the headers that keep it
// out of frames and caches: a client name with markup in it is shown as text.
func TestConsentPage(t *testing.T) {
	e := newConsentEnv(t)
	name := `Evil"><script>alert(1)</script><img src=x onerror=alert(2)>`
	id := e.register(name, evilRedirect)
	rec := e.back(id, evilRedirect, "alice", nil)
	p := consentPageOf(t, rec)
	h := rec.Header()
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self' https://evil.example;", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	for k, want := range map[string]string{"X-Frame-Options": "DENY", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
		"Content-Type": "text/html; charset=utf-8", "Referrer-Policy": "same-origin", "Cross-Origin-Opener-Policy": "same-origin"} {
		if h.Get(k) != want {
			t.Errorf("%s: %q, want %q", k, h.Get(k), want)
		}
	}
	if c := p.cookie; !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || !c.Secure || c.Path != "/services/mcp/" || c.MaxAge != 0 {
		t.Errorf("consent cookie %+v: want HttpOnly, SameSite=Strict, Secure (https issuer), Path /services/mcp/, a session cookie", c)
	}
	for _, bad := range []string{"<script>", "<img", `Evil">`} {
		if strings.Contains(p.body, bad) {
			t.Errorf("the page holds the client's markup %q:\n%s", bad, p.body)
		}
	}
	// The page's one script is its own, under the CSP's nonce: it arms Approve.
	nonce := strings.TrimSuffix(strings.SplitN(strings.SplitN(csp, "script-src 'nonce-", 2)[1], "'", 2)[0], "'")
	if strings.Count(p.body, "<script") != 1 || !strings.Contains(p.body, `<script nonce="`+nonce+`">`) {
		t.Errorf("the page's scripts: want one, under the CSP's nonce %q:\n%s", nonce, p.body)
	}
	for _, want := range []string{html.EscapeString(name), "<b id=\"user\">alice</b>", "<code>" + evilRedirect + "</code>", id,
		`<button type="submit" name="decision" value="approve" data-arm disabled>`, `<button type="submit" name="decision" value="deny">`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the page lacks %q:\n%s", want, p.body)
		}
	}
	if p.form.Get("client_id") != id {
		t.Errorf("the form names client %q, want %q", p.form.Get("client_id"), id)
	}
	// A user name is escaped too; the page shows the whole redirect URI the code goes
	// to, escaped, but for a loopback listener, whose port the program picks.
	for _, tt := range []struct{ redirect, shown string }{
		{"vscode://vscode.mcp/cb?a=1&b=<x>", "vscode://vscode.mcp/cb?a=1&amp;b=&lt;x&gt;"},
		{"https://evil.example/x?next=https://other.example/", "https://evil.example/x?next=https://other.example/"},
		{"http://localhost:3000/cb", "http://localhost:3000/cb"},
		{ownRedirect, "127.0.0.1:33418/cb (a program on this computer)"},
		{"http://[::1]:8080/cb?x=1", "[::1]:8080/cb (a program on this computer)"},
	} {
		app := e.register("app", tt.redirect)
		q := consentPageOf(t, e.back(app, tt.redirect, "<u>", nil))
		if !strings.Contains(q.body, "&lt;u&gt;") || strings.Contains(q.body, "<u>") || !strings.Contains(q.body, `<dd id="redirect-host" data-shown><code>`+tt.shown+"</code>") {
			t.Errorf("page for user <u> and a client of %s, want %q shown:\n%s", tt.redirect, tt.shown, q.body)
		}
	}
}

// TestConsentDecide checks the consent form's POST: only the browser shown the page,
// with the page's token, for the page's client, once, from the issuer's origin, gets a
// code by approving; denying sends error=access_denied and no code.
func TestConsentDecide(t *testing.T) {
	for _, tt := range []struct {
		name   string
		form   func(p page, other string) url.Values
		cookie func(p page) *http.Cookie
		req    func(*http.Request)
		status int
		want   string // in the redirect to the client; "" none
		used   bool   // the pending consent is gone after it
	}{
		{name: "approve", status: http.StatusFound, want: "code=", used: true},
		{name: "deny", form: func(p page, _ string) url.Values { return with(p.form, "decision", "deny") }, status: http.StatusFound, want: "error=access_denied", used: true},
		{name: "no csrf token", form: func(p page, _ string) url.Values { return with(p.form, "csrf", "") }, status: http.StatusForbidden, used: true},
		{name: "wrong csrf token", form: func(p page, _ string) url.Values { return with(p.form, "csrf", random()) }, status: http.StatusForbidden, used: true},
		{name: "no cookie", cookie: func(page) *http.Cookie { return nil }, status: http.StatusForbidden, used: true},
		{name: "another browser's cookie", cookie: func(p page) *http.Cookie { return &http.Cookie{Name: consentCookie, Value: random()} }, status: http.StatusForbidden, used: true},
		{name: "another client id", form: func(p page, other string) url.Values { return with(p.form, "client_id", other) }, status: http.StatusForbidden, used: true},
		{name: "no decision", form: func(p page, _ string) url.Values { return with(p.form, "decision", "maybe") }, status: http.StatusBadRequest, used: true},
		{name: "unknown consent", form: func(p page, _ string) url.Values { return with(p.form, "consent", random()) }, status: http.StatusBadRequest},
		{name: "from another origin", req: func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, status: http.StatusForbidden},
		{name: "a cross-site form", req: func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, status: http.StatusForbidden},
		// Another page of the origin (another Hub user's server, on a Hub without
		// subdomains) posting the form with a script: refused before the form is
		// looked at, so the user can still approve with a click.
		{name: "a same-origin fetch", req: func(r *http.Request) {
			r.Header.Set("Sec-Fetch-Mode", "cors")
			r.Header.Set("Sec-Fetch-Dest", "empty")
			r.Header.Del("Sec-Fetch-User")
		}, status: http.StatusForbidden},
		{name: "a script's form.submit()", req: func(r *http.Request) { r.Header.Del("Sec-Fetch-User") }, status: http.StatusForbidden},
		{name: "into a frame", req: func(r *http.Request) { r.Header.Set("Sec-Fetch-Dest", "iframe") }, status: http.StatusForbidden},
		{name: "a browser without Sec-Fetch", req: func(r *http.Request) {
			for _, h := range []string{"Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Fetch-User"} {
				r.Header.Del(h)
			}
		}, status: http.StatusFound, want: "code=", used: true},
		{name: "GET", req: func(r *http.Request) { r.Method = http.MethodGet }, status: http.StatusMethodNotAllowed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newConsentEnv(t)
			evil := e.register("evil", evilRedirect)
			own := e.register("own", ownRedirect)
			p := consentPageOf(t, e.back(evil, evilRedirect, "alice", nil))
			form := with(p.form, "decision", "approve")
			if tt.form != nil {
				form = tt.form(p, own)
			}
			cookie := p.cookie
			if tt.cookie != nil {
				cookie = tt.cookie(p)
			}
			status, loc := e.submit(form, cookie, tt.req)
			if status != tt.status || (tt.want == "" && loc != "") || (tt.want != "" && (!strings.HasPrefix(loc, evilRedirect+"?") || !strings.Contains(loc, tt.want))) ||
				(tt.want != "code=" && strings.Contains(loc, "code=")) {
				t.Fatalf("%d %q, want %d with %q", status, loc, tt.status, tt.want)
			}
			approved := tt.want == "code="
			for who, id := range map[string]string{"evil": evil, "own": own} {
				if ok := e.s.approved("alice", id, evilRedirect); ok != (approved && who == "evil") {
					t.Errorf("alice's approval of %s: %v", who, ok)
				}
			}
			if approved {
				u, _ := url.Parse(loc)
				if u.Query().Get("state") != "st" || u.Query().Get("iss") != e.s.cfg.Issuer {
					t.Errorf("approved: %s", loc)
				}
			}
			// The form is single-use: sent again as the page made it, it gives nothing;
			// a request refused before it was looked at (another site's, an unknown id)
			// did not use it up, so the user can still approve.
			status, loc = e.submit(with(p.form, "decision", "approve"), p.cookie, nil)
			if tt.used && (status != http.StatusBadRequest || loc != "") {
				t.Errorf("the form replayed: %d %q, want 400 and no redirect", status, loc)
			}
			if !tt.used && (status != http.StatusFound || !strings.Contains(loc, "code=")) {
				t.Errorf("the user's approval after the refused request: %d %q, want a code", status, loc)
			}
			if n := len(e.s.codes.m); n != map[bool]int{true: 1, false: 0}[approved || !tt.used] {
				t.Errorf("%d codes outstanding", n)
			}
		})
	}
}

// TestConsentRemembered checks that an approval is remembered for its user, its client
// and its redirect URI only (a loopback one on any port): the same client's login
// through another of its redirect URIs shows the page again, naming that URI.
func TestConsentRemembered(t *testing.T) {
	e := newConsentEnv(t)
	own := e.register("own <client>", ownRedirect, evilRedirect)
	other := e.register("other", ownRedirect)
	p := consentPageOf(t, e.back(own, ownRedirect, "alice", nil))
	status, loc := e.submit(with(p.form, "decision", "approve"), p.cookie, nil)
	if status != http.StatusFound || !strings.HasPrefix(loc, ownRedirect+"?") || !strings.Contains(loc, "code=") {
		t.Fatalf("approve: %d %q", status, loc)
	}
	// Remembered: alice's next login through the same client and redirect URI goes
	// straight back, on another port of the loopback listener too.
	for _, redirect := range []string{ownRedirect, "http://127.0.0.1:40001/cb"} {
		if rec := e.back(own, redirect, "alice", p.cookie); rec.Code != http.StatusFound || !strings.HasPrefix(rec.Header().Get("Location"), redirect+"?code=") {
			t.Fatalf("alice's login through %s again: %d %v", redirect, rec.Code, rec.Header())
		}
	}
	// Not through the client's other redirect URI: the page again, naming it.
	rec := e.back(own, evilRedirect, "alice", p.cookie)
	if q := consentPageOf(t, rec, p.cookie); !strings.Contains(q.body, "<code>"+evilRedirect+"</code>") {
		t.Errorf("the page for the other redirect URI does not name it:\n%s", q.body)
	}
	// Not for bob, not for another client of alice's.
	consentPageOf(t, e.back(own, ownRedirect, "bob", nil))
	rec = e.back(other, ownRedirect, "alice", p.cookie)
	consentPageOf(t, rec, p.cookie)
	if c := rec.Result().Cookies(); len(c) != 0 {
		t.Errorf("a second consent page in the same browser set %v: the first page's form would fail", c)
	}
	if got := e.s.approvals("alice"); len(got) != 1 || got[0].clientID != own || got[0].redirectURI != ownRedirect || got[0].name != "own <client>" {
		t.Errorf("alice's approvals: %+v", got)
	}
}

// TestRedirectKey checks what an approval is bound to: the redirect URI, but for http
// on a loopback IP literal, any port of it.
func TestRedirectKey(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		same bool
	}{
		{"http://127.0.0.1:1/cb", "http://127.0.0.1:2/cb", true},
		{"http://127.0.0.1/cb", "http://127.0.0.1:2/cb", true},
		{"http://[::1]:1/cb?x=1", "http://[::1]:2/cb?x=1", true},
		{"http://127.0.0.1:1/cb", "http://127.0.0.1:1/cb/", false},
		{"http://127.0.0.1:1/cb?x=1", "http://127.0.0.1:1/cb?x=2", false},
		{"http://127.0.0.1:1/cb", "http://127.0.0.2:1/cb", false},
		{"http://localhost:1/cb", "http://localhost:2/cb", false},
		{"https://app.example/cb", "https://app.example:443/cb", false},
		{"https://app.example/cb", "https://APP.example/cb", false},
		{"vscode://vscode.mcp/cb", "vscode://vscode.mcp:1/cb", false},
		{"http://127.0.0.1:1/cb", "https://127.0.0.1:1/cb", false},
	} {
		if got := redirectKey(tt.a) == redirectKey(tt.b); got != tt.same {
			t.Errorf("%s and %s: same approval %v, want %v", tt.a, tt.b, got, tt.same)
		}
	}
}

// TestConsentPageAllowOpener: with AllowOpener (a Hub whose users' servers are on
// subdomains, for web clients that follow the login in a popup through window.opener)
// the consent page is sent without Cross-Origin-Opener-Policy, its other headers kept.
func TestConsentPageAllowOpener(t *testing.T) {
	e := newConsentEnv(t, func(c *Config) { c.AllowOpener = true })
	id := e.register("client", evilRedirect)
	rec := e.back(id, evilRedirect, "alice", nil)
	consentPageOf(t, rec)
	if h := rec.Header(); h.Get("Cross-Origin-Opener-Policy") != "" || h.Get("X-Frame-Options") != "DENY" {
		t.Errorf("AllowOpener: COOP %q, X-Frame-Options %q; want none, DENY", h.Get("Cross-Origin-Opener-Policy"), h.Get("X-Frame-Options"))
	}
}
