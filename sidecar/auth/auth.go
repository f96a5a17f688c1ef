// Package auth admits HTTP requests to the MCP endpoint: tokens checked by a
// Verifier (registered by name; default "static", a constant-time compare
// against the configured token; sidecar/hubauth registers "jupyterhub"), the
// caller's Principal put into the request context, and the Origin header checked
// against an allow-list. The front (sidecar/front) puts them before an endpoint.
package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/registry"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
)

// ErrUnauthorized is returned by verifiers for a missing or rejected token.
var ErrUnauthorized = errors.New("unauthorized")

// ErrUnavailable is returned by verifiers that cannot decide (the service that
// resolves tokens is unreachable or answers unexpectedly); such a request is
// answered 503, never admitted.
var ErrUnavailable = errors.New("token verifier unavailable")

// Principal is who an accepted token belongs to.
type Principal struct {
	User string // the user's name; "" for the single-user "static" verifier
}

// Verifier checks a token and says whose it is.
type Verifier interface {
	// Verify returns the token's Principal, or an error wrapping
	// ErrUnauthorized (rejected) or ErrUnavailable (cannot decide now).
	Verify(ctx context.Context, token string) (Principal, error)
}

// Familiar is implemented by a Verifier that can tell, without a call a flood could
// multiply, a token it admitted before: the Guard has such a token verified even from
// a source past its Failures budget, so that made-up tokens sent in a user's name (her
// address) never turn her away. Only tokens someone was given can be familiar.
type Familiar interface {
	Familiar(token string) bool
}

// Settings are what a verifier factory gets: its options, the token the
// configuration resolved (from the config, a file or the environment), and
// where to log and register metrics.
type Settings struct {
	Token      string
	Options    map[string]any
	Logger     *slog.Logger          // nil: slog.Default()
	Registerer prometheus.Registerer // nil: register no collectors
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

// ValidateName refuses the verifier name a configuration gives (its key "name"): a
// configuration names its verifier, where New's "" is Default for a caller that names
// none. Whether the name is registered is Names' to say.
func ValidateName(name string) error {
	if name == "" {
		return keyerr.Invalid("name", "must not be empty")
	}
	return nil
}

// New builds the verifier registered as name ("" means Default).
func New(name string, s Settings) (Verifier, error) {
	if name == "" {
		name = Default
	}
	f, err := factories.Lookup(name)
	if err != nil {
		return nil, err
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	v, err := f(s)
	if err != nil {
		return nil, fmt.Errorf("build token verifier %q: %w", name, err)
	}
	return v, nil
}

func init() {
	Register(Default, func(s Settings) (Verifier, error) {
		if err := option.Decode(s.Options, &struct{}{}); err != nil {
			return nil, err
		}
		if s.Token == "" {
			return nil, errors.New("no token configured (set a token, a token file or the token environment variable, or insecure_no_auth: true)")
		}
		return static{token: []byte(s.Token)}, nil
	})
}

// static accepts exactly one token.
type static struct{ token []byte }

func (s static) Verify(_ context.Context, token string) (Principal, error) {
	if subtle.ConstantTimeCompare([]byte(token), s.token) != 1 {
		return Principal{}, fmt.Errorf("%w: token rejected", ErrUnauthorized)
	}
	return Principal{}, nil
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the Principal RequireBearer admitted the request as;
// false when the request did not pass through RequireBearer.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Realm is the realm named in WWW-Authenticate challenges.
const Realm = "jupyter-mcp-sidecar"

// RequireBearer wraps next so that only requests carrying a token the verifier
// accepts reach it, with the token's Principal in their context (PrincipalFrom).
// The token comes as "Authorization: Bearer …" or, as JupyterHub accepts it,
// "Authorization: token …". A missing or rejected token gets 401 with a
// WWW-Authenticate challenge; a verifier that cannot decide, 503.
func RequireBearer(v Verifier, next http.Handler) http.Handler {
	h, _ := RequireBearerWith(v, Guard{}, next) // nothing to register: no error
	return h
}

// Guard is how RequireBearerWith answers and reports the requests it refuses.
type Guard struct {
	// Challenge is auth-params every 401's WWW-Authenticate carries too (a missing
	// token and a rejected one alike), e.g. resource_metadata="https://…/.well-known/
	// oauth-protected-resource" (RFC 9728), so an OAuth-capable client can recover.
	Challenge string
	// Logger hears each refusal at debug level, with its reason and never the token;
	// nil: slog.Default().
	Logger *slog.Logger
	// Registerer takes auth_failures_total{reason}; nil: refusals are not counted.
	Registerer prometheus.Registerer
	// Failures, when set, bounds the tokens of a request's source the verifier refuses
	// or cannot decide: a source past its budget is answered 429 without asking the
	// verifier, so a flood of made-up tokens costs its source alone, but for a token the
	// verifier admitted before (Familiar).
	Failures Budget
}

// Budget is a budget per request source.
type Budget interface {
	// Allow reports whether r's source has budget left.
	Allow(r *http.Request) bool
	// Spend takes one of r's source's budget.
	Spend(r *http.Request)
}

// The reasons of auth_failures_total.
const (
	reasonMissing     = "missing"     // no bearer token
	reasonRejected    = "rejected"    // the verifier refused it
	reasonUnavailable = "unavailable" // the verifier could not decide (503)
	reasonThrottled   = "throttled"   // the source's refused tokens past Guard.Failures (429)
)

// RequireBearerWith is RequireBearer with g's challenge, log and count of refusals.
func RequireBearerWith(v Verifier, g Guard, next http.Handler) (http.Handler, error) {
	params := g.Challenge
	if params != "" {
		params = ", " + params
	}
	log := g.Logger
	if log == nil {
		log = slog.Default()
	}
	r := promreg.On(g.Registerer)
	failures := promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "auth", Name: "failures_total",
		Help: "Requests refused for their bearer token, by reason: missing (none sent), rejected (the verifier refused it: 401), unavailable (the verifier could not decide: 503), throttled (the source's refused tokens past their budget: 429)."},
		[]string{"reason"}))
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register auth metrics: %w", err)
	}
	for _, reason := range []string{reasonMissing, reasonRejected, reasonUnavailable, reasonThrottled} {
		failures.WithLabelValues(reason)
	}
	refuse := func(req *http.Request, reason string, err error) {
		failures.WithLabelValues(reason).Inc()
		log.Debug("request refused for its bearer token", "reason", reason, "remote", req.RemoteAddr,
			"method", req.Method, "path", req.URL.Path, "err", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			refuse(r, reasonMissing, nil)
			w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q", Realm)+params)
			http.Error(w, "missing bearer token", http.StatusUnauthorized)
			return
		}
		if g.Failures != nil && !g.Failures.Allow(r) {
			if f, ok := v.(Familiar); !ok || !f.Familiar(token) {
				refuse(r, reasonThrottled, nil)
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many refused tokens from this address", http.StatusTooManyRequests)
				return
			}
		}
		p, err := v.Verify(r.Context(), token)
		if err != nil && g.Failures != nil {
			g.Failures.Spend(r)
		}
		switch {
		case err == nil:
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
		case errors.Is(err, ErrUnauthorized):
			refuse(r, reasonRejected, err)
			w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q, error=\"invalid_token\"", Realm)+params)
			http.Error(w, "invalid bearer token", http.StatusUnauthorized)
		default:
			refuse(r, reasonUnavailable, err)
			w.Header().Set("Retry-After", "5")
			http.Error(w, "token verification unavailable", http.StatusServiceUnavailable)
		}
	}), nil
}

// bearer extracts the token of a "Bearer" or "token" Authorization header.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !(strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "token")) {
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

// Validate refuses an allowed origin that is neither "*" nor scheme://host[:port], as
// a *keyerr.KeyError (keyerr.ErrInvalid) named allowed[i] (sidecar/config renames it to
// the daemon's key).
func (p OriginPolicy) Validate() error {
	var errs []error
	for i, o := range p.Allowed {
		if u, err := url.Parse(o); o != "*" && (err != nil || u.Scheme == "" || u.Host == "" || u.Path != "") {
			errs = append(errs, keyerr.Invalid(fmt.Sprintf("allowed[%d]", i), "must be * or scheme://host[:port], got %q", o))
		}
	}
	return errors.Join(errs...)
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
