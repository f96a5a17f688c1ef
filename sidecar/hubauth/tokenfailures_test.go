package hubauth

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
)

// sender sends h a request from peer, with X-Forwarded-For xff (if any) and token, and
// returns its status.
func sender(h http.Handler) func(peer, xff, token string) int {
	return func(peer, xff, token string) int {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.RemoteAddr = peer + ":4000"
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		r.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
}

// TestTokenFailures checks the budget of refused tokens per source in front of a real
// verifier: a source sending made-up tokens is answered 429 past its burst without the
// verifier being asked, another source (and, behind a trusted proxy, another client of
// it) keeps its own budget, and a right token is not spent from it.
func TestTokenFailures(t *testing.T) {
	v, err := auth.New("static", auth.Settings{Token: "right-token"})
	if err != nil {
		t.Fatal(err)
	}
	proxy := netip.MustParsePrefix("127.0.0.1/32")
	h, err := auth.RequireBearerWith(v, auth.Guard{Failures: TokenFailures([]netip.Prefix{proxy}, 1)},
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	if err != nil {
		t.Fatal(err)
	}
	send := sender(h)
	codes := map[int]int{}
	for range tokenFailureBurst + 10 {
		codes[send("192.0.2.1", "", "made-up")]++
	}
	if codes[http.StatusUnauthorized] != tokenFailureBurst || codes[http.StatusTooManyRequests] != 10 {
		t.Errorf("made-up tokens from one source: %v, want %d refused, then 429", codes, tokenFailureBurst)
	}
	if c := send("192.0.2.2", "", "made-up"); c != http.StatusUnauthorized {
		t.Errorf("another source's made-up token: %d, want 401 (its own budget)", c)
	}
	if c := send("192.0.2.3", "", "right-token"); c != http.StatusOK {
		t.Errorf("a right token: %d", c)
	}
	// Behind the trusted proxy, each client it names spends its own.
	for range tokenFailureBurst {
		send("127.0.0.1", "198.51.100.1", "made-up")
	}
	if c := send("127.0.0.1", "198.51.100.1", "made-up"); c != http.StatusTooManyRequests {
		t.Errorf("the flooding client behind the proxy: %d, want 429", c)
	}
	if c := send("127.0.0.1", "198.51.100.2", "right-token"); c != http.StatusOK {
		t.Errorf("another client behind the proxy: %d, want 200", c)
	}
}

// TestTokenFailuresSpareFamiliarTokens (red team pass 4, F1): made-up tokens sent in
// bob's name (an X-Forwarded-For naming his address from a trusted peer) spend his
// source's budget, but his token, admitted before, is still verified and admitted, its
// cached answer expired (asked again, on a renewal's place): only tokens no one was
// given are throttled. A token never admitted is throttled from his source.
func TestTokenFailuresSpareFamiliarTokens(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "token bobs" {
			_, _ = w.Write([]byte(`{"kind":"user","name":"bob","scopes":["access:services!service=mcp"]}`))
			return
		}
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	v, err := auth.New("jupyterhub", auth.Settings{Options: map[string]any{"api_url": srv.URL, "service_name": "mcp", "token_cache_ttl": "1ns"}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := auth.RequireBearerWith(v, auth.Guard{Failures: TokenFailures([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, 1)},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if p, _ := auth.PrincipalFrom(r.Context()); p.User != "bob" {
				t.Errorf("admitted as %q", p.User)
			}
			w.WriteHeader(http.StatusOK)
		}))
	if err != nil {
		t.Fatal(err)
	}
	send := sender(h)
	if c := send("127.0.0.1", "198.51.100.9", "bobs"); c != http.StatusOK {
		t.Fatalf("bob's token: %d", c)
	}
	for range tokenFailureBurst + 5 { // a local attacker names bob's address
		send("127.0.0.1", "198.51.100.9", "made-up")
	}
	if c := send("127.0.0.1", "198.51.100.9", "made-up"); c != http.StatusTooManyRequests {
		t.Fatalf("made-up tokens past the budget: %d, want 429", c)
	}
	for range 3 {
		if c := send("127.0.0.1", "198.51.100.9", "bobs"); c != http.StatusOK {
			t.Fatalf("bob's familiar token from his spent source: %d, want 200", c)
		}
	}
	if c := send("127.0.0.1", "198.51.100.9", "alices-new"); c != http.StatusTooManyRequests {
		t.Errorf("a token never admitted from the spent source: %d, want 429", c)
	}
}
