// Package hubauth lets MCP clients log in with the JupyterHub in hub mode: the MCP
// authorization of 2025-11-25 (OAuth 2.1 with PKCE S256, RFC 9728 protected-resource
// metadata, RFC 8414 authorization-server metadata, RFC 7591 dynamic client
// registration), with the Hub as the identity behind it.
//
// JupyterHub is an OAuth 2 provider for its services, but an MCP client cannot use it
// as it is: the Hub publishes no authorization-server metadata, registers no clients and
// redirects only to the service's own oauth_callback. The Server fills those pieces and
// relays the rest to the Hub:
//
//   - /.well-known/oauth-protected-resource names the service prefix as the
//     authorization server; /.well-known/oauth-authorization-server and
//     /.well-known/openid-configuration under it describe the endpoints below;
//   - oauth/register registers public clients (token_endpoint_auth_method none), each
//     with its exact redirect URIs;
//   - oauth/authorize checks the client, its redirect URI (exactly; for http on a
//     loopback IP, any port, as RFC 8252 asks), state and the PKCE
//     S256 challenge, then sends the browser to the Hub's own authorize endpoint as the
//     service's OAuth client: the user logs in at the Hub's login page and approves
//     there;
//   - oauth_callback (the service's oauth_redirect_uri at the Hub) exchanges the Hub's
//     code for the Hub's access token of that user and checks the token with Verify,
//     which names the user; unless that user has approved this client for this
//     redirect URI before (approvals.go), it shows the sidecar's own consent page
//     (consent.go);
//   - oauth/consent takes the user's decision (a POST of that page, CSRF-checked, from
//     a click): an approval is remembered for the user, the client and the redirect
//     URI, and the client gets a code of its own, single-use and short-lived; a denial
//     sends it error=access_denied;
//   - oauth/token gives the client holding the code, the redirect URI and the PKCE
//     verifier the sidecar's own access and refresh tokens, and rotates them on a
//     refresh (tokens.go); oauth/revoke ends them (RFC 7009);
//   - oauth/consents is the user's page of approvals, signed in with the Hub in a
//     browser, where they revoke one (manage.go).
//
// The consent page closes the confused deputy the MCP authorization's security best
// practices describe: every client registered here reaches the Hub as the one OAuth
// client of the service, which the Hub lets through without a page once the user has
// approved the service, so without it any client could have a user's code sent to a
// redirect URI of its choosing by a mere link.
//
// No token is passed through: the Hub's token of a login stays in the Server, which
// checks it with Verify on every use of the tokens it minted from it, so a token
// revoked at the Hub ends them within hub.token_cache_ttl. Every store is bounded in
// memory, every endpoint rate-limited, and no token or code is logged. Rate limits are
// per source address (one flooding source spends its own budget; X-Forwarded-For names
// it only from Config.TrustedProxies). Registration is open, by initial access token or
// closed (Config.Registration), with redirect URIs after RFC 8252 (redirect.go); the
// clients waiting for a user's approval are bounded all together and expire, and at the
// bound a registration is refused rather than any client forgotten; an approved client
// is kept apart, for the process's life.
package hubauth

import (
	"cmp"
	"context"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultProxyHops is Config.ProxyHops behind JupyterHub: its proxy appends one
// X-Forwarded-For entry. New does not apply it: 0 hops is a setting of its own.
const DefaultProxyHops = 1

// ErrConfig is wrapped by New's errors for an unusable Config.
var ErrConfig = errors.New("hubauth: bad configuration")

// Config configures a Server. Every URL is absolute unless said otherwise.
type Config struct {
	Issuer          string // the authorization server: the service prefix as clients reach it, e.g. https://hub.example.org/services/mcp (no trailing slash)
	Resource        string // the protected MCP endpoint, e.g. https://hub.example.org/services/mcp/mcp
	HubAuthorizeURL string // the Hub's authorize endpoint as browsers reach it: https://hub.example.org/hub/api/oauth2/authorize
	HubTokenURL     string // the Hub's token endpoint as the sidecar reaches it: {hub.api_url}/oauth2/token
	HubClientID     string // the service's OAuth client at the Hub: service-{name}
	HubClientSecret string // its secret: the service's API token
	HubRedirectURI  string // the service's oauth_redirect_uri as the Hub registered it (the Hub compares it as a string): /services/{name}/oauth_callback

	// Verify resolves a Hub token to its user, refusing tokens the service does not admit.
	Verify func(ctx context.Context, token string) (user string, err error)

	CodeTTL       time.Duration // how long a code given to a client is valid; 0: DefaultCodeTTL (60 s)
	FlowTTL       time.Duration // how long a login at the Hub, and then its consent page, may take; 0: DefaultFlowTTL (10 min)
	MaxClients    int           // clients registered and not yet approved, all sources together, and clients a user approved, each: full, a registration is refused (503), nobody forgotten; 0: 10000
	MaxPending    int           // consent pages waiting (20 a user at most) and codes not redeemed, each; 0: 10000 (logins at the Hub are held by no store: flowseal.go)
	MaxConsents   int           // approvals remembered, all users together (beyond, a new one is refused: no user's is forgotten for another's); 0: 10000
	MaxApprovals  int           // approvals one user holds (beyond, her oldest is forgotten and its tokens end); 0: DefaultMaxApprovals
	Rate          float64       // requests a second to the flow's endpoints from one source address; 0: 20
	Burst         int           // and the burst above it; 0: 100
	RegisterRate  float64       // registrations a second from one source address; 0: 1
	RegisterBurst int           // and the burst above it; 0: 10
	MaxSources    int           // source addresses whose rates are tracked; 0: 10000
	ProxyHops     int           // proxies in front appending to X-Forwarded-For whose entries name the source; 0: the connection's peer (JupyterHub's: DefaultProxyHops)

	AccessTokenTTL  time.Duration // how long a sidecar access token is valid; 0: DefaultAccessTokenTTL
	RefreshTokenTTL time.Duration // how long a login's refresh tokens last, never beyond the Hub token's expiry; 0: DefaultRefreshTokenTTL
	MaxTokens       int           // logins holding sidecar tokens, all users together (the oldest forgotten first); 0: 10000
	// TrustedProxies are the peers whose X-Forwarded-For is believed (ProxyHops of its
	// entries); a request from any other peer counts as the peer's. Empty (the
	// default): none, every request is its peer's. Behind the Hub's
	// configurable-http-proxy on the same host: 127.0.0.1/32.
	TrustedProxies []netip.Prefix
	// RegistrationTTL is how long a client registered but approved by no user is kept;
	// 0: DefaultRegistrationTTL.
	RegistrationTTL time.Duration
	// Registration is who may register clients; "": DefaultRegistration.
	Registration Registration
	// RegistrationToken is the initial access token (RFC 7591 section 3) a registration
	// needs with Registration RegistrationToken.
	RegistrationToken string
	// AllowedRedirectSchemes are the short private-use schemes clients may register
	// redirect URIs with besides https, http on a loopback host and reverse-domain
	// schemes (CheckAllowedScheme): vscode, cursor.
	AllowedRedirectSchemes []string
	// Clients are registered by the operator, kept for the process's life (with
	// Registration RegistrationClosed, the only ones).
	Clients []Client
	// AllowOpener sends the consent and approvals pages without
	// Cross-Origin-Opener-Policy: same-origin, so a web client that follows the login in
	// a popup keeps its window.opener (and popup.closed reads false); then a page of the
	// Hub's origin that opens the login can read and rewrite the consent page around
	// the user's click: only on a Hub whose users' servers are on subdomains.
	AllowOpener bool

	Client *http.Client // for the Hub's token endpoint; nil: a client with DefaultHubTokenTimeout
	Logger *slog.Logger // nil: slog.Default()

	Registerer prometheus.Registerer // for the tokens' metrics; nil: none
}

// Server is the authorization front of hub mode. Construct it with New.
type Server struct {
	cfg        Config
	log        *slog.Logger
	base       string             // the issuer's path, e.g. /services/mcp
	clients    *bounded[client]   // registered, no user's approval yet: expire after RegistrationTTL
	kept       *bounded[client]   // approved by a user: kept for the process's life
	static     map[string]client  // the operator's (Config.Clients)
	xffOnce    sync.Once          // logs the first X-Forwarded-For of an untrusted peer
	refusedLog [2]atomic.Int64    // unix seconds of the last line about registrations refused: at the bound, without the token
	fullUntil  atomic.Int64       // unix nanoseconds until which the waiting clients are at their bound
	sealer     cipher.AEAD        // seals the flows of logins in progress (flowseal.go)
	pending    *bounded[consent]  // consent pages waiting, by their form's id
	granted    *bounded[approval] // approvals, by approvalKey
	codes      *bounded[grant]
	limit      *limiter // every request of the flow, by source
	regs       *limiter // registrations, by source
	secure     bool     // the issuer is https: the consent cookie is Secure

	tokens   *tokenStore       // the sidecar's tokens, by login
	redeemed *bounded[string]  // codes redeemed, by digest: the login they started, ended if one comes back
	metrics  tokenMetrics      // of the tokens
	logins   *bounded[session] // browsers signed in to the approvals page, by their cookie's digest
	now      func() time.Time
}

// client is a registered OAuth client.
type client struct {
	name         string
	redirectURIs []string
	registered   time.Time // zero: the operator's
}

// flow is a login in progress at the Hub: what the client asked for, or, for manage, a
// user signing in to the approvals page.
type flow struct {
	clientID, redirectURI, state, challenge, scope, hubVerifier string
	manage                                                      bool
}

// grant is a code given to a client: what the token request must match, and the user's
// Hub token the client's tokens are minted from.
type grant struct {
	clientID, redirectURI, challenge, scope string
	user, token                             string
	expiresIn                               int
}

// Defaults of Config's bounds and rates (a zero field is its default).
const (
	DefaultCodeTTL         = time.Minute
	DefaultFlowTTL         = 10 * time.Minute
	DefaultMaxClients      = 10000
	DefaultMaxPending      = 10000
	DefaultMaxConsents     = 10000
	DefaultMaxTokens       = 10000
	DefaultMaxSources      = 10000
	DefaultRate            = 20
	DefaultBurst           = 100
	DefaultRegisterRate    = 1
	DefaultRegisterBurst   = 10
	DefaultHubTokenTimeout = 10 * time.Second // of a call to the Hub's token endpoint
)

// New checks cfg and returns a Server; it does no I/O.
func New(cfg Config) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	static, err := cfg.registration()
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	iss, _ := url.Parse(cfg.Issuer)
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "hubauth"), base: iss.Path, secure: iss.Scheme == "https", now: time.Now, static: static}
	s.stores()
	if s.metrics, err = newTokenMetrics(cfg.Registerer, func() float64 { return float64(s.tokens.len()) }); err != nil {
		return nil, err
	}
	return s, nil
}

// check refuses a Config New cannot serve: a URL that is not absolute http(s), a
// missing client or Verify, a negative lifetime, bound or rate.
func (c Config) check() error {
	for name, u := range map[string]string{"Issuer": c.Issuer, "Resource": c.Resource, "HubAuthorizeURL": c.HubAuthorizeURL, "HubTokenURL": c.HubTokenURL} {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.RawQuery != "" || p.Fragment != "" {
			return fmt.Errorf("%w: %s must be an absolute http(s) URL without query, got %q", ErrConfig, name, u)
		}
	}
	if strings.HasSuffix(c.Issuer, "/") {
		return fmt.Errorf("%w: Issuer must not end with /, got %q", ErrConfig, c.Issuer)
	}
	if c.HubClientID == "" || c.HubClientSecret == "" || c.HubRedirectURI == "" || c.Verify == nil {
		return fmt.Errorf("%w: HubClientID, HubClientSecret (the service's API token), HubRedirectURI and Verify are required", ErrConfig)
	}
	if c.AccessTokenTTL < 0 || c.RefreshTokenTTL < 0 || c.MaxTokens < 0 {
		return fmt.Errorf("%w: negative token lifetime or bound", ErrConfig)
	}
	if c.CodeTTL < 0 || c.FlowTTL < 0 || c.MaxClients < 0 || c.MaxPending < 0 || c.MaxConsents < 0 || c.MaxApprovals < 0 || c.Rate < 0 || c.Burst < 0 ||
		c.RegisterRate < 0 || c.RegisterBurst < 0 || c.MaxSources < 0 || c.ProxyHops < 0 || c.RegistrationTTL < 0 {
		return fmt.Errorf("%w: negative limit", ErrConfig)
	}
	return nil
}

// withDefaults is c with every zero field at its default (ProxyHops excepted: 0 hops
// is a setting of its own).
func (c Config) withDefaults() Config {
	c.CodeTTL = cmp.Or(c.CodeTTL, DefaultCodeTTL)
	c.FlowTTL = cmp.Or(c.FlowTTL, DefaultFlowTTL)
	c.RegistrationTTL = cmp.Or(c.RegistrationTTL, DefaultRegistrationTTL)
	c.AccessTokenTTL = cmp.Or(c.AccessTokenTTL, DefaultAccessTokenTTL)
	c.RefreshTokenTTL = cmp.Or(c.RefreshTokenTTL, DefaultRefreshTokenTTL)
	c.MaxClients = cmp.Or(c.MaxClients, DefaultMaxClients)
	c.MaxPending = cmp.Or(c.MaxPending, DefaultMaxPending)
	c.MaxConsents = cmp.Or(c.MaxConsents, DefaultMaxConsents)
	c.MaxApprovals = cmp.Or(c.MaxApprovals, DefaultMaxApprovals)
	c.MaxTokens = cmp.Or(c.MaxTokens, DefaultMaxTokens)
	c.MaxSources = cmp.Or(c.MaxSources, DefaultMaxSources)
	c.Burst = cmp.Or(c.Burst, DefaultBurst)
	c.RegisterBurst = cmp.Or(c.RegisterBurst, DefaultRegisterBurst)
	c.Rate = cmp.Or(c.Rate, DefaultRate)
	c.RegisterRate = cmp.Or(c.RegisterRate, DefaultRegisterRate)
	if c.Client == nil {
		c.Client = &http.Client{Timeout: DefaultHubTokenTimeout}
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// stores makes the Server's bounded stores and rate limiters, at its Config's bounds.
func (s *Server) stores() {
	c := s.cfg
	s.clients = newBounded[client](c.MaxClients, false)
	s.kept = newBounded[client](c.MaxClients, false)
	s.sealer = newSealer()
	s.pending = newBounded[consent](c.MaxPending, false)
	s.granted = newBounded[approval](c.MaxConsents, false)
	s.codes = newBounded[grant](c.MaxPending, false)
	s.tokens = newTokenStore(c.MaxTokens)
	s.redeemed = newBounded[string](c.MaxPending, true)
	s.logins = newBounded[session](c.MaxPending, true)
	s.limit = newLimiter(c.Rate, c.Burst, c.MaxSources)
	s.regs = newLimiter(c.RegisterRate, c.RegisterBurst, c.MaxSources)
}

// ResourceMetadataURL is the protected-resource metadata's URL, named in the 401's
// WWW-Authenticate challenge.
func (s *Server) ResourceMetadataURL() string {
	return s.cfg.Issuer + "/.well-known/oauth-protected-resource"
}

// Challenge is the parameter a 401's WWW-Authenticate carries: resource_metadata="…".
func (s *Server) Challenge() string {
	return fmt.Sprintf("resource_metadata=%q", s.ResourceMetadataURL())
}

// Paths are the paths the Server answers, under the issuer's path.
var Paths = []string{
	"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/",
	"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration", "/.well-known/jwks.json",
	"/oauth/register", "/oauth/authorize", "/oauth/token", "/oauth/revoke", "/oauth_callback",
	"/oauth/consent", "/oauth/consents",
}

// Handler serves the metadata and the flow's endpoints at the issuer's path (the
// service prefix) + Paths; the caller mounts it there.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	b := s.base
	// What a client's code fetches, from a browser page too (the MCP Inspector):
	// readable from any origin, as nothing there rests on cookies.
	for method, routes := range map[string]map[string]http.Handler{
		http.MethodGet: {
			"/.well-known/oauth-protected-resource":   http.HandlerFunc(s.resourceMetadata),
			"/.well-known/oauth-protected-resource/":  http.HandlerFunc(s.resourceMetadata), // RFC 9728's path suffix
			"/.well-known/oauth-authorization-server": http.HandlerFunc(s.serverMetadata),
			"/.well-known/openid-configuration":       http.HandlerFunc(s.serverMetadata),
			"/.well-known/jwks.json": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				writeJSON(w, http.StatusOK, map[string]any{"keys": []any{}}) // no ID tokens are issued
			}),
		},
		http.MethodPost: {"/oauth/register": s.limited(s.within(s.regs, s.register)), "/oauth/token": s.limited(s.token), "/oauth/revoke": s.limited(s.revokeToken)},
	} {
		for p, h := range routes {
			mux.Handle(method+" "+b+p, anyOrigin(h))
			mux.Handle(http.MethodOptions+" "+b+p, anyOrigin(h))
		}
	}
	// Where the browser goes: no cross-origin reads.
	mux.Handle("GET "+b+"/oauth/authorize", s.limited(s.authorize))
	mux.Handle("GET "+b+"/oauth_callback", s.limited(s.callback))
	mux.Handle("POST "+b+"/oauth/consent", s.limited(s.decide))
	// A user's approvals, a page for the user signed in to the Hub in a browser.
	mux.Handle("GET "+b+"/oauth/consents", s.limited(s.consentsPage))
	mux.Handle("POST "+b+"/oauth/consents", s.limited(s.revokeFromPage))
	return mux
}

// CORS of the endpoints clients fetch: the request headers the official SDKs send.
const (
	corsMethods = "GET, POST"
	corsHeaders = "Content-Type, Authorization, MCP-Protocol-Version"
	corsMaxAge  = "600"
)

// anyOrigin lets a page of any origin read h's answers (no credentials) and answers
// its preflights itself.
func anyOrigin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", corsMethods)
			w.Header().Set("Access-Control-Allow-Headers", corsHeaders)
			w.Header().Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) resourceMetadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 s.cfg.Resource,
		"authorization_servers":    []string{s.cfg.Issuer},
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "Jupyter notebooks (JupyterHub)",
	})
}

// serverMetadata is RFC 8414's document; at openid-configuration too, where MCP clients
// look when the Hub owns the origin's /.well-known/ (hence the OpenID fields it
// requires: no ID token is ever issued, the scope openid is not offered).
func (s *Server) serverMetadata(w http.ResponseWriter, _ *http.Request) {
	i := s.cfg.Issuer
	m := map[string]any{
		"issuer":                 i,
		"authorization_endpoint": i + "/oauth/authorize",
		"token_endpoint":         i + "/oauth/token",
		"revocation_endpoint":    i + "/oauth/revoke",
		"revocation_endpoint_auth_methods_supported":     []string{"none"},
		"response_types_supported":                       []string{"code"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"scopes_supported":                               []string{},
		"authorization_response_iss_parameter_supported": true,
		"client_id_metadata_document_supported":          false,
		"jwks_uri":                                       i + "/.well-known/jwks.json",
		"subject_types_supported":                        []string{"public"},
		"id_token_signing_alg_values_supported":          []string{"none"},
	}
	if s.cfg.Registration != RegistrationClosed {
		m["registration_endpoint"] = i + "/oauth/register"
	}
	writeJSON(w, http.StatusOK, m)
}

// limited answers 429 beyond the flow's rate of the request's source.
func (s *Server) limited(h http.HandlerFunc) http.Handler {
	return s.within(s.limit, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h(w, r)
	})
}

// within answers 429 beyond l's rate of the request's source, else calls h.
func (s *Server) within(l *limiter, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !l.allow(s.source(r), s.now()) {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, oauthError{"temporarily_unavailable", "too many requests"})
			return
		}
		h(w, r)
	}
}

// Bounds of a registration.
const (
	maxBody          = 16 << 10
	maxRedirectURIs  = 10
	maxURILen        = 2048
	maxRedirectBytes = 4096 // a registration's redirect URIs together: 10,000 waiting hold at most 40 MB of them
	maxNameLen       = 200
)

// register registers a public client (RFC 7591) as the registration policy lets it:
// its redirect URIs checked (CheckRedirectURI), its name cleaned (cleanName), kept for
// RegistrationLoginWindow, and while a user's login for it is at its consent page
// (FlowTTL), unless a user approves it; when MaxClients wait for an approval, a new one
// is refused until the oldest expires, no client is forgotten for it.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	switch s.cfg.Registration {
	case RegistrationClosed:
		writeJSON(w, http.StatusForbidden, oauthError{"access_denied", "registration is closed: the Hub's operator registers the clients"})
		return
	case RegistrationToken:
		if !s.initialAccess(r) {
			s.logAMinute(&s.refusedLog[1], slog.LevelInfo, "oauth registrations refused: no or a wrong initial access token")
			w.Header().Set("WWW-Authenticate", `Bearer realm="jupyter-mcp-sidecar", error="invalid_token"`)
			writeJSON(w, http.StatusUnauthorized, oauthError{"invalid_token", "registration needs the initial access token the Hub's operator gives out (Authorization: Bearer …)"})
			return
		}
	}
	var req struct {
		RedirectURIs  []string `json:"redirect_uris"`
		ClientName    string   `json:"client_name"`
		GrantTypes    []string `json:"grant_types"`
		ResponseTypes []string `json:"response_types"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody || json.Unmarshal(body, &req) != nil {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_client_metadata", "a JSON object of at most 16 KiB"})
		return
	}
	if err := s.checkRedirectURIs(req.RedirectURIs); err != nil {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_redirect_uri", err.Error()})
		return
	}
	for _, g := range req.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			writeJSON(w, http.StatusBadRequest, oauthError{"invalid_client_metadata", "grant_types: authorization_code and refresh_token only"})
			return
		}
	}
	for _, t := range req.ResponseTypes {
		if t != "code" {
			writeJSON(w, http.StatusBadRequest, oauthError{"invalid_client_metadata", "response_types: code only"})
			return
		}
	}
	name, now := cleanName(req.ClientName), s.now()
	id := random()
	// Full, the store is not looked through again (put's and nextExpiry's walks) until
	// its first registration expires, or keep frees a place.
	full := now.UnixNano() < s.fullUntil.Load()
	if full || !s.clients.put(id, client{name: name, redirectURIs: req.RedirectURIs, registered: now}, min(RegistrationLoginWindow, s.cfg.RegistrationTTL)) {
		if !full {
			s.fullUntil.Store(s.clients.nextExpiry().UnixNano())
		}
		retry := max(1, int(math.Ceil(time.Duration(s.fullUntil.Load()-now.UnixNano()).Seconds())))
		s.logAMinute(&s.refusedLog[0], slog.LevelWarn, "oauth registrations refused: the clients waiting for an approval are at their bound", "max", s.cfg.MaxClients)
		w.Header().Set("Retry-After", strconv.Itoa(retry))
		writeJSON(w, http.StatusServiceUnavailable, oauthError{"temporarily_unavailable", "too many clients registered and not yet approved: try again later"})
		return
	}
	s.log.Info("oauth client registered", "redirect_uris", len(req.RedirectURIs))
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id":                  id,
		"client_id_issued_at":        now.Unix(),
		"client_name":                name,
		"redirect_uris":              req.RedirectURIs,
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
}

// pkceValue checks an RFC 7636 challenge or verifier: 43 to 128 unreserved characters.
func pkceValue(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for _, c := range v {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~", c)) {
			return false
		}
	}
	return true
}

// authorize is the client's entry: errors about the client or its redirect URI are
// shown (never redirected), others redirect to the client with error and state.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	if !topLevel(r) {
		http.Error(w, "open the login in the browser's window, not from a script or a frame", http.StatusForbidden)
		return
	}
	q := r.URL.Query()
	clientID, redirectURI := q.Get("client_id"), q.Get("redirect_uri")
	c, ok := s.client(clientID)
	if !ok {
		http.Error(w, "unknown client_id: register the client first", http.StatusBadRequest)
		return
	}
	if !registered(redirectURI, c.redirectURIs) {
		http.Error(w, "redirect_uri is not one the client registered", http.StatusBadRequest)
		return
	}
	state := q.Get("state")
	fail := func(code, desc string) { s.redirectError(w, r, redirectURI, state, code, desc) }
	switch {
	case q.Get("response_type") != "code":
		fail("unsupported_response_type", "response_type must be code")
	case state == "" || len(state) > 512:
		fail("invalid_request", "state is required (at most 512 bytes)")
	case q.Get("code_challenge_method") != "S256" || !pkceValue(q.Get("code_challenge")):
		fail("invalid_request", "PKCE is required: code_challenge with code_challenge_method S256")
	case q.Get("resource") != "" && strings.TrimRight(q.Get("resource"), "/") != strings.TrimRight(s.cfg.Resource, "/"):
		fail("invalid_target", "resource must be "+s.cfg.Resource)
	case len(q.Get("scope")) > 512:
		fail("invalid_scope", "scope of at most 512 bytes")
	default:
		s.toHub(w, r, flow{clientID: clientID, redirectURI: redirectURI, state: state, challenge: q.Get("code_challenge"), scope: q.Get("scope"), hubVerifier: random() + random()})
	}
}

// toHub sends the browser to the Hub's authorize endpoint for f, sealed in the Hub's
// state and bound to the browser.
func (s *Server) toHub(w http.ResponseWriter, r *http.Request, f flow) {
	hub := url.Values{
		"client_id": {s.cfg.HubClientID}, "redirect_uri": {s.cfg.HubRedirectURI}, "response_type": {"code"},
		"state": {s.seal(f, s.browserSecret(w, r))}, "code_challenge": {s256(f.hubVerifier)}, "code_challenge_method": {"S256"},
	}
	http.Redirect(w, r, s.cfg.HubAuthorizeURL+"?"+hub.Encode(), http.StatusFound)
}

// callback is where the Hub sends the browser back: the Hub's code is exchanged for the
// user's token, and the client gets a code of its own.
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, browser, err := s.open(q.Get("state"))
	if err != nil {
		http.Error(w, "unknown or expired login: start again from your MCP client", http.StatusBadRequest)
		return
	}
	// The Hub's code is used up first, whatever follows: a script of the Hub's origin
	// that has the user's browser reach this URL (a fetch, a frame, a window) can read
	// it, and must find a code that no longer opens anything (red team of issue 39: the
	// attacker's own login's state, the victim's code, finished in the attacker's
	// browser). Refused below, the Hub token is dropped and never leaves.
	var tok string
	var expiresIn int
	if q.Get("error") == "" {
		tok, expiresIn, err = s.exchange(r.Context(), q.Get("code"), f.hubVerifier)
	}
	switch {
	case !topLevel(r):
		http.Error(w, "open the login in the browser's window, not from a script or a frame", http.StatusForbidden)
		return
	case !sameBrowser(r, browser):
		http.Error(w, "this login was started in another browser: start again from your MCP client", http.StatusForbidden)
		return
	case f.manage:
		s.signedIn(w, r, tok, err)
		return
	case q.Get("error") != "":
		s.redirectError(w, r, f.redirectURI, f.state, "access_denied", "the Hub did not authorize: "+truncate(q.Get("error"), 64))
		return
	}
	if err != nil {
		s.log.Warn("hub token exchange failed", "err", err)
		s.redirectError(w, r, f.redirectURI, f.state, "server_error", "the Hub's token exchange failed")
		return
	}
	user, err := s.cfg.Verify(r.Context(), tok)
	if err != nil || user == "" {
		s.log.Info("hub token not admitted", "err", err)
		s.redirectError(w, r, f.redirectURI, f.state, "access_denied", "this Hub user may not use the service")
		return
	}
	s.consentOrCode(w, r, f, user, tok, expiresIn)
}

// issue gives the client of f a code for user's tok, the user having approved the
// client for f's redirect URI.
func (s *Server) issue(w http.ResponseWriter, r *http.Request, f flow, user, tok string, expiresIn int) {
	code := random()
	g := grant{clientID: f.clientID, redirectURI: f.redirectURI, challenge: f.challenge, scope: f.scope, user: user, token: tok, expiresIn: expiresIn}
	if !s.codes.put(hash(code), g, s.cfg.CodeTTL) {
		s.redirectError(w, r, f.redirectURI, f.state, "temporarily_unavailable", "too many codes outstanding")
		return
	}
	s.redirectTo(w, r, f.redirectURI, url.Values{"code": {code}, "state": {f.state}, "iss": {s.cfg.Issuer}})
}

// client is a registered client: the operator's, approved by a user or waiting.
func (s *Server) client(id string) (client, bool) {
	if c, ok := s.static[id]; ok {
		return c, true
	}
	if c, ok := s.kept.get(id); ok {
		return c, true
	}
	return s.clients.get(id)
}

// keep moves a client out of those waiting for an approval, which expire, into those
// kept for the process's life: call it for a client given an approval (or a token)
// before giving it. false: the client is not registered, or MaxClients are kept.
func (s *Server) keep(id string) bool {
	if _, ok := s.static[id]; ok {
		return true
	}
	if _, ok := s.kept.get(id); ok {
		return true
	}
	c, ok := s.clients.get(id)
	if !ok || !s.kept.put(id, c, 0) {
		return false
	}
	s.clients.take(id)
	s.fullUntil.Store(0) // a place is free
	return true
}

// exchange trades the Hub's code for the Hub's access token.
func (s *Server) exchange(ctx context.Context, code, verifier string) (string, int, error) {
	if code == "" || len(code) > 512 {
		return "", 0, errors.New("no code from the Hub")
	}
	form := url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {s.cfg.HubRedirectURI},
		"client_id": {s.cfg.HubClientID}, "client_secret": {s.cfg.HubClientSecret}, "code_verifier": {verifier},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.HubTokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("hub token endpoint: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", 0, err
	}
	if resp.StatusCode != http.StatusOK {
		var e oauthError
		_ = json.Unmarshal(body, &e)
		return "", 0, fmt.Errorf("hub token endpoint: status %d %s", resp.StatusCode, truncate(e.Error, 64))
	}
	var t struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &t); err != nil || t.AccessToken == "" {
		return "", 0, errors.New("hub token endpoint: no access_token in its answer")
	}
	return t.AccessToken, t.ExpiresIn, nil
}

// token redeems a code (once, by the client it was given to, with the redirect URI and
// the PKCE verifier of its authorization request, while the user's approval stands)
// or a refresh token (refreshGrant).
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request", "a form body of at most 16 KiB"})
		return
	}
	f := r.PostForm
	switch f.Get("grant_type") {
	case "authorization_code":
	case "refresh_token":
		s.refreshGrant(w, r, f)
		return
	default:
		writeJSON(w, http.StatusBadRequest, oauthError{"unsupported_grant_type", "authorization_code or refresh_token"})
		return
	}
	g, ok := s.codes.take(hash(f.Get("code"))) // single-use: gone whatever follows
	switch {
	case !ok:
		s.replayed(hash(f.Get("code")))
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_grant", "unknown, used or expired code"})
	case f.Get("client_id") != g.clientID:
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_grant", "the code was issued to another client"})
	case f.Get("redirect_uri") != g.redirectURI:
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_grant", "redirect_uri differs from the authorization request's"})
	case f.Get("code_verifier") == "":
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request", "code_verifier is required"})
	case subtle.ConstantTimeCompare([]byte(s256(f.Get("code_verifier"))), []byte(g.challenge)) != 1:
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_grant", "code_verifier does not match the code_challenge"})
	case !s.approved(g.user, g.clientID, g.redirectURI): // revoked since the code was given
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_grant", "the user's approval of the client was revoked"})
	default:
		s.redeemed.put(hash(f.Get("code")), s.mintFor(w, g), s.cfg.FlowTTL)
	}
}

func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, redirectURI, state, code, desc string) {
	v := url.Values{"error": {code}, "error_description": {desc}, "iss": {s.cfg.Issuer}}
	if state != "" {
		v.Set("state", state)
	}
	s.redirectTo(w, r, redirectURI, v)
}

func (s *Server) redirectTo(w http.ResponseWriter, r *http.Request, redirectURI string, v url.Values) {
	sep := "?"
	if strings.Contains(redirectURI, "?") {
		sep = "&"
	}
	http.Redirect(w, r, redirectURI+sep+v.Encode(), http.StatusFound)
}

// registered reports whether redirectURI is one of the client's redirect URIs: the
// same string, or, for http on a loopback IP literal, the same but for the port (RFC
// 8252 section 7.3, OAuth 2.1: a native app such as VS Code listens on whatever port
// the system gives it when the login starts).
func registered(redirectURI string, list []string) bool {
	for _, l := range list {
		if redirectURI == l || sameButPort(redirectURI, l) {
			return true
		}
	}
	return false
}

func sameButPort(a, b string) bool {
	ua, err := url.Parse(a)
	return err == nil && loopbackHTTP(ua, a) && redirectKey(a) == redirectKey(b)
}

type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// randomLen is the length of random's strings.
const randomLen = 43

// random is 256 bits, base64url.
func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// hash keys codes, so the store holds no code a client could redeem.
func hash(code string) string { return s256(code) }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// bounded is a map of at most max entries with optional expiry. Full, it drops the
// expired; then, when evict, the oldest, else it refuses the new entry.
type bounded[V any] struct {
	mu    sync.Mutex
	max   int
	evict bool
	m     map[string]entry[V]
	order []keySeq // insertion order, for eviction (may hold removed or replaced keys)
	seq   uint64
	now   func() time.Time
}

type entry[V any] struct {
	v       V
	expires time.Time // zero: never
	seq     uint64    // which put stored it
}

type keySeq struct {
	key string
	seq uint64
}

func newBounded[V any](max int, evict bool) *bounded[V] {
	return &bounded[V]{max: max, evict: evict, m: map[string]entry[V]{}, now: time.Now}
}

func (b *bounded[V]) put(k string, v V, ttl time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	_, replace := b.m[k]
	if !replace && len(b.m) >= b.max {
		for key, e := range b.m {
			if !e.expires.IsZero() && now.After(e.expires) {
				delete(b.m, key)
			}
		}
	}
	for b.evict && !replace && len(b.m) >= b.max && len(b.order) > 0 {
		o := b.order[0]
		b.order = b.order[1:]
		if e, ok := b.m[o.key]; ok && e.seq == o.seq {
			delete(b.m, o.key)
		}
	}
	if !replace && len(b.m) >= b.max {
		return false
	}
	b.seq++
	e := entry[V]{v: v, seq: b.seq}
	if ttl > 0 {
		e.expires = now.Add(ttl)
	}
	b.m[k] = e
	if b.evict {
		b.order = append(b.order, keySeq{k, e.seq})
		if len(b.order) > 2*b.max { // removed and replaced keys' places: compact
			live := b.order[:0]
			for _, o := range b.order {
				if e, ok := b.m[o.key]; ok && e.seq == o.seq {
					live = append(live, o)
				}
			}
			b.order = live
		}
	}
	return true
}

func (b *bounded[V]) lookup(k string, remove bool) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.m[k]
	if ok && remove {
		delete(b.m, k)
	}
	var zero V
	if !ok || (!e.expires.IsZero() && b.now().After(e.expires)) {
		return zero, false
	}
	return e.v, true
}

// nextExpiry is when the first entry to expire does; zero when none will.
func (b *bounded[V]) nextExpiry() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	var first time.Time
	for _, e := range b.m {
		if !e.expires.IsZero() && (first.IsZero() || e.expires.Before(first)) {
			first = e.expires
		}
	}
	return first
}

// extend keeps k, if present and not expired, for ttl from now at least; false if it
// is not there.
func (b *bounded[V]) extend(k string, ttl time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.m[k]
	now := b.now()
	if !ok || (!e.expires.IsZero() && now.After(e.expires)) {
		return false
	}
	if until := now.Add(ttl); !e.expires.IsZero() && e.expires.Before(until) {
		e.expires = until
		b.m[k] = e
	}
	return true
}

func (b *bounded[V]) get(k string) (V, bool)  { return b.lookup(k, false) }
func (b *bounded[V]) take(k string) (V, bool) { return b.lookup(k, true) }

// each calls f with every entry not expired whose key starts with prefix.
func (b *bounded[V]) each(prefix string, f func(v V)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for k, e := range b.m {
		if strings.HasPrefix(k, prefix) && (e.expires.IsZero() || !now.After(e.expires)) {
			f(e.v)
		}
	}
}
