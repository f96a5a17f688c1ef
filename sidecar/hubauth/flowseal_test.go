package hubauth

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestLoginBoundToBrowser checks that a login at the Hub ends only in the browser that
// started it: a page that has a user's browser follow the authorize link by script
// (fetch, a frame) is refused at once, and the callback's URL, read by such a page
// and opened in another browser, is refused before the Hub's code is used. A state
// this process did not seal, altered or past its deadline is refused too.
func TestLoginBoundToBrowser(t *testing.T) {
	e := newConsentEnv(t)
	const redirect = "https://app.example/cb"
	id := e.register("app", redirect)
	q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {redirect}, "state": {"st"},
		"code_challenge": {s256(strings.Repeat("v", 43))}, "code_challenge_method": {"S256"}}
	get := func(u string, mod func(*http.Request)) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if mod != nil {
			mod(req)
		}
		resp, err := e.noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	authorize := e.srv.URL + "/services/mcp/oauth/authorize?" + q.Encode()
	for _, fetch := range []map[string]string{{"Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}, {"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}} {
		if resp := get(authorize, func(r *http.Request) {
			for k, v := range fetch {
				r.Header.Set(k, v)
			}
		}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("authorize from %v: %d, want 403", fetch, resp.StatusCode)
		}
	}
	resp := get(authorize, nil)
	var mine *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == loginCookie {
			mine = c
		}
	}
	if resp.StatusCode != http.StatusFound || mine == nil || !mine.HttpOnly || mine.SameSite != http.SameSiteLaxMode {
		t.Fatalf("authorize: %d, login cookie %+v", resp.StatusCode, mine)
	}
	loc, _ := url.Parse(resp.Header.Get("Location"))
	state := loc.Query().Get("state")
	callback := e.srv.URL + "/services/mcp/oauth_callback?" + url.Values{"code": {"hub-code"}, "state": {state}}.Encode()
	other := &http.Cookie{Name: loginCookie, Value: random()}
	for name, c := range map[string]*http.Cookie{"no cookie": nil, "another browser's": other} {
		if resp := get(callback, func(r *http.Request) {
			if c != nil {
				r.AddCookie(c)
			}
		}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("callback with %s: %d, want 403", name, resp.StatusCode)
		}
	}
	// The browser that started it goes on to the Hub's token exchange (which fails here:
	// no Hub), so to the client with server_error rather than a refusal.
	if resp := get(callback, func(r *http.Request) { r.AddCookie(mine) }); resp.StatusCode != http.StatusFound ||
		!strings.HasPrefix(resp.Header.Get("Location"), redirect+"?") || !strings.Contains(resp.Header.Get("Location"), "server_error") {
		t.Errorf("callback in the browser that started it: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	altered := []byte(state)
	altered[len(altered)/2] ^= 1
	e.s.now = func() time.Time { return time.Now().Add(e.s.cfg.FlowTTL + time.Minute) }
	for name, st := range map[string]string{"altered": string(altered), "expired": state, "made up": random()} {
		u := e.srv.URL + "/services/mcp/oauth_callback?" + url.Values{"code": {"hub-code"}, "state": {st}}.Encode()
		if resp := get(u, func(r *http.Request) { r.AddCookie(mine) }); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("callback with an %s state: %d, want 400", name, resp.StatusCode)
		}
	}
}

// TestCallbackUsesTheCodeFirst checks that the Hub's code is used up at oauth_callback
// before any refusal: a script of the Hub's origin that had the user's browser reach the
// callback with the state of a login the attacker started (fetch, a frame) reads a URL
// whose code opens nothing any more. And a login cookie tossed in by a page of the
// origin, at a narrower path (sent first), does not turn the user's own browser away.
func TestCallbackUsesTheCodeFirst(t *testing.T) {
	exchanged := make(chan string, 8)
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		exchanged <- r.PostForm.Get("code")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"hub-token-of-alice","expires_in":3600}`))
	}))
	defer hub.Close()
	e := newConsentEnv(t, func(c *Config) { c.HubTokenURL = hub.URL + "/token" })
	const redirect = "https://app.example/cb"
	id := e.register("app", redirect)
	q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {redirect}, "state": {"st"},
		"code_challenge": {s256(strings.Repeat("v", 43))}, "code_challenge_method": {"S256"}}
	resp, err := e.noFollow.Get(e.srv.URL + "/services/mcp/oauth/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var attackers *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == loginCookie {
			attackers = c
		}
	}
	loc, _ := url.Parse(resp.Header.Get("Location"))
	callback := e.srv.URL + "/services/mcp/oauth_callback?" + url.Values{"code": {"alices-code"}, "state": {loc.Query().Get("state")}}.Encode()
	// The victim's browser, led there by a script: no login cookie of the attacker's.
	req, _ := http.NewRequest(http.MethodGet, callback, nil)
	req.Header.Set("Sec-Fetch-Mode", "cors")
	req.Header.Set("Sec-Fetch-Dest", "empty")
	if resp, err = e.noFollow.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("the callback from a script: %d, want 403", resp.StatusCode)
	}
	select {
	case code := <-exchanged:
		if code != "alices-code" {
			t.Errorf("exchanged %q", code)
		}
	default:
		t.Fatal("the callback refused without using up the Hub's code: the URL a script reads still opens a login")
	}
	// The user's own browser, with a cookie a page tossed in at the callback's path
	// (sent first) beside its own: taken.
	req, _ = http.NewRequest(http.MethodGet, callback, nil)
	req.Header.Set("Cookie", loginCookie+"=tossed-by-a-page; "+loginCookie+"="+attackers.Value)
	if resp, err = e.noFollow.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusForbidden {
		t.Errorf("the browser that started the login, with a tossed cookie sent first: 403")
	}
}
