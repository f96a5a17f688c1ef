// Package auth admits HTTP requests to the MCP endpoint: bearer tokens checked
// by a Verifier (registered by name; default "static", a constant-time compare
// against the configured token) and the Origin header checked against an
// allow-list.
package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/registry"
)

// ErrUnauthorized is returned by verifiers for a missing or rejected token.
var ErrUnauthorized = errors.New("unauthorized")

// Verifier checks a bearer token.
type Verifier interface {
	// Verify returns nil for an accepted token and an error wrapping
	// ErrUnauthorized otherwise.
	Verify(ctx context.Context, token string) error
}

// Settings are what a verifier factory gets: its options and the token the
// configuration resolved (from the config, a file or the environment).
type Settings struct {
	Token   string
	Options map[string]any
}

// Factory builds a verifier.
type Factory func(s Settings) (Verifier, error)

// Default is the verifier used when the configuration names none.
const Default = "static"

var factories = registry.New[Factory]("token verifier")

// Register makes a verifier available by name. It panics on a duplicate name.
func Register(name string, f Factory) { factories.Register(name, f) }

// Names returns the registered verifier names, sorted.
func Names() []string { return factories.Names() }

// New builds the verifier registered as name ("" means Default).
func New(name string, s Settings) (Verifier, error) {
	if name == "" {
		name = Default
	}
	f, err := factories.Lookup(name)
	if err != nil {
		return nil, err
	}
	v, err := f(s)
	if err != nil {
		return nil, fmt.Errorf("build token verifier %q: %w", name, err)
	}
	return v, nil
}

func init() {
	Register(Default, func(s Settings) (Verifier, error) {
		if s.Token == "" {
			return nil, errors.New("no token configured (set a token, a token file or the token environment variable, or insecure_no_auth: true)")
		}
		return static{token: []byte(s.Token)}, nil
	})
}

// static accepts exactly one token.
type static struct{ token []byte }

func (s static) Verify(_ context.Context, token string) error {
	if subtle.ConstantTimeCompare([]byte(token), s.token) != 1 {
		return fmt.Errorf("%w: token rejected", ErrUnauthorized)
	}
	return nil
}

// Realm is the realm named in WWW-Authenticate challenges.
const Realm = "jupyter-mcp-sidecar"

// RequireBearer wraps next so that only requests carrying a bearer token the
// verifier accepts reach it; others get 401 with a WWW-Authenticate challenge.
func RequireBearer(v Verifier, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q", Realm))
			http.Error(w, "missing bearer token", http.StatusUnauthorized)
			return
		}
		if err := v.Verify(r.Context(), token); err != nil {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q, error=\"invalid_token\"", Realm))
			http.Error(w, "invalid bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// OriginPolicy admits requests by their Origin header. A request without an
// Origin (not from a browser) is admitted; one with an Origin is admitted when
// the origin is listed, or is a loopback origin and AllowLoopback is set.
type OriginPolicy struct {
	Allowed       []string // exact origins, e.g. "https://hub.example.org"; "*" admits all
	AllowLoopback bool
}

// Admits reports whether a request with this Origin header may proceed.
func (p OriginPolicy) Admits(origin string) bool {
	if origin == "" {
		return true
	}
	if slices.Contains(p.Allowed, "*") || slices.Contains(p.Allowed, origin) {
		return true
	}
	if !p.AllowLoopback {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// Wrap rejects requests whose origin is not admitted with 403.
func (p OriginPolicy) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.Admits(r.Header.Get("Origin")) {
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
