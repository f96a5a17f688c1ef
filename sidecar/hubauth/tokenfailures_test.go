package hubauth

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
)

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
	send := func(peer, xff, token string) int {
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
