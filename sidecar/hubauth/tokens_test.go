package hubauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
)

// pkceVerifier is the verifier of consentEnv.back's challenge.
var pkceVerifier = strings.Repeat("v", 43)

// code has user log in through clientID's redirect, approving on the consent page if
// it is shown, and returns the code the client gets.
func (e *consentEnv) code(clientID, redirect, user string) string {
	e.t.Helper()
	rec := e.back(clientID, redirect, user, nil)
	loc := rec.Header().Get("Location")
	if rec.Code == http.StatusOK {
		p := consentPageOf(e.t, rec)
		_, loc = e.submit(with(p.form, "decision", "approve"), p.cookie, nil)
	}
	u, err := url.Parse(loc)
	if err != nil || u.Query().Get("code") == "" {
		e.t.Fatalf("%s's login through %s: no code in %q", user, redirect, loc)
	}
	return u.Query().Get("code")
}

// post posts form to the issuer's path: the status and the JSON answer.
func (e *consentEnv) post(path string, form url.Values) (int, map[string]any) {
	e.t.Helper()
	resp, err := http.PostForm(e.srv.URL+"/services/mcp"+path, form)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// redeem redeems code of clientID's login through redirect.
func (e *consentEnv) redeem(clientID, redirect, code string) (int, map[string]any) {
	e.t.Helper()
	return e.post("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
		"client_id": {clientID}, "code_verifier": {pkceVerifier}})
}

// pair is a token response's access and refresh token.
type pair struct{ access, refresh string }

// login has user log in through clientID's redirect and returns the client's tokens.
func (e *consentEnv) login(clientID, redirect, user string) pair {
	e.t.Helper()
	status, out := e.redeem(clientID, redirect, e.code(clientID, redirect, user))
	p := pair{fmt.Sprint(out["access_token"]), fmt.Sprint(out["refresh_token"])}
	if status != http.StatusOK || !strings.HasPrefix(p.access, accessPrefix) || !strings.HasPrefix(p.refresh, refreshPrefix) {
		e.t.Fatalf("%s's tokens: %d %v", user, status, out)
	}
	return p
}

// refresh is clientID's refresh with rt.
func (e *consentEnv) refresh(clientID, rt string) (int, map[string]any, pair) {
	e.t.Helper()
	status, out := e.post("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {clientID}})
	return status, out, pair{fmt.Sprint(out["access_token"]), fmt.Sprint(out["refresh_token"])}
}

// hubVerifier stands for the "jupyterhub" verifier behind the endpoint's: it records
// the tokens it was asked about.
type hubVerifier struct {
	mu   sync.Mutex
	seen []string
}

func (h *hubVerifier) Verify(_ context.Context, tok string) (auth.Principal, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, tok)
	if u, ok := strings.CutPrefix(tok, "tok-"); ok {
		return auth.Principal{User: u}, nil
	}
	return auth.Principal{}, errRejected
}

// whose is the user the MCP endpoint's verifier admits token for, or its error.
func (e *consentEnv) whose(token string) (string, error) {
	p, err := e.s.Verifier(&hubVerifier{}).Verify(context.Background(), token)
	return p.User, err
}

func (e *consentEnv) metric(name string, labels ...string) float64 {
	e.t.Helper()
	return testenv.Metric(e.t, e.reg, promreg.Namespace+"_hubauth_"+name, labels...)
}

// TestTokens checks the token endpoint's answer: the sidecar's own tokens, never the
// Hub's, which the MCP endpoint's verifier admits to their user while the Hub token
// behind them stands; a token of the sidecar's is never sent to the Hub.
func TestTokens(t *testing.T) {
	e := newConsentEnv(t)
	own := e.register("own", ownRedirect)
	status, out := e.redeem(own, ownRedirect, e.code(own, ownRedirect, "alice"))
	b, _ := json.Marshal(out)
	if status != http.StatusOK || out["token_type"] != "Bearer" || out["expires_in"] != float64(3600) || strings.Contains(string(b), "hub-token-of") ||
		len(fmt.Sprint(out["access_token"])) != len(accessPrefix)+randomLen || len(fmt.Sprint(out["refresh_token"])) != len(refreshPrefix)+randomLen {
		t.Fatalf("token response: %d %s", status, b)
	}
	p := pair{fmt.Sprint(out["access_token"]), fmt.Sprint(out["refresh_token"])}
	if u, err := e.whose(p.access); u != "alice" || err != nil {
		t.Fatalf("alice's access token: %q %v", u, err)
	}
	// Stored as digests only.
	for d := range e.s.tokens.access {
		if strings.Contains(d, p.access) || d != hash(p.access) {
			t.Errorf("the store keys an access token by %q", d)
		}
	}
	// Users' own Hub tokens go to the Hub's verifier; the sidecar's never do.
	hub := &hubVerifier{}
	v := e.s.Verifier(hub)
	if pr, err := v.Verify(context.Background(), "tok-bob"); pr.User != "bob" || err != nil {
		t.Errorf("bob's Hub token: %v %v", pr, err)
	}
	for _, tok := range []string{p.refresh, accessPrefix + random(), tokenPrefix + "x", p.access + "x"} {
		if pr, err := v.Verify(context.Background(), tok); !errors.Is(err, auth.ErrUnauthorized) {
			t.Errorf("%.12s…: %v %v, want refused", tok, pr, err)
		}
	}
	if fmt.Sprint(hub.seen) != "[tok-bob]" {
		t.Errorf("the Hub's verifier was asked about %q", hub.seen)
	}
	// The Hub not answering refuses the token for now, and ends nothing.
	e.down.Store(true)
	if _, err := e.whose(p.access); !errors.Is(err, auth.ErrUnavailable) {
		t.Errorf("with the Hub down: %v, want ErrUnavailable", err)
	}
	if status, out, _ := e.refresh(own, p.refresh); status != http.StatusServiceUnavailable {
		t.Errorf("refresh with the Hub down: %d %v", status, out)
	}
	e.down.Store(false)
	if u, err := e.whose(p.access); u != "alice" || err != nil {
		t.Fatalf("alice's access token with the Hub back: %q %v", u, err)
	}
	// Revoked at the Hub: the sidecar's tokens end, for good.
	e.revoked.Store("hub-token-of-alice", true)
	if _, err := e.whose(p.access); !errors.Is(err, auth.ErrUnauthorized) {
		t.Errorf("with the Hub token revoked: %v", err)
	}
	e.revoked.Delete("hub-token-of-alice")
	if _, err := e.whose(p.access); !errors.Is(err, auth.ErrUnauthorized) {
		t.Errorf("the access token after its Hub token was refused once: %v", err)
	}
	if status, out, _ := e.refresh(own, p.refresh); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("refresh after the Hub token was refused: %d %v", status, out)
	}
	if n := e.metric("token_families_revoked_total", "reason", "hub_token_rejected"); n != 1 {
		t.Errorf("hub_token_rejected: %v", n)
	}
}

// TestRefreshRotation checks that a refresh gives new tokens and ends the old ones,
// that a replaced refresh token used again ends the whole login, that a refresh token
// serves its own client only, and that no token reaches the log.
func TestRefreshRotation(t *testing.T) {
	var logs bytes.Buffer
	e := newConsentEnv(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	own := e.register("own", ownRedirect)
	other := e.register("other", ownRedirect)
	first := e.login(own, ownRedirect, "alice")
	// Another client's id: refused, and the login goes on.
	if status, out, _ := e.refresh(other, first.refresh); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("another client's refresh: %d %v", status, out)
	}
	status, out, second := e.refresh(own, first.refresh)
	if status != http.StatusOK || second.access == first.access || second.refresh == first.refresh || !strings.HasPrefix(second.refresh, refreshPrefix) {
		t.Fatalf("refresh: %d %v", status, out)
	}
	if _, err := e.whose(first.access); err == nil {
		t.Error("the access token a refresh replaced still works")
	}
	if u, err := e.whose(second.access); u != "alice" || err != nil {
		t.Fatalf("the new access token: %q %v", u, err)
	}
	if status, out := e.post("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {second.refresh}, "client_id": {own}, "scope": {"admin"}}); status != http.StatusBadRequest || out["error"] != "invalid_scope" {
		t.Errorf("a refresh asking for more scope: %d %v", status, out)
	}
	// The replaced refresh token again: refused, and the login's newest tokens end too.
	if status, out, _ := e.refresh(own, first.refresh); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("the replaced refresh token: %d %v", status, out)
	}
	if _, err := e.whose(second.access); err == nil {
		t.Error("after a refresh token's reuse, the login's access token still works")
	}
	if status, _, _ := e.refresh(own, second.refresh); status != http.StatusBadRequest {
		t.Errorf("after a refresh token's reuse, the login's refresh token: %d", status)
	}
	for name, want := range map[string]float64{"issued authorization_code": 1, "issued refresh_token": 1, "refresh_reused": 1} {
		var got float64
		if g, ok := strings.CutPrefix(name, "issued "); ok {
			got = e.metric("tokens_issued_total", "grant", g)
		} else {
			got = e.metric("token_families_revoked_total", "reason", name)
		}
		if got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	for _, secret := range []string{first.access, first.refresh, second.access, second.refresh, "hub-token-of-alice"} {
		if strings.Contains(logs.String(), secret) || strings.Contains(logs.String(), hash(secret)) {
			t.Errorf("a token in the log:\n%s", logs.String())
		}
	}
}

// TestRevokedApprovalEndsTokens checks that revoking an approval ends at once every
// token of that user's the client holds, through any of its redirect URIs, and no one
// else's, and that a code given before the revocation redeems for nothing.
func TestRevokedApprovalEndsTokens(t *testing.T) {
	e := newConsentEnv(t)
	const app = "https://app.example/cb"
	own := e.register("own", ownRedirect, app)
	other := e.register("other", ownRedirect)
	mine := []pair{e.login(own, ownRedirect, "alice"), e.login(own, app, "alice")}
	bobs := e.login(own, ownRedirect, "bob")
	others := e.login(other, ownRedirect, "alice")
	pending := e.code(own, ownRedirect, "alice") // remembered: no page
	if !e.s.revokeApproval("alice", own, "http://127.0.0.1:5/cb") {
		t.Fatal("no approval to revoke")
	}
	for _, p := range mine {
		if _, err := e.whose(p.access); !errors.Is(err, auth.ErrUnauthorized) {
			t.Errorf("alice's access token of the revoked client: %v", err)
		}
		if status, _, _ := e.refresh(own, p.refresh); status != http.StatusBadRequest {
			t.Errorf("alice's refresh token of the revoked client: %d", status)
		}
	}
	for who, p := range map[string]pair{"bob": bobs, "alice's other client": others} {
		if _, err := e.whose(p.access); err != nil {
			t.Errorf("%s's access token: %v", who, err)
		}
	}
	if status, out := e.redeem(own, ownRedirect, pending); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("a code given before the revocation: %d %v", status, out)
	}
	if n := e.metric("token_families_revoked_total", "reason", "approval_revoked"); n != 2 {
		t.Errorf("approval_revoked: %v, want 2", n)
	}
	// The approval through the other redirect URI stands: a login there gets a code,
	// one through the revoked one the page.
	e.code(own, app, "alice")
	consentPageOf(t, e.back(own, ownRedirect, "alice", nil))
}

// TestRevocationEndpoint checks RFC 7009's endpoint: a client ends its refresh token
// (the whole login) or its access token (that one); another client's request, an
// unknown token, ends nothing, and every answer is 200.
func TestRevocationEndpoint(t *testing.T) {
	e := newConsentEnv(t)
	own := e.register("own", ownRedirect)
	other := e.register("other", ownRedirect)
	p := e.login(own, ownRedirect, "alice")
	revoke := func(tok, client string) int {
		status, _ := e.post("/oauth/revoke", url.Values{"token": {tok}, "client_id": {client}})
		return status
	}
	for _, tok := range []string{p.access, p.refresh} {
		if status := revoke(tok, other); status != http.StatusOK {
			t.Errorf("another client revoking: %d", status)
		}
	}
	if _, err := e.whose(p.access); err != nil {
		t.Fatalf("the access token after another client's revocation: %v", err)
	}
	if revoke(p.access, own) != http.StatusOK {
		t.Fatal("revoke the access token")
	}
	if _, err := e.whose(p.access); err == nil {
		t.Error("a revoked access token still works")
	}
	status, _, next := e.refresh(own, p.refresh)
	if status != http.StatusOK {
		t.Fatalf("the refresh token after its access token's revocation: %d", status)
	}
	if revoke(next.refresh, own) != http.StatusOK {
		t.Fatal("revoke the refresh token")
	}
	if _, err := e.whose(next.access); err == nil {
		t.Error("the access token of a revoked refresh token still works")
	}
	if status, _, _ := e.refresh(own, next.refresh); status != http.StatusBadRequest {
		t.Errorf("a revoked refresh token: %d", status)
	}
	if revoke(refreshPrefix+random(), own) != http.StatusOK || revoke("junk", own) != http.StatusOK {
		t.Error("an unknown token: not 200")
	}
	if status, _ := e.post("/oauth/revoke", url.Values{"client_id": {own}}); status != http.StatusBadRequest {
		t.Errorf("no token: %d", status)
	}
	if status, _ := e.post("/oauth/revoke", url.Values{"client_id": {own}, "token": {strings.Repeat("x", maxBody)}}); status != http.StatusBadRequest {
		t.Errorf("a body over 16 KiB: %d", status)
	}
	if n := e.metric("token_families_revoked_total", "reason", "client_revoked"); n != 1 {
		t.Errorf("client_revoked: %v", n)
	}
	var m map[string]any
	resp, err := http.Get(e.srv.URL + "/services/mcp/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m["revocation_endpoint"] != e.s.cfg.Issuer+"/oauth/revoke" ||
		fmt.Sprint(m["grant_types_supported"]) != "[authorization_code refresh_token]" {
		t.Errorf("metadata: %v %v", m, err)
	}
}

// TestTokenLifetimes checks the tokens' ends: an access token after AccessTokenTTL, a
// login's refresh tokens after RefreshTokenTTL, or at the Hub token's expiry if sooner.
func TestTokenLifetimes(t *testing.T) {
	for _, tt := range []struct {
		name           string
		refreshTTL     time.Duration
		hubExpiresIn   int
		refreshEndsBy  time.Duration
		accessExpireIn float64
	}{
		{"the refresh token's own end", 3 * time.Hour, 14 * 24 * 3600, 3 * time.Hour, 3600},
		{"the Hub token's end", 14 * 24 * time.Hour, 5400, 90 * time.Minute, 3600},
		{"a Hub token ending within the hour", 14 * 24 * time.Hour, 1800, 30 * time.Minute, 1800},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newConsentEnv(t, func(c *Config) { c.RefreshTokenTTL = tt.refreshTTL })
			now := time.Unix(1e9, 0)
			var mu sync.Mutex
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
			e.s.now, e.s.tokens.now = clock, clock
			own := e.register("own", ownRedirect)
			code := e.code(own, ownRedirect, "alice")
			g, _ := e.s.codes.get(hash(code))
			g.expiresIn = tt.hubExpiresIn
			e.s.codes.put(hash(code), g, time.Minute)
			status, out := e.redeem(own, ownRedirect, code)
			if status != http.StatusOK || out["expires_in"] != tt.accessExpireIn {
				t.Fatalf("token: %d %v, want expires_in %v", status, out, tt.accessExpireIn)
			}
			p := pair{fmt.Sprint(out["access_token"]), fmt.Sprint(out["refresh_token"])}
			advance(time.Duration(tt.accessExpireIn)*time.Second - time.Second)
			if _, err := e.whose(p.access); err != nil {
				t.Fatalf("a second before its end: %v", err)
			}
			advance(time.Second)
			if _, err := e.whose(p.access); err == nil {
				t.Fatal("an access token past its end")
			}
			// Refreshed until the login's end, not after.
			for elapsed := time.Duration(tt.accessExpireIn) * time.Second; elapsed < tt.refreshEndsBy; elapsed += 30 * time.Minute {
				var out map[string]any
				if status, out, p = e.refresh(own, p.refresh); status != http.StatusOK {
					t.Fatalf("refresh at %v: %d %v", elapsed, status, out)
				}
				advance(30 * time.Minute)
			}
			if status, out, _ := e.refresh(own, p.refresh); status != http.StatusBadRequest {
				t.Errorf("refresh past the login's end: %d %v", status, out)
			}
		})
	}
}

// TestTokenBounds checks that the logins holding tokens are bounded: one user's
// (maxUserFamilies) and everyone's (MaxTokens), the oldest forgotten first.
func TestTokenBounds(t *testing.T) {
	unlimited := func(c *Config) { c.Burst = 10000 }
	e := newConsentEnv(t, unlimited)
	own := e.register("own", ownRedirect)
	var alices []pair
	for range maxUserFamilies + 1 {
		alices = append(alices, e.login(own, ownRedirect, "alice"))
	}
	bob := e.login(own, ownRedirect, "bob")
	if _, err := e.whose(alices[0].access); err == nil {
		t.Error("alice's oldest login kept beyond her bound")
	}
	for who, p := range map[string]pair{"alice's second": alices[1], "alice's newest": alices[maxUserFamilies], "bob's": bob} {
		if _, err := e.whose(p.access); err != nil {
			t.Errorf("%s login: %v", who, err)
		}
	}
	if n := e.s.tokens.len(); n != maxUserFamilies+1 {
		t.Errorf("%d logins held, want %d", n, maxUserFamilies+1)
	}

	e = newConsentEnv(t, unlimited, func(c *Config) { c.MaxTokens = 3 })
	own = e.register("own", ownRedirect)
	logins := map[string]pair{}
	for _, u := range []string{"alice", "bob", "carol", "dave"} {
		logins[u] = e.login(own, ownRedirect, u)
	}
	if _, err := e.whose(logins["alice"].access); err == nil {
		t.Error("the oldest login kept beyond MaxTokens")
	}
	for _, u := range []string{"bob", "carol", "dave"} {
		if _, err := e.whose(logins[u].access); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	if n := e.metric("token_families_revoked_total", "reason", "evicted"); n != 1 {
		t.Errorf("evicted: %v", n)
	}
}

// TestCodeReplay checks that a code redeemed a second time gives nothing and ends the
// tokens its first redemption gave (RFC 6749 section 4.1.2).
func TestCodeReplay(t *testing.T) {
	e := newConsentEnv(t)
	own := e.register("own", ownRedirect)
	other := e.login(own, ownRedirect, "alice")
	code := e.code(own, ownRedirect, "alice")
	status, out := e.redeem(own, ownRedirect, code)
	access, _ := out["access_token"].(string)
	if status != http.StatusOK || access == "" {
		t.Fatalf("token: %d %v", status, out)
	}
	if status, out := e.redeem(own, ownRedirect, code); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("the code again: %d %v", status, out)
	}
	if _, err := e.whose(access); err == nil {
		t.Error("the tokens of a replayed code still work")
	}
	if _, err := e.whose(other.access); err != nil {
		t.Errorf("another login's token: %v", err)
	}
	if n := e.metric("token_families_revoked_total", "reason", "code_replayed"); n != 1 {
		t.Errorf("code_replayed: %v", n)
	}
}

// familiarHub is a Hub verifier familiar (auth.Familiar) with the Hub tokens in known.
type familiarHub struct {
	hubVerifier
	known map[string]bool
}

func (k *familiarHub) Familiar(tok string) bool { return k.known[tok] }

// TestFamiliarTokens checks auth.Familiar on the MCP endpoint's verifier: the sidecar's
// access tokens are familiar (its own store answers), a Hub token as the Hub verifier
// finds it, nothing else.
func TestFamiliarTokens(t *testing.T) {
	e := newConsentEnv(t)
	own := e.register("own", ownRedirect)
	p := e.login(own, ownRedirect, "alice")
	v := e.s.Verifier(&familiarHub{known: map[string]bool{"tok-bob": true}}).(auth.Familiar)
	for tok, want := range map[string]bool{p.access: true, "tok-bob": true, p.refresh: false, accessPrefix + random(): false,
		p.access + "x": false, "tok-carol": false, "": false} {
		if got := v.Familiar(tok); got != want {
			t.Errorf("Familiar(%.12q…) = %v, want %v", tok, got, want)
		}
	}
}
