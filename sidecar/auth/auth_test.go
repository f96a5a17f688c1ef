package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
)

// verifierFunc adapts a function to Verifier.
type verifierFunc func(ctx context.Context, token string) (Principal, error)

func (f verifierFunc) Verify(ctx context.Context, token string) (Principal, error) {
	return f(ctx, token)
}

// teapot answers 418 and the admitted principal's user in X-User.
var teapot = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	p, ok := PrincipalFrom(r.Context())
	if !ok {
		http.Error(w, "no principal", http.StatusInternalServerError)
		return
	}
	w.Header().Set("X-User", p.User)
	w.WriteHeader(http.StatusTeapot)
})

func TestRequireBearer(t *testing.T) {
	v, err := New("", Settings{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	h := RequireBearer(v, teapot)
	tests := []struct {
		header    string
		status    int
		challenge string
	}{
		{"Bearer s3cret", http.StatusTeapot, ""},
		{"bearer s3cret", http.StatusTeapot, ""},
		{"token s3cret", http.StatusTeapot, ""},
		{"Token s3cret", http.StatusTeapot, ""},
		{"token wrong", http.StatusUnauthorized, `error="invalid_token"`},
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
		if rec.Code == http.StatusTeapot && rec.Header().Get("X-User") != "" {
			t.Errorf("%q: static verifier admitted user %q, want none", tt.header, rec.Header().Get("X-User"))
		}
	}
}

func TestRequireBearerVerdicts(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		user   string
	}{
		{"admitted", nil, http.StatusTeapot, "alice"},
		{"rejected", fmt.Errorf("%w: no scope", ErrUnauthorized), http.StatusUnauthorized, ""},
		{"unavailable", fmt.Errorf("%w: hub down", ErrUnavailable), http.StatusServiceUnavailable, ""},
		{"other error", errors.New("boom"), http.StatusServiceUnavailable, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := verifierFunc(func(context.Context, string) (Principal, error) {
				if tt.err != nil {
					return Principal{}, tt.err
				}
				return Principal{User: "alice"}, nil
			})
			req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			req.Header.Set("Authorization", "token t")
			rec := httptest.NewRecorder()
			RequireBearer(v, teapot).ServeHTTP(rec, req)
			if rec.Code != tt.status || rec.Header().Get("X-User") != tt.user {
				t.Fatalf("status %d user %q, want %d %q", rec.Code, rec.Header().Get("X-User"), tt.status, tt.user)
			}
		})
	}
}

func TestPrincipalFrom(t *testing.T) {
	if _, ok := PrincipalFrom(context.Background()); ok {
		t.Fatal("principal in a bare context")
	}
	p, ok := PrincipalFrom(WithPrincipal(context.Background(), Principal{User: "bob"}))
	if !ok || p.User != "bob" {
		t.Fatalf("PrincipalFrom = %+v, %v", p, ok)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New("", Settings{}); err == nil || !strings.Contains(err.Error(), "no token configured") {
		t.Fatalf("static verifier without a token: %v", err)
	}
	if _, err := New("nope", Settings{Token: "x"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown verifier: %v", err)
	}
	// A misspelt option is refused through the one decoder, naming key and verifier
	// (jupyterhub's: sidecar/hubauth's TestJupyterHubRefusesUnknownOptions).
	_, err := New("static", Settings{Token: "t", Options: map[string]any{"max_retry": 3}, Registerer: prometheus.NewRegistry()})
	if !errors.Is(err, option.ErrUnknown) || !strings.Contains(err.Error(), `"static": max_retry: unknown key (known: `) {
		t.Fatalf("static: New = %v, want option.ErrUnknown naming \"static\" and max_retry", err)
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

// A Guard's refusals are counted by reason and logged at debug without the token, and
// both 401s (no token, a wrong one) carry its challenge, so an OAuth-capable client
// holding a stale token finds the metadata too.
func TestGuardReportsRefusals(t *testing.T) {
	const wrong = "wrong-token-0123456789"
	const challenge = `resource_metadata="https://hub.example.org/services/mcp/.well-known/oauth-protected-resource"`
	reg := prometheus.NewPedanticRegistry()
	var logs bytes.Buffer
	v := verifierFunc(func(_ context.Context, token string) (Principal, error) {
		switch token {
		case "good":
			return Principal{}, nil
		case "hub-down":
			return Principal{}, fmt.Errorf("%w: hub down", ErrUnavailable)
		}
		return Principal{}, fmt.Errorf("%w: token rejected", ErrUnauthorized)
	})
	h, err := RequireBearerWith(v, Guard{Challenge: challenge, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, teapot)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		header    string
		status    int
		challenge bool
	}{
		{"Bearer good", http.StatusTeapot, false},
		{"", http.StatusUnauthorized, true},
		{"Bearer " + wrong, http.StatusUnauthorized, true},
		{"token " + wrong, http.StatusUnauthorized, true},
		{"Bearer hub-down", http.StatusServiceUnavailable, false},
	} {
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if tt.header != "" {
			req.Header.Set("Authorization", tt.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get("WWW-Authenticate"); rec.Code != tt.status || strings.Contains(got, challenge) != tt.challenge {
			t.Errorf("%q: %d, WWW-Authenticate %q; want %d, challenge %v", tt.header, rec.Code, got, tt.status, tt.challenge)
		}
	}
	for reason, want := range map[string]float64{"missing": 1, "rejected": 2, "unavailable": 1} {
		if got := testenv.Metric(t, reg, "jupyter_mcp_sidecar_auth_failures_total", "reason", reason); got != want {
			t.Errorf("auth_failures_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	if got := strings.Count(logs.String(), "level=DEBUG msg=\"request refused for its bearer token\" reason=rejected"); got != 2 {
		t.Errorf("%d debug lines for the wrong tokens, want 2:\n%s", got, logs.String())
	}
	if strings.Contains(logs.String(), wrong) {
		t.Fatalf("the wrong token is in the log:\n%s", logs.String())
	}
}

// TestValidateConfigured: an allowed origin is "*" or scheme://host[:port], named by
// its index; a configured verifier name is not empty.
func TestValidateConfigured(t *testing.T) {
	for _, tt := range []struct {
		allowed []string
		want    string // "" : valid
	}{
		{nil, ""},
		{[]string{"*", "https://hub.example.org", "http://127.0.0.1:8888"}, ""},
		{[]string{"https://ok.example", "nope"}, `allowed[1]: must be * or scheme://host[:port], got "nope"`},
		{[]string{"https://x.example/path"}, `allowed[0]: must be * or scheme://host[:port], got "https://x.example/path"`},
		{[]string{"", "*"}, `allowed[0]: must be * or scheme://host[:port], got ""`},
		{[]string{"http://%zz"}, `allowed[0]: must be * or scheme://host[:port], got "http://%zz"`},
	} {
		err := OriginPolicy{Allowed: tt.allowed}.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || err.Error() != tt.want || !errors.Is(err, keyerr.ErrInvalid)) {
			t.Errorf("OriginPolicy{%q}.Validate() = %v, want %q", tt.allowed, err, tt.want)
		}
	}
	if err := ValidateName(""); err == nil || err.Error() != "name: must not be empty" || !errors.Is(err, keyerr.ErrInvalid) {
		t.Errorf(`ValidateName("") = %v`, err)
	}
	if err := ValidateName(Default); err != nil {
		t.Errorf("ValidateName(%q) = %v", Default, err)
	}
}
