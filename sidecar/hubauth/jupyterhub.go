package hubauth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
)

// The "jupyterhub" token verifier: hub mode's, the Hub's tokens resolved to users by
// its REST API (GET {api_url}/user), registered with sidecar/auth.
// VerifierName is the name the JupyterHub token verifier is registered under
// (sidecar/auth): hub mode's, and server.verifier's when named.
const VerifierName = "jupyterhub"

func init() { auth.Register(VerifierName, newJupyterHub) }

// JupyterHub verifier defaults.
const (
	DefaultTokenCacheTTL = 30 * time.Second
	DefaultCacheSize     = 1024
	DefaultHubTimeout    = 5 * time.Second
	// maxNegativeTTL bounds how long a rejected token's answer is reused, so
	// that a role granted by an admin takes effect soon.
	maxNegativeTTL = 5 * time.Second
	maxTokenBytes  = 4096
	// maxLookups bounds the Hub API calls in progress: a token not cached beyond them is
	// answered unavailable (503) at once, so a flood of made-up tokens holds at most
	// this many requests, and their connections, waiting on a slow Hub.
	maxLookups = 16
	// maxRenewals are Hub API calls of their own for tokens admitted before (their
	// cached answer expired), so that made-up tokens filling maxLookups never turn away
	// a user already at work; knownTTL is how long a token is remembered as admitted.
	maxRenewals  = 8
	knownTTL     = 24 * time.Hour
	maxUserModel = 1 << 20
)

// HubOptions are the "jupyterhub" verifier's options: its keys in Settings.Options (hub
// mode's from sidecar/config's VerifierSettings). Zero fields take the defaults.
type HubOptions struct {
	APIURL        string        `option:"api_url"`         // e.g. http://127.0.0.1:8081/hub/api (JUPYTERHUB_API_URL)
	ServiceName   string        `option:"service_name"`    // this service's name in the Hub (JUPYTERHUB_SERVICE_NAME)
	TokenCacheTTL time.Duration `option:"token_cache_ttl"` // how long an admitted token's answer is reused; default DefaultTokenCacheTTL
	CacheSize     int           `option:"cache_size"`      // entries of the admitted (and of the rejected) cache; default DefaultCacheSize
	Timeout       time.Duration `option:"timeout"`         // of one Hub API call; default DefaultHubTimeout
}

// serviceNameRe matches the service names a proxy prefix can carry.
var serviceNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// withDefaults fills the zero fields and checks the result.
func (o HubOptions) withDefaults() (HubOptions, error) {
	o.TokenCacheTTL = cmp.Or(o.TokenCacheTTL, DefaultTokenCacheTTL)
	o.CacheSize = cmp.Or(o.CacheSize, DefaultCacheSize)
	o.Timeout = cmp.Or(o.Timeout, DefaultHubTimeout)
	return o, o.Validate()
}

// Validate reports what is wrong with o, each a *keyerr.KeyError (keyerr.ErrInvalid)
// naming its key (sidecar/config renames them to the daemon's hub.* keys): an api_url
// that is not the Hub's http(s) API URL, a service_name that is not a JupyterHub
// service name, a token_cache_ttl not above zero, a negative timeout or cache_size (0:
// their defaults, which the daemon does not set). The verifier fills a zero
// token_cache_ttl with its default before; the daemon's mapping sets it.
func (o HubOptions) Validate() error {
	var errs []error
	if u, err := url.Parse(o.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, keyerr.Invalid("api_url", "must be the Hub's http(s) API URL, e.g. http://127.0.0.1:8081/hub/api, got %q", o.APIURL))
	}
	if !serviceNameRe.MatchString(o.ServiceName) {
		errs = append(errs, keyerr.Invalid("service_name", "must be a JupyterHub service name (letters, digits, . _ -), got %q", o.ServiceName))
	}
	if o.TokenCacheTTL <= 0 {
		errs = append(errs, keyerr.Invalid("token_cache_ttl", "must be > 0, got %s", o.TokenCacheTTL))
	}
	if o.Timeout < 0 {
		errs = append(errs, keyerr.Invalid("timeout", "must be >= 0 (0: the default), got %s", o.Timeout))
	}
	if o.CacheSize < 0 {
		errs = append(errs, keyerr.Invalid("cache_size", "must be >= 0 (0: the default), got %d", o.CacheSize))
	}
	return errors.Join(errs...)
}

// jupyterHub resolves a token to its user with the Hub's REST API
// (GET {api_url}/user) and admits the user when the token's scopes grant
// access to this service.
type jupyterHub struct {
	opts    HubOptions
	userURL string
	scope   string // access:services!service={name}
	client  *http.Client
	log     *slog.Logger
	flight  singleflight.Group
	lookups chan struct{}  // a token per Hub API call in progress (maxLookups)
	renew   chan struct{}  // and per one for a token admitted before (maxRenewals)
	known   *lru[struct{}] // digests of tokens admitted within knownTTL
	good    *lru[auth.Principal]
	bad     *lru[struct{}]
	metrics hubMetrics
}

type hubMetrics struct {
	cache  *prometheus.CounterVec // result: hit, negative_hit, miss
	errors *prometheus.CounterVec // kind: timeout, network, status, decode, busy
	lookup prometheus.Histogram
}

// newJupyterHub is the "jupyterhub" factory: its options (HubOptions) are decoded from
// s.Options.
func newJupyterHub(s auth.Settings) (auth.Verifier, error) {
	var o HubOptions
	if err := option.Decode(s.Options, &o); err != nil {
		return nil, err
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &jupyterHub{
		opts:    o,
		userURL: strings.TrimRight(o.APIURL, "/") + "/user",
		scope:   "access:services!service=" + o.ServiceName,
		client: &http.Client{
			Timeout: o.Timeout,
			// A redirect is an answer we do not expect; never resend the token.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log:     cmp.Or(s.Logger, slog.Default()),
		lookups: make(chan struct{}, maxLookups),
		renew:   make(chan struct{}, maxRenewals),
		known:   newLRU[struct{}](o.CacheSize),
		good:    newLRU[auth.Principal](o.CacheSize),
		bad:     newLRU[struct{}](o.CacheSize),
	}
	r := promreg.On(s.Registerer)
	h.metrics = hubMetrics{
		cache: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "auth_jupyterhub", Name: "cache_total",
			Help: "Token verifications by cache result: hit (admitted), negative_hit (rejected), miss (asked the Hub)."}, []string{"result"})),
		errors: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "auth_jupyterhub", Name: "hub_errors_total",
			Help: "Hub API calls that could not decide a token, by kind: timeout, network, status, decode; busy: not made, maxLookups were in progress."}, []string{"kind"})),
		lookup: promreg.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: promreg.Namespace, Subsystem: "auth_jupyterhub", Name: "lookup_seconds",
			Help: "Duration of the Hub API calls resolving a token.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	for _, res := range []string{"hit", "negative_hit", "miss"} {
		h.metrics.cache.WithLabelValues(res)
	}
	for _, k := range []string{"timeout", "network", "status", "decode", "busy"} {
		h.metrics.errors.WithLabelValues(k)
	}
	return h, nil
}

// errRejected is the answer for a token the Hub does not admit to this service.
var errRejected = fmt.Errorf("%w: token not admitted by jupyterhub", auth.ErrUnauthorized)

// Verify answers from the cache, else asks the Hub (one call per token at a
// time, however many requests wait for it).
func (h *jupyterHub) Verify(ctx context.Context, token string) (auth.Principal, error) {
	if token == "" || len(token) > maxTokenBytes {
		return auth.Principal{}, errRejected
	}
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	if p, ok := h.good.get(key, now); ok {
		h.metrics.cache.WithLabelValues("hit").Inc()
		return p, nil
	}
	if _, ok := h.bad.get(key, now); ok {
		h.metrics.cache.WithLabelValues("negative_hit").Inc()
		return auth.Principal{}, errRejected
	}
	h.metrics.cache.WithLabelValues("miss").Inc()
	ch := h.flight.DoChan(string(key[:]), func() (any, error) {
		release, ok := h.slot(key)
		if !ok {
			h.metrics.errors.WithLabelValues("busy").Inc()
			return auth.Principal{}, fmt.Errorf("%w: %d Hub API calls in progress", auth.ErrUnavailable, maxLookups)
		}
		defer release()
		p, err := h.lookup(token)
		switch {
		case err == nil:
			h.good.put(key, p, time.Now().Add(h.opts.TokenCacheTTL))
			h.known.put(key, struct{}{}, time.Now().Add(knownTTL))
		case errors.Is(err, auth.ErrUnauthorized):
			h.bad.put(key, struct{}{}, time.Now().Add(min(h.opts.TokenCacheTTL, maxNegativeTTL)))
		}
		return p, err
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return auth.Principal{}, res.Err
		}
		return res.Val.(auth.Principal), nil
	case <-ctx.Done():
		return auth.Principal{}, fmt.Errorf("%w: %w", auth.ErrUnavailable, ctx.Err())
	}
}

// Familiar reports whether the Hub admitted token within knownTTL (auth.Familiar): it
// is verified from the cache, or on a renewal's place.
func (h *jupyterHub) Familiar(token string) bool {
	if token == "" || len(token) > maxTokenBytes {
		return false
	}
	_, ok := h.known.get(sha256.Sum256([]byte(token)), time.Now())
	return ok
}

// hubUser is what the verifier reads of GET /user (JupyterHub >= 2).
type hubUser struct {
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
}

// lookup asks the Hub whose token this is. It outlives the request that
// slot takes a place for a Hub API call about the token of digest key: one of
// maxLookups, else, for a token admitted before, one of maxRenewals; false when none is
// free. release gives it back.
func (h *jupyterHub) slot(key [32]byte) (release func(), ok bool) {
	select {
	case h.lookups <- struct{}{}:
		return func() { <-h.lookups }, true
	default:
	}
	if _, known := h.known.get(key, time.Now()); !known {
		return nil, false
	}
	select {
	case h.renew <- struct{}{}:
		return func() { <-h.renew }, true
	default:
		return nil, false
	}
}

// started it (other requests may wait for it), bounded by the timeout.
func (h *jupyterHub) lookup(token string) (auth.Principal, error) {
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.userURL, nil)
	if err != nil {
		return auth.Principal{}, fmt.Errorf("%w: %w", auth.ErrUnavailable, err)
	}
	req.Header.Set("Authorization", "token "+token)
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := h.client.Do(req)
	h.metrics.lookup.Observe(time.Since(start).Seconds())
	if err != nil {
		kind := "network"
		if ne, ok := errors.AsType[net.Error](err); (ok && ne.Timeout()) || errors.Is(err, context.DeadlineExceeded) {
			kind = "timeout"
		}
		return auth.Principal{}, h.unavailable(kind, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return auth.Principal{}, errRejected
	default:
		return auth.Principal{}, h.unavailable("status", fmt.Errorf("GET %s: status %d", h.userURL, resp.StatusCode))
	}
	var u hubUser
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxUserModel)).Decode(&u); err != nil {
		return auth.Principal{}, h.unavailable("decode", fmt.Errorf("GET %s: decode user model: %w", h.userURL, err))
	}
	if u.Kind != "user" || u.Name == "" {
		return auth.Principal{}, errRejected // a service's token, or no user at all
	}
	if !slices.Contains(u.Scopes, h.scope) && !slices.Contains(u.Scopes, "access:services") {
		return auth.Principal{}, errRejected
	}
	return auth.Principal{User: u.Name}, nil
}

// unavailable counts and logs a Hub call that could not decide; the log has
// neither the token nor a user name.
func (h *jupyterHub) unavailable(kind string, err error) error {
	h.metrics.errors.WithLabelValues(kind).Inc()
	h.log.Warn("jupyterhub token lookup failed; answering 503", "kind", kind, "err", err)
	return fmt.Errorf("%w: jupyterhub: %w", auth.ErrUnavailable, err)
}
