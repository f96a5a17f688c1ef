package hubauth

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// consentEnv is a Server over HTTP with Hub users by token: "tok-alice" is alice's,
// "tok-bob" bob's.
type consentEnv struct {
	t        *testing.T
	s        *Server
	srv      *httptest.Server
	noFollow *http.Client
}

func newConsentEnv(t *testing.T) *consentEnv {
	t.Helper()
	c := testConfig()
	c.AllowedRedirectSchemes = []string{"vscode"}
	c.Verify = func(_ context.Context, tok string) (string, error) {
		if u, ok := strings.CutPrefix(tok, "tok-"); ok {
			return u, nil
		}
		return "", errors.New("not a Hub token")
	}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &consentEnv{t: t, s: s, srv: srv,
		noFollow: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// register registers a client named name with redirect and returns its id.
func (e *consentEnv) register(name, redirect string) string {
	e.t.Helper()
	b, _ := json.Marshal(map[string]any{"client_name": name, "redirect_uris": []string{redirect}})
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
	f, ok := e.s.flows.take(loc.Query().Get("state"))
	if !ok {
		e.t.Fatal("no flow for the Hub's state")
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
	req.Header.Set("Sec-Fetch-Site", "same-origin")
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
		"Content-Type": "text/html; charset=utf-8", "Referrer-Policy": "same-origin"} {
		if h.Get(k) != want {
			t.Errorf("%s: %q, want %q", k, h.Get(k), want)
		}
	}
	if c := p.cookie; !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || !c.Secure || c.Path != "/services/mcp/" || c.MaxAge != 0 {
		t.Errorf("consent cookie %+v: want HttpOnly, SameSite=Strict, Secure (https issuer), Path /services/mcp/, a session cookie", c)
	}
	for _, bad := range []string{"<script", "<img", `Evil">`} {
		if strings.Contains(p.body, bad) {
			t.Errorf("the page holds the client's markup %q:\n%s", bad, p.body)
		}
	}
	for _, want := range []string{html.EscapeString(name), "<b id=\"user\">alice</b>", "<code>evil.example</code>", id,
		`<button type="submit" name="decision" value="approve">`, `<button type="submit" name="decision" value="deny">`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the page lacks %q:\n%s", want, p.body)
		}
	}
	if p.form.Get("client_id") != id {
		t.Errorf("the form names client %q, want %q", p.form.Get("client_id"), id)
	}
	// A user name is escaped too, and a private-use scheme is named as an application.
	app := e.register("app", "vscode://vscode.mcp/cb")
	q := consentPageOf(t, e.back(app, "vscode://vscode.mcp/cb", "<u>", nil))
	if !strings.Contains(q.body, "&lt;u&gt;") || strings.Contains(q.body, "<u>") || !strings.Contains(q.body, "vscode://vscode.mcp (an application on this computer)") {
		t.Errorf("page for user <u> and a vscode: client:\n%s", q.body)
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
				if _, ok := e.s.granted.get(approvalKey("alice", id)); ok != (approved && who == "evil") {
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

// TestConsentRemembered checks that an approval is remembered for its user and client
// only, that the code it gives redeems for the Hub's token, and that the user can list
// and revoke approvals with their Hub token.
func TestConsentRemembered(t *testing.T) {
	e := newConsentEnv(t)
	own := e.register("own <client>", ownRedirect)
	other := e.register("other", ownRedirect)
	p := consentPageOf(t, e.back(own, ownRedirect, "alice", nil))
	status, loc := e.submit(with(p.form, "decision", "approve"), p.cookie, nil)
	if status != http.StatusFound || !strings.Contains(loc, "code=") {
		t.Fatalf("approve: %d %q", status, loc)
	}
	u, _ := url.Parse(loc)
	resp, err := http.PostForm(e.srv.URL+"/services/mcp/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {u.Query().Get("code")},
		"redirect_uri": {ownRedirect}, "client_id": {own}, "code_verifier": {strings.Repeat("v", 43)}})
	if err != nil {
		t.Fatal(err)
	}
	var tok map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if tok["access_token"] != "hub-token-of-alice" {
		t.Fatalf("token: %d %v", resp.StatusCode, tok)
	}
	// Remembered: alice's next login through the same client goes straight back.
	if rec := e.back(own, ownRedirect, "alice", p.cookie); rec.Code != http.StatusFound || !strings.Contains(rec.Header().Get("Location"), "code=") {
		t.Fatalf("alice's second login: %d %v", rec.Code, rec.Header())
	}
	// Not for bob, not for another client of alice's.
	consentPageOf(t, e.back(own, ownRedirect, "bob", nil))
	rec := e.back(other, ownRedirect, "alice", p.cookie)
	consentPageOf(t, rec, p.cookie)
	if c := rec.Result().Cookies(); len(c) != 0 {
		t.Errorf("a second consent page in the same browser set %v: the first page's form would fail", c)
	}

	call := func(method, path, token string) (int, string) {
		req, _ := http.NewRequest(method, e.srv.URL+"/services/mcp/oauth/consents"+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := call(http.MethodGet, "", ""); status != http.StatusUnauthorized {
		t.Errorf("the list without a token: %d %s", status, body)
	}
	if status, body := call(http.MethodGet, "", "forged"); status != http.StatusUnauthorized {
		t.Errorf("the list with a bad token: %d %s", status, body)
	}
	var list struct {
		Consents []struct {
			ClientID   string `json:"client_id"`
			ClientName string `json:"client_name"`
		} `json:"consents"`
	}
	status, body := call(http.MethodGet, "", "tok-alice")
	if status != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list.Consents) != 1 ||
		list.Consents[0].ClientID != own || list.Consents[0].ClientName != "own <client>" {
		t.Fatalf("alice's approvals: %d %s", status, body)
	}
	if status, body := call(http.MethodGet, "", "tok-bob"); status != http.StatusOK || body != "{\"consents\":[]}\n" {
		t.Errorf("bob's approvals: %d %s", status, body)
	}
	if status, _ := call(http.MethodDelete, "/"+own, "tok-bob"); status != http.StatusNotFound {
		t.Errorf("bob revoking alice's approval: %d, want 404", status)
	}
	if status, _ := call(http.MethodDelete, "/"+own, "tok-alice"); status != http.StatusNoContent {
		t.Fatalf("alice revoking: %d", status)
	}
	if status, _ := call(http.MethodDelete, "/"+own, "tok-alice"); status != http.StatusNotFound {
		t.Errorf("revoking twice: %d, want 404", status)
	}
	// Revoked: the next login asks again.
	consentPageOf(t, e.back(own, ownRedirect, "alice", p.cookie), p.cookie)
}
