package hub

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/browser"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// TestHubLoginTokens attacks the login's approvals and tokens with the built binary, the
// real JupyterHub and people in headless Chromium: an approval covers the one redirect
// URI the user saw (a client's other URI gets the consent page again, naming it); a
// client holds the sidecar's own tokens, never the Hub's, which rotate on refresh, end
// as a whole when a replaced refresh token comes back, end on RFC 7009 revocation and
// at once when the user revokes the approval on the approvals page (where she signs in
// with the Hub in her browser, and where a client's token opens nothing); a script of
// another page of the Hub's origin can neither read the consent form nor post it, and
// the user's click still approves.
func TestHubLoginTokens(t *testing.T) {
	people := browser.HubLogin(t)
	hub, users, sc := startHubAuth(t, "alice")
	alice := users["alice"]
	endpoint := hub.ServicePrefix() + "mcp"
	issuer := strings.TrimRight(hub.ServicePrefix(), "/")
	consents := issuer + "/oauth/consents"
	// inHerBrowser is a login in alice's browser, her Hub login kept between logins.
	inHerBrowser := func(more map[string]any) map[string]any {
		m := map[string]any{"session": "alice"}
		maps.Copy(m, more)
		return m
	}
	register := func(name string, redirects ...string) string {
		var reg struct {
			ClientID string `json:"client_id"`
		}
		postJSON(t, issuer+"/oauth/register", map[string]any{"client_name": name, "redirect_uris": redirects}, http.StatusCreated, &reg)
		return reg.ClientID
	}
	post := func(path string, form url.Values) (int, map[string]any) {
		resp, err := http.PostForm(issuer+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	// tokens redeems code for c's tokens: the access and the refresh token.
	tokens := func(t *testing.T, c oauthClient, code string) (string, string) {
		t.Helper()
		status, out := post("/oauth/token", c.tokenForm(code, nil))
		access, _ := out["access_token"].(string)
		refresh, _ := out["refresh_token"].(string)
		if status != http.StatusOK || access == "" {
			t.Fatalf("token: %d %v", status, out)
		}
		return access, refresh
	}
	refresh := func(c oauthClient, rt string) (int, map[string]any) {
		return post("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {c.id}})
	}
	// admitted reports whether the MCP endpoint takes tok.
	admitted := func(tok string) bool {
		status, _ := sidecartest.RPCStatusAs(t, endpoint, "", "Bearer "+tok, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
		return status != http.StatusUnauthorized
	}
	var secrets []string // every token handed out, none of which may reach the log

	t.Run("consent bound to the redirect URI", func(t *testing.T) {
		// A client with alice's loopback listener and a redirect URI of its own choosing.
		own, ownDelivered := listenRedirect(t)
		const evil = "https://evil.example/x"
		c := newOAuthClient(t, issuer, endpoint, register("two-faced", own, evil), own)
		l := logIn(t, people, c.authorizeURL(nil), "alice", own, inHerBrowser(nil))
		if back := testenv.Receive(t, testenv.Wait, "alice's code at her listener", ownDelivered); !strings.HasSuffix(fmt.Sprint(l.Seen), "consent]") || back.Get("code") == "" {
			t.Fatalf("alice approving the client for %s: %+v, got %v", own, l, back)
		}
		// The same client's link with its other redirect URI, in alice's browser: the
		// consent page again, naming that URI in full; nothing goes there.
		l = logIn(t, people, c.authorizeURL(func(q url.Values) { q.Set("redirect_uri", evil) }), "alice", evil,
			inHerBrowser(map[string]any{"consent": "none", "intercept": "https://evil.example/"}))
		if fmt.Sprint(l.Seen) != "[consent]" || len(l.Intercepted) != 0 || !strings.HasPrefix(l.URL, issuer+"/oauth_callback?") || !strings.Contains(l.Text, evil) {
			t.Fatalf("the client's link to %s after alice approved %s: %+v; want the consent page naming %s", evil, own, l, evil)
		}
		// Another port of her loopback listener's address is the same approval (RFC
		// 8252): no page.
		other, otherDelivered := listenRedirect(t)
		l = logIn(t, people, c.authorizeURL(func(q url.Values) { q.Set("redirect_uri", other) }), "alice", other, inHerBrowser(nil))
		if back := testenv.Receive(t, testenv.Wait, "alice's code on another port", otherDelivered); fmt.Sprint(l.Seen) != "[]" || back.Get("code") == "" {
			t.Fatalf("alice's login through %s: %+v, got %v; want no page and a code", other, l, back)
		}
	})

	t.Run("the sidecar's own tokens", func(t *testing.T) {
		redirect, delivered := listenRedirect(t)
		c := newOAuthClient(t, issuer, endpoint, register("tokens", redirect), redirect)
		code := c.code(t, people, "alice", delivered)
		status, out := post("/oauth/token", c.tokenForm(code, nil))
		access, _ := out["access_token"].(string)
		rt, _ := out["refresh_token"].(string)
		secrets = append(secrets, access, rt)
		if status != http.StatusOK || !strings.HasPrefix(access, "jms_at_") || !strings.HasPrefix(rt, "jms_rt_") || out["expires_in"] != float64(3600) {
			t.Fatalf("token response: %d %v; want the sidecar's access and refresh tokens, 1 h", status, out)
		}
		// Not a token the Hub knows.
		req, _ := http.NewRequest(http.MethodGet, hub.APIURL+"/user", nil)
		req.Header.Set("Authorization", "token "+access)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the Hub's API with the client's token: %d", resp.StatusCode)
		}
		g, err := sidecartest.DialGoAs(t, endpoint, true, "Bearer "+access)
		if err != nil {
			t.Fatal(err)
		}
		g.Bind(sidecartest.NbName, sidecartest.NbPath)
		sameNotebook(t, g, sidecartest.NbURI, alice.py.Notebook("a", sidecartest.NbPath))
		g.Close()
		// The code again (someone else saw it): refused, and the tokens it gave end.
		if status, out := post("/oauth/token", c.tokenForm(code, nil)); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Errorf("the code again: %d %v", status, out)
		}
		if admitted(access) {
			t.Error("the tokens of a code redeemed twice still work")
		}
	})

	t.Run("refresh rotation and reuse", func(t *testing.T) {
		redirect, delivered := listenRedirect(t)
		c := newOAuthClient(t, issuer, endpoint, register("refreshing", redirect), redirect)
		access, rt := tokens(t, c, c.code(t, people, "alice", delivered))
		status, out := refresh(c, rt)
		access2, _ := out["access_token"].(string)
		rt2, _ := out["refresh_token"].(string)
		secrets = append(secrets, access, rt, access2, rt2)
		if status != http.StatusOK || access2 == "" || rt2 == "" || rt2 == rt || access2 == access {
			t.Fatalf("refresh: %d %v; want a new access and refresh token", status, out)
		}
		if admitted(access) || !admitted(access2) {
			t.Fatalf("after the refresh: the old access token admitted %v, the new %v", admitted(access), admitted(access2))
		}
		// The replaced refresh token again (a thief's copy): refused, and the whole
		// login ends, the new tokens too.
		if status, out := refresh(c, rt); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Errorf("the replaced refresh token: %d %v", status, out)
		}
		if admitted(access2) {
			t.Error("after a refresh token's reuse, the login's access token still works")
		}
		if status, out := refresh(c, rt2); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Errorf("after a refresh token's reuse, the login's refresh token: %d %v", status, out)
		}
	})

	t.Run("RFC 7009 revocation", func(t *testing.T) {
		var asm map[string]any
		getJSON(t, issuer+"/.well-known/oauth-authorization-server", &asm)
		if asm["revocation_endpoint"] != issuer+"/oauth/revoke" || fmt.Sprint(asm["grant_types_supported"]) != "[authorization_code refresh_token]" {
			t.Errorf("metadata: %v", asm)
		}
		redirect, delivered := listenRedirect(t)
		c := newOAuthClient(t, issuer, endpoint, register("revoking", redirect), redirect)
		access, rt := tokens(t, c, c.code(t, people, "alice", delivered))
		secrets = append(secrets, access, rt)
		if status, _ := post("/oauth/revoke", url.Values{"token": {rt}, "client_id": {c.id}}); status != http.StatusOK {
			t.Fatalf("revoke: %d", status)
		}
		if admitted(access) {
			t.Error("the access token of a revoked refresh token still works")
		}
		if status, out := refresh(c, rt); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Errorf("a revoked refresh token: %d %v", status, out)
		}
		if status, _ := post("/oauth/revoke", url.Values{"token": {"jms_rt_unknown"}, "client_id": {c.id}}); status != http.StatusOK {
			t.Errorf("an unknown token: %d, want 200", status)
		}
	})

	t.Run("a client's token cannot list or revoke approvals", func(t *testing.T) {
		redirect, delivered := listenRedirect(t)
		c := newOAuthClient(t, issuer, endpoint, register("nosy", redirect), redirect)
		access, rt := tokens(t, c, c.code(t, people, "alice", delivered))
		secrets = append(secrets, access, rt)
		for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPost} {
			path := consents
			if method == http.MethodDelete {
				path += "/" + c.id
			}
			req, _ := http.NewRequest(method, path, strings.NewReader(url.Values{"client_id": {c.id}, "redirect_uri": {redirect}}.Encode()))
			req.Header.Set("Authorization", "Bearer "+access)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := noFollow.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 || strings.Contains(string(b), c.id) {
				t.Errorf("%s %s with the client's token: %d %s", method, path, resp.StatusCode, b)
			}
		}
		if !admitted(access) {
			t.Error("the client's token after its tries: refused")
		}
		c.code(t, people, "alice", delivered) // still approved: no page
	})

	t.Run("the user revokes an approval on the page", func(t *testing.T) {
		redirect, delivered := listenRedirect(t)
		const name = `to revoke <b>me</b>`
		c := newOAuthClient(t, issuer, endpoint, register(name, redirect), redirect)
		logIn(t, people, c.authorizeURL(nil), "alice", redirect, inHerBrowser(nil))
		access, rt := tokens(t, c, testenv.Receive(t, testenv.Wait, "alice's code", delivered).Get("code"))
		secrets = append(secrets, access, rt)
		// The page, in her browser: the Hub signs her in (she is logged in there), and it
		// lists the client, its name as text, and where it sends her back.
		l := logIn(t, people, consents, "alice", consents, inHerBrowser(nil))
		if !strings.HasPrefix(l.URL, consents) || l.Status != http.StatusOK || !strings.Contains(l.Text, c.id) || !strings.Contains(l.Text, name) || !strings.Contains(l.Text, redirect) {
			t.Fatalf("alice's approvals page: %+v", l)
		}
		// Another browser, not logged in at the Hub: the Hub's login form first.
		if l := logIn(t, people, consents, "alice", consents); len(l.Seen) == 0 || l.Seen[0] != "login" || !strings.Contains(l.Text, c.id) {
			t.Errorf("a browser without the Hub's login: %+v, want the Hub's login form, then the page", l)
		}
		l = logIn(t, people, consents, "alice", consents, inHerBrowser(map[string]any{"click": `form:has(input[name=client_id][value="` + c.id + `"]) button`}))
		if l.Status != http.StatusOK || strings.Contains(l.Text, c.id) {
			t.Fatalf("after alice's click on Revoke: %+v", l)
		}
		// At once, not at the token's end.
		if admitted(access) {
			t.Error("the client's access token after alice revoked it")
		}
		if status, out := refresh(c, rt); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Errorf("the client's refresh token after alice revoked it: %d %v", status, out)
		}
		if l := logIn(t, people, c.authorizeURL(nil), "alice", redirect, inHerBrowser(map[string]any{"consent": "none"})); fmt.Sprint(l.Seen) != "[consent]" {
			t.Errorf("the client's next login: %+v, want the consent page", l)
		}
	})

	t.Run("a same-origin page's script", func(t *testing.T) {
		page := sameOriginPage(t, hub)
		action := issuer + "/oauth/consent"
		logIn(t, people, consents, "alice", consents, inHerBrowser(nil)) // she is logged in at the Hub
		// The script fetches a client's authorization URL, following the Hub's redirects
		// to the consent page, to read its form and post it.
		redirect, delivered := listenRedirect(t)
		a := newOAuthClient(t, issuer, endpoint, register("fetcher", redirect), redirect)
		v := visit(t, people, page+"?"+url.Values{"mode": {"fetch"}, "authorize": {a.authorizeURL(nil)}, "action": {action}}.Encode(), inHerBrowser(nil))
		var got struct {
			Status  int  `json:"status"`
			Form    bool `json:"form"`
			Approve any  `json:"approve"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(v.Text)), &got); err != nil || got.Form || got.Status != http.StatusForbidden || len(delivered) != 0 {
			t.Errorf("a script fetching the consent page: %+v %v, the client got %d responses; want 403, no form", got, err, len(delivered))
		}
		// The script opens the authorization URL in a window of its own: the consent page
		// it reaches is out of its hands (it read the form and rewrote the page around the
		// user's click, red team pass 11, H1).
		redirect, delivered = listenRedirect(t)
		o := newOAuthClient(t, issuer, endpoint, register("opener", redirect), redirect)
		v = visit(t, people, page+"?"+url.Values{"mode": {"popup"}, "authorize": {o.authorizeURL(nil)}}.Encode(), inHerBrowser(nil))
		var popup struct {
			Opened bool `json:"opened"`
			Form   bool `json:"form"`
			Lost   bool `json:"lost"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(v.Text)), &popup); err != nil || !popup.Opened || popup.Form || !popup.Lost || len(delivered) != 0 {
			t.Errorf("a script's window of the authorization URL: %s %v; want it opened, then lost, its form never read", v.Text, err)
		}
		// Given a real consent page's form, the script posts it with fetch() and with
		// form.submit(): both refused, and the page stays usable.
		redirect, delivered = listenRedirect(t)
		b := newOAuthClient(t, issuer, endpoint, register("submitter", redirect), redirect)
		l := logIn(t, people, b.authorizeURL(nil), "alice", redirect, inHerBrowser(map[string]any{"consent": "none"}))
		if fmt.Sprint(l.Seen) != "[consent]" || l.Form["csrf"] == "" {
			t.Fatalf("the consent page: %+v", l)
		}
		form := url.Values{"action": {action}}
		for k, val := range l.Form {
			form.Set(k, val)
		}
		form.Set("mode", "post")
		v = visit(t, people, page+"?"+form.Encode(), inHerBrowser(nil))
		if err := json.Unmarshal([]byte(strings.TrimSpace(v.Text)), &got); err != nil || got.Approve != float64(http.StatusForbidden) {
			t.Errorf("a script's fetch() posting the form: %s, want 403", v.Text)
		}
		form.Set("mode", "submit")
		v = visit(t, people, page+"?"+form.Encode(), inHerBrowser(map[string]any{"leave": true}))
		if v.Status != http.StatusForbidden || !strings.HasPrefix(v.URL, action) {
			t.Errorf("a script's form.submit(): %+v, want 403 at %s", v, action)
		}
		if len(delivered) != 0 {
			t.Fatalf("the client got %v from a script's post", <-delivered)
		}
		// alice's click approves.
		l = logIn(t, people, b.authorizeURL(nil), "alice", redirect, inHerBrowser(nil))
		if back := testenv.Receive(t, testenv.Wait, "the code after alice's click", delivered); fmt.Sprint(l.Seen) != "[consent]" || back.Get("code") == "" {
			t.Errorf("alice's click: %+v, got %v", l, back)
		}
	})

	// Revoked at the Hub, the Hub token behind a client's tokens ends them within
	// hub.token_cache_ttl (1 s here).
	t.Run("revoked at the Hub", func(t *testing.T) {
		redirect, delivered := listenRedirect(t)
		c := newOAuthClient(t, issuer, endpoint, register("hub-revoked", redirect), redirect)
		access, rt := tokens(t, c, c.code(t, people, "alice", delivered))
		secrets = append(secrets, access, rt)
		revokeOAuthTokens(t, hub, "alice")
		testenv.Eventually(t, testenv.Wait, "the client's token refused once its Hub token is revoked", func() bool { return !admitted(access) })
		if status, _ := refresh(c, rt); status != http.StatusBadRequest {
			t.Errorf("the refresh token after its Hub token was revoked: %d", status)
		}
	})

	logs := sc.Logs.String()
	for _, secret := range secrets {
		if secret != "" && strings.Contains(logs, secret) {
			t.Errorf("the sidecar's log holds a token %.10s…", secret)
		}
	}
}

// visitResult is where a page's own script left the browser (hublogin.mjs's "visit").
type visitResult struct {
	URL    string `json:"url"`
	Status int    `json:"status"`
	Text   string `json:"text"`
}

// visit opens pageURL in people's browser, its script running at load (no click), and
// waits for it (more: "session", "leave").
func visit(t *testing.T, people *jupytertest.Client, pageURL string, more map[string]any) visitResult {
	t.Helper()
	cmd := map[string]any{"op": "visit", "url": pageURL}
	maps.Copy(cmd, more)
	b, _ := json.Marshal(people.Do(cmd))
	var v visitResult
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// sameOriginPage serves attackPage through the Hub's proxy at /pages/attack, the Hub's
// origin, as another user's server is served on a Hub without subdomains; it returns
// the page's URL.
func sameOriginPage(t *testing.T, hub *jhubtest.Hub) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, attackPage)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	hub.Route("/pages/", "http://"+ln.Addr().String())
	return hub.ProxyURL + "/pages/attack"
}

// attackPage's script runs at load, as a script of another user's page would, in the
// mode its query names: "fetch" reads the consent page at the authorization URL
// "authorize" with fetch() and posts its form to "action" approving; "post" posts the
// consent form's fields in the query with fetch(); "submit" posts them with a form's
// submit(), navigating the window. It shows what it could read as JSON, then #done.
const attackPage = `<!doctype html><html><body><pre id="result"></pre><script>
(async () => {
  const p = new URLSearchParams(location.search);
  const out = {};
  const approve = (f) => new URLSearchParams({ consent: f.consent || '', csrf: f.csrf || '', client_id: f.client_id || '', decision: 'approve' });
  const postForm = (f) => fetch(p.get('action'), { method: 'POST', body: approve(f), credentials: 'include' }).then((a) => a.status, (e) => String(e));
  try {
    if (p.get('mode') === 'fetch') {
      const r = await fetch(p.get('authorize'), { credentials: 'include' });
      const body = await r.text();
      const field = (n) => (body.match(new RegExp('name="' + n + '" value="([^"]*)"')) || [])[1];
      out.status = r.status;
      out.form = field('csrf') !== undefined;
      if (out.form) out.approve = await postForm({ consent: field('consent'), csrf: field('csrf'), client_id: field('client_id') });
    } else if (p.get('mode') === 'popup') {
      // A window of the authorization URL: once it shows the consent page, can its form be
      // read, and the page rewritten around the user's click?
      const w = window.open(p.get('authorize'), 'login');
      out.opened = !!w;
      for (let i = 0; w && i < 100 && out.form === undefined; i++) {
        await new Promise((r) => setTimeout(r, 100));
        try {
          const f = w.document.querySelector('input[name="csrf"]');
          if (f) out.form = f.value !== '';
        } catch (e) {
          out.denied = String(e);
        }
        if (w.closed) out.lost = true;
        if (out.lost) break;
      }
      if (out.form === undefined) out.form = false;
    } else if (p.get('mode') === 'post') {
      out.approve = await postForm(Object.fromEntries(p));
    } else if (p.get('mode') === 'submit') {
      const f = document.createElement('form');
      f.method = 'post';
      f.action = p.get('action');
      for (const [k, v] of approve(Object.fromEntries(p))) {
        const i = document.createElement('input');
        i.type = 'hidden';
        i.name = k;
        i.value = v;
        f.appendChild(i);
      }
      document.body.appendChild(f);
      f.submit();
      return;
    }
  } catch (e) {
    out.error = String(e);
  }
  document.getElementById('result').textContent = JSON.stringify(out);
  document.body.appendChild(Object.assign(document.createElement('p'), { id: 'done' }));
})();
</script></body></html>`
