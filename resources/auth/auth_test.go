package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRequireBearer(t *testing.T) {
	v, err := New("", Settings{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	h := RequireBearer(v, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	tests := []struct {
		header    string
		status    int
		challenge string
	}{
		{"Bearer s3cret", http.StatusTeapot, ""},
		{"bearer s3cret", http.StatusTeapot, ""},
		{"", http.StatusUnauthorized, `Bearer realm="jupyter-mcp-sidecar"`},
		{"Basic czNjcmV0", http.StatusUnauthorized, `Bearer realm="jupyter-mcp-sidecar"`},
		{"Bearer wrong", http.StatusUnauthorized, `error="invalid_token"`},
		{"Bearer s3cret2", http.StatusUnauthorized, `error="invalid_token"`},
		{"Bearer ", http.StatusUnauthorized, `Bearer realm=`},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if tt.header != "" {
			req.Header.Set("Authorization", tt.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.status {
			t.Errorf("%q: status %d, want %d", tt.header, rec.Code, tt.status)
		}
		if got := rec.Header().Get("WWW-Authenticate"); !strings.Contains(got, tt.challenge) || (tt.challenge == "") != (got == "") {
			t.Errorf("%q: WWW-Authenticate %q, want %q", tt.header, got, tt.challenge)
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New("", Settings{}); err == nil {
		t.Fatal("static verifier without a token built")
	}
	if _, err := New("nope", Settings{Token: "x"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown verifier: %v", err)
	}
}

func TestOriginPolicy(t *testing.T) {
	p := OriginPolicy{Allowed: []string{"https://hub.example.org"}, AllowLoopback: true}
	tests := []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{"https://hub.example.org", true},
		{"http://localhost:8888", true},
		{"http://127.0.0.1", true},
		{"http://[::1]:3000", true},
		{"https://evil.example.com", false},
		{"http://localhost.evil.com", false},
		{"null", false},
		{"file://localhost", false},
	}
	for _, tt := range tests {
		if got := p.Admits(tt.origin); got != tt.ok {
			t.Errorf("Admits(%q) = %v, want %v", tt.origin, got, tt.ok)
		}
	}
	if (OriginPolicy{}).Admits("http://localhost") {
		t.Error("loopback admitted with AllowLoopback unset")
	}
	if !(OriginPolicy{Allowed: []string{"*"}}).Admits("https://any.example") {
		t.Error(`"*" did not admit`)
	}
}
