package hubauth

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// signIn gives user a session of the approvals page (what oauth_callback does after the
// Hub's login) and returns the browser's cookie.
func (e *consentEnv) signIn(user string) *http.Cookie {
	secret := random()
	e.s.logins.put(hash(secret), session{user: user, csrf: random()}, sessionTTL)
	return &http.Cookie{Name: sessionCookie, Value: secret}
}

// consents loads the approvals page in a browser with cookie (nil: none), changed by
// mod: the status, the Location and the page.
func (e *consentEnv) consents(cookie *http.Cookie, mod func(*http.Request)) (int, string, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/services/mcp/oauth/consents", nil)
	req.Header.Set("Sec-Fetch-Site", "none") // typed in the address bar
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	req.Header.Set("Sec-Fetch-Dest", "document")
	if cookie != nil {
		req.AddCookie(cookie)
	}
	if mod != nil {
		mod(req)
	}
	resp, err := e.noFollow.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// TestApprovalsPage checks the approvals page: a browser without a session is sent to
// the Hub's login (a flow of its own kind), or, arriving from another site, shown a
// link there; a session lists its own user's approvals only, the client's name as
// isolated text; no token, the Hub's or the sidecar's, opens it; a script of another
// page of the origin cannot read it.
func TestApprovalsPage(t *testing.T) {
	e := newConsentEnv(t)
	const name = "Visual Studio Code\u202e <b>x</b>"
	own := e.register(name, ownRedirect, evilRedirect)
	mine := e.login(own, ownRedirect, "alice")
	e.login(own, evilRedirect, "bob")

	status, loc, _ := e.consents(nil, nil)
	u, _ := url.Parse(loc)
	if status != http.StatusFound || !strings.HasPrefix(loc, e.s.cfg.HubAuthorizeURL+"?") || u.Query().Get("client_id") != "service-mcp" ||
		u.Query().Get("redirect_uri") != e.s.cfg.HubRedirectURI || u.Query().Get("code_challenge_method") != "S256" {
		t.Fatalf("no session: %d %q, want the Hub's login", status, loc)
	}
	if f, _, err := e.s.open(u.Query().Get("state")); err != nil || !f.manage || f.clientID != "" {
		t.Fatalf("the sign-in's flow: %+v %v", f, err)
	}
	// Neither token opens the page: the sidecar's (a client's) nor the Hub's.
	for _, tok := range []string{mine.access, "tok-alice"} {
		status, loc, body := e.consents(nil, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) })
		if status != http.StatusFound || !strings.HasPrefix(loc, e.s.cfg.HubAuthorizeURL) || strings.Contains(body, own) {
			t.Errorf("with a bearer token %.10s…: %d %q %s", tok, status, loc, body)
		}
	}
	// From another site's link, the SameSite=Strict cookie would not come back: a
	// link of the origin's own, no redirect loop.
	status, loc, body := e.consents(nil, func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") })
	if status != http.StatusOK || loc != "" || !strings.Contains(body, `<a id="sign-in" href="/services/mcp/oauth/consents">`) {
		t.Errorf("from another site: %d %q %s", status, loc, body)
	}

	alice := e.signIn("alice")
	status, _, body = e.consents(alice, nil)
	if status != http.StatusOK || strings.Contains(body, "<b>x</b>") || strings.Contains(body, evilRedirect) {
		t.Fatalf("alice's page: %d %s", status, body)
	}
	for _, want := range []string{`<bdi dir="auto">` + html.EscapeString(cleanName(name)) + "</bdi>", "<code>" + own + "</code>", "<code>" + ownRedirect + "</code>",
		`<b id="user">alice</b>`, `<input type="hidden" name="redirect_uri" value="` + ownRedirect + `">`} {
		if !strings.Contains(body, want) {
			t.Errorf("alice's page lacks %q:\n%s", want, body)
		}
	}
	if status, _, body := e.consents(e.signIn("bob"), nil); status != http.StatusOK || !strings.Contains(body, evilRedirect) || strings.Contains(body, ownRedirect) {
		t.Errorf("bob's page: %d %s", status, body)
	}
	if status, _, body := e.consents(e.signIn("carol"), nil); status != http.StatusOK || !strings.Contains(body, `id="none"`) {
		t.Errorf("carol's page: %d %s", status, body)
	}
	// A fetch() of another page of the origin, or a frame, gets nothing.
	for name, mod := range map[string]func(*http.Request){
		"fetch": func(r *http.Request) { r.Header.Set("Sec-Fetch-Mode", "cors"); r.Header.Set("Sec-Fetch-Dest", "empty") },
		"frame": func(r *http.Request) { r.Header.Set("Sec-Fetch-Dest", "iframe") },
	} {
		if status, _, body := e.consents(alice, mod); status != http.StatusForbidden || strings.Contains(body, own) {
			t.Errorf("a %s of alice's page: %d %s", name, status, body)
		}
	}
	// The JSON API is gone.
	req, _ := http.NewRequest(http.MethodDelete, e.srv.URL+"/services/mcp/oauth/consents/"+own, nil)
	req.Header.Set("Authorization", "Bearer tok-alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent || !e.s.approved("alice", own, ownRedirect) {
		t.Errorf("DELETE with alice's Hub token: %d", resp.StatusCode)
	}
}

// TestApprovalsRevoke checks the Revoke button's POST: only from a click on the page,
// of the session's browser, with the session's token, and for the session's user:
// then the approval and every token of the user's the client holds end at once.
func TestApprovalsRevoke(t *testing.T) {
	for _, tt := range []struct {
		name    string
		cookie  string // "alice" (the default), "bob", "none", "forged"
		form    func(url.Values)
		req     func(*http.Request)
		status  int
		revoked bool
	}{
		{name: "a click", status: http.StatusSeeOther, revoked: true},
		{name: "no csrf token", form: func(f url.Values) { f.Del("csrf") }, status: http.StatusForbidden},
		{name: "a wrong csrf token", form: func(f url.Values) { f.Set("csrf", random()) }, status: http.StatusForbidden},
		{name: "no cookie", cookie: "none", status: http.StatusForbidden},
		{name: "a forged cookie", cookie: "forged", status: http.StatusForbidden},
		{name: "bob's session", cookie: "bob", status: http.StatusSeeOther},
		{name: "another origin", req: func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, status: http.StatusForbidden},
		{name: "a cross-site form", req: func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, status: http.StatusForbidden},
		{name: "a same-origin fetch", req: func(r *http.Request) {
			r.Header.Set("Sec-Fetch-Mode", "cors")
			r.Header.Set("Sec-Fetch-Dest", "empty")
			r.Header.Del("Sec-Fetch-User")
		}, status: http.StatusForbidden},
		{name: "a script's form.submit()", req: func(r *http.Request) { r.Header.Del("Sec-Fetch-User") }, status: http.StatusForbidden},
		{name: "another redirect URI", form: func(f url.Values) { f.Set("redirect_uri", evilRedirect) }, status: http.StatusSeeOther},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newConsentEnv(t)
			own := e.register("own", ownRedirect, evilRedirect)
			other := e.register("other", ownRedirect)
			tokens := e.login(own, ownRedirect, "alice")
			others := e.login(other, ownRedirect, "alice")
			bobs := e.login(own, ownRedirect, "bob")
			sessions := map[string]*http.Cookie{"alice": e.signIn("alice"), "bob": e.signIn("bob"), "forged": {Name: sessionCookie, Value: random()}}
			cookie := sessions[map[bool]string{true: tt.cookie, false: "alice"}[tt.cookie != ""]]
			sess, _ := e.s.session(&http.Request{Header: http.Header{"Cookie": {sessionCookie + "=" + sessions["alice"].Value}}})
			form := url.Values{"csrf": {sess.csrf}, "client_id": {own}, "redirect_uri": {"http://127.0.0.1:9/cb"}}
			if tt.cookie == "bob" {
				bs, _ := e.s.session(&http.Request{Header: http.Header{"Cookie": {sessionCookie + "=" + sessions["bob"].Value}}})
				form.Set("csrf", bs.csrf)
			}
			if tt.form != nil {
				tt.form(form)
			}
			req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/services/mcp/oauth/consents", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", "https://hub.example.org")
			click(req)
			if cookie != nil {
				req.AddCookie(cookie)
			}
			if tt.req != nil {
				tt.req(req)
			}
			resp, err := e.noFollow.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status || (tt.status == http.StatusSeeOther && !strings.HasPrefix(resp.Header.Get("Location"), "/services/mcp/oauth/consents")) {
				t.Fatalf("%d %q, want %d", resp.StatusCode, resp.Header.Get("Location"), tt.status)
			}
			if got := !e.s.approved("alice", own, ownRedirect); got != tt.revoked {
				t.Errorf("alice's approval revoked: %v, want %v", got, tt.revoked)
			}
			if _, err := e.whose(tokens.access); (err != nil) != tt.revoked {
				t.Errorf("alice's access token of the client: %v, want revoked %v", err, tt.revoked)
			}
			if status, _, _ := e.refresh(own, tokens.refresh); (status != http.StatusOK) != tt.revoked {
				t.Errorf("alice's refresh token of the client: %d, want revoked %v", status, tt.revoked)
			}
			if _, err := e.whose(others.access); err != nil {
				t.Errorf("alice's token of her other client: %v", err)
			}
			// bob's session revokes bob's approval, never alice's.
			if _, err := e.whose(bobs.access); (err != nil) != (tt.cookie == "bob") {
				t.Errorf("bob's access token: %v", err)
			}
		})
	}
}
