package hubauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
)

// The sidecar's own tokens. A client never sees the Hub's token (the MCP security best
// practices: no token passthrough): the token endpoint answers a code with an access
// token and a refresh token of the sidecar's, opaque (256 random bits behind a prefix
// that names them), stored only as digests. Both belong to a family: one authorization
// (Hub user, client, redirect URI, scope) and the Hub token it was minted from, which
// stays here. Every use of a family's token checks the approval it came from and the
// Hub token with Config.Verify (the "jupyterhub" verifier, cached as for any Hub
// token), so a revoked approval, or a Hub token revoked or expired at the Hub, ends the
// family at once, or within hub.token_cache_ttl. A refresh rotates: it gives a new
// access and refresh token and ends the old ones; an old refresh token used again
// (stolen, or a client's retry racing its own refresh) ends the whole family.

// Token defaults.
const (
	DefaultAccessTokenTTL  = time.Hour
	DefaultRefreshTokenTTL = 14 * 24 * time.Hour
	// maxUserFamilies bounds one user's families: a user logging in over and over
	// forgets their own oldest, not other users'.
	maxUserFamilies = 100
	// maxRotated bounds the replaced refresh tokens a family remembers to tell a reuse;
	// an older one is merely unknown.
	maxRotated = 32
)

// The prefixes of the sidecar's tokens: a token with tokenPrefix is never sent to the Hub.
const (
	tokenPrefix   = "jms_"
	accessPrefix  = tokenPrefix + "at_"
	refreshPrefix = tokenPrefix + "rt_"
)

// errTokenRejected is a sidecar token refused: unknown, expired or revoked.
var errTokenRejected = fmt.Errorf("%w: sidecar token not admitted", auth.ErrUnauthorized)

// family is one authorization's tokens and the Hub token behind them.
type family struct {
	id                                 string
	user, clientID, redirectURI, scope string
	hubToken                           string
	created, expires                   time.Time // expires: the refresh token's end, never after the Hub token's
	access                             string    // digest of the live access token
	accessExpires                      time.Time
	refresh                            string   // digest of the live refresh token
	rotated                            []string // digests of the refresh tokens it replaced, oldest first
}

// tokenStore holds the families, by id and by their tokens' digests. At most max
// families, maxUserFamilies of them one user's; beyond, the oldest are forgotten.
type tokenStore struct {
	mu       sync.Mutex
	max      int
	families map[string]*family
	access   map[string]*family // live access tokens
	refresh  map[string]*family // live and replaced refresh tokens
	now      func() time.Time
}

func newTokenStore(max int) *tokenStore {
	return &tokenStore{max: max, families: map[string]*family{}, access: map[string]*family{}, refresh: map[string]*family{}, now: time.Now}
}

// add stores f with fresh tokens (accessTTL, bounded by f.expires) and returns them;
// evicted counts the families it forgot to make room.
func (t *tokenStore) add(f *family, accessTTL time.Duration, evicted prometheus.Counter) (access, refresh string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var mine []*family
	for _, o := range t.families {
		if o.user == f.user {
			mine = append(mine, o)
		}
	}
	for len(mine) >= maxUserFamilies {
		i := oldest(mine)
		t.drop(mine[i])
		evicted.Inc()
		mine = append(mine[:i], mine[i+1:]...)
	}
	if len(t.families) >= t.max {
		for _, o := range t.families {
			if !now.Before(o.expires) {
				t.drop(o)
			}
		}
	}
	for len(t.families) >= t.max {
		all := make([]*family, 0, len(t.families))
		for _, o := range t.families {
			all = append(all, o)
		}
		t.drop(all[oldest(all)])
		evicted.Inc()
	}
	f.created = now
	t.families[f.id] = f
	return t.mint(f, accessTTL), t.rotate(f)
}

func oldest(fs []*family) int {
	i := 0
	for j, f := range fs {
		if f.created.Before(fs[i].created) {
			i = j
		}
	}
	return i
}

// mint gives f a new access token, ending its previous one; t.mu is held.
func (t *tokenStore) mint(f *family, ttl time.Duration) string {
	delete(t.access, f.access)
	tok := accessPrefix + random()
	f.access = hash(tok)
	f.accessExpires = t.now().Add(ttl)
	if f.accessExpires.After(f.expires) {
		f.accessExpires = f.expires
	}
	t.access[f.access] = f
	return tok
}

// rotate gives f a new refresh token, remembering the one it replaces; t.mu is held.
func (t *tokenStore) rotate(f *family) string {
	if f.refresh != "" {
		f.rotated = append(f.rotated, f.refresh)
		if len(f.rotated) > maxRotated {
			delete(t.refresh, f.rotated[0])
			f.rotated = f.rotated[1:]
		}
	}
	tok := refreshPrefix + random()
	f.refresh = hash(tok)
	t.refresh[f.refresh] = f
	return tok
}

// drop forgets f and its tokens; t.mu is held.
func (t *tokenStore) drop(f *family) {
	delete(t.families, f.id)
	delete(t.access, f.access)
	delete(t.refresh, f.refresh)
	for _, d := range f.rotated {
		delete(t.refresh, d)
	}
}

// byAccess is the family of a live access token's digest.
func (t *tokenStore) byAccess(digest string) (family, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.access[digest]
	if !ok || !t.now().Before(f.accessExpires) {
		return family{}, false
	}
	return *f, true
}

// refreshState is what a refresh token's digest names.
type refreshState int

const (
	refreshUnknown refreshState = iota // never issued, expired, or its family ended
	refreshLive
	refreshReused // replaced by a refresh already: its family is ended
)

// byRefresh is the family of a refresh token's digest; a replaced one ends its family.
func (t *tokenStore) byRefresh(digest string) (family, refreshState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.refresh[digest]
	switch {
	case !ok:
		return family{}, refreshUnknown
	case !t.now().Before(f.expires):
		t.drop(f)
		return family{}, refreshUnknown
	case f.refresh != digest:
		t.drop(f)
		return *f, refreshReused
	}
	return *f, refreshLive
}

// renew rotates the family id whose live refresh token has digest: new access and
// refresh tokens, the old ones ended; false if the family ended or was renewed since.
func (t *tokenStore) renew(id, digest string, accessTTL time.Duration) (f family, access, refresh string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.families[id]
	if !ok || p.refresh != digest || !t.now().Before(p.expires) {
		return family{}, "", "", false
	}
	access, refresh = t.mint(p, accessTTL), t.rotate(p)
	return *p, access, refresh, true
}

// revoke ends the family id; false if there was none.
func (t *tokenStore) revoke(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.families[id]
	if ok {
		t.drop(f)
	}
	return ok
}

// revokeAccess ends the access token of digest only (its family's refresh token lives on).
func (t *tokenStore) revokeAccess(digest string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f, ok := t.access[digest]; ok {
		delete(t.access, digest)
		f.access = ""
	}
}

// revokeWhere ends every family match selects, counting each on c.
func (t *tokenStore) revokeWhere(match func(*family) bool, c prometheus.Counter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range t.families {
		if match(f) {
			t.drop(f)
			c.Inc()
		}
	}
}

func (t *tokenStore) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.families)
}

// tokenMetrics count the sidecar's tokens.
type tokenMetrics struct {
	issued  *prometheus.CounterVec // grant: authorization_code, refresh_token
	revoked *prometheus.CounterVec // reason: approval_revoked, client_revoked, refresh_reused, code_replayed, hub_token_rejected, evicted
}

// Revocation reasons, the label values of tokenMetrics.revoked.
var revokeReasons = []string{"approval_revoked", "client_revoked", "refresh_reused", "code_replayed", "hub_token_rejected", "evicted"}

func newTokenMetrics(reg prometheus.Registerer, held func() float64) (tokenMetrics, error) {
	r := promreg.On(reg)
	m := tokenMetrics{
		issued: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "hubauth", Name: "tokens_issued_total",
			Help: "Access and refresh token pairs the sidecar issued to OAuth clients, by grant: authorization_code (a login), refresh_token."}, []string{"grant"})),
		revoked: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "hubauth", Name: "token_families_revoked_total",
			Help: "Logins whose tokens were ended before their time, by reason: approval_revoked (by the user), client_revoked (RFC 7009), refresh_reused, code_replayed, hub_token_rejected (revoked or expired at the Hub), evicted (over the bound)."}, []string{"reason"})),
	}
	promreg.Register(r, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: promreg.Namespace, Subsystem: "hubauth", Name: "token_families",
		Help: "Logins holding sidecar tokens, expired ones included until they are swept."}, held))
	if err := r.Err(); err != nil {
		return m, fmt.Errorf("register hubauth metrics: %w", err)
	}
	for _, g := range []string{"authorization_code", "refresh_token"} {
		m.issued.WithLabelValues(g)
	}
	for _, k := range revokeReasons {
		m.revoked.WithLabelValues(k)
	}
	return m, nil
}

// tokenResponse answers a token request with f's new tokens.
func (s *Server) tokenResponse(w http.ResponseWriter, f family, access, refresh string) {
	resp := map[string]any{"access_token": access, "token_type": "Bearer", "refresh_token": refresh,
		"expires_in": max(1, int(f.accessExpires.Sub(s.now()).Round(time.Second).Seconds()))}
	if f.scope != "" {
		resp["scope"] = f.scope
	}
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, resp)
}

// mintFor starts a family for a redeemed code (user's tokens for g's client, from the
// Hub token g holds) and returns its id.
func (s *Server) mintFor(w http.ResponseWriter, g grant) string {
	f := &family{id: random(), user: g.user, clientID: g.clientID, redirectURI: g.redirectURI, scope: g.scope, hubToken: g.token}
	f.expires = s.now().Add(s.cfg.RefreshTokenTTL)
	if g.expiresIn > 0 {
		if hub := s.now().Add(time.Duration(g.expiresIn) * time.Second); hub.Before(f.expires) {
			f.expires = hub
		}
	}
	access, refresh := s.tokens.add(f, s.cfg.AccessTokenTTL, s.metrics.revoked.WithLabelValues("evicted"))
	s.metrics.issued.WithLabelValues("authorization_code").Inc()
	s.tokenResponse(w, *f, access, refresh)
	return f.id
}

// replayed ends the login a code of digest started, if it was redeemed already: a code
// that comes back was seen by someone else (RFC 6749 section 4.1.2).
func (s *Server) replayed(digest string) {
	if id, ok := s.redeemed.take(digest); ok && s.tokens.revoke(id) {
		s.metrics.revoked.WithLabelValues("code_replayed").Inc()
		s.log.Warn("a redeemed code was used again: the tokens it gave are revoked")
	}
}

// refreshGrant answers grant_type=refresh_token: the family's client, with its live
// refresh token, still approved and its Hub token still admitted, gets new tokens.
func (s *Server) refreshGrant(w http.ResponseWriter, r *http.Request, form url.Values) {
	get := form.Get
	digest := hash(get("refresh_token"))
	f, state := s.tokens.byRefresh(digest)
	switch {
	case state == refreshReused:
		s.metrics.revoked.WithLabelValues("refresh_reused").Inc()
		s.log.Warn("a replaced refresh token was used again: that login's tokens are revoked")
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_grant", "unknown, replaced or expired refresh token"})
		return
	case state == refreshUnknown || !strings.HasPrefix(get("refresh_token"), refreshPrefix):
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_grant", "unknown, replaced or expired refresh token"})
		return
	case get("client_id") != f.clientID:
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_grant", "the refresh token was issued to another client"})
		return
	case !scopeWithin(get("scope"), f.scope):
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_scope", "scope beyond the one granted"})
		return
	}
	if err := s.stillGranted(r.Context(), f); err != nil {
		if errors.Is(err, auth.ErrUnavailable) {
			w.Header().Set("Retry-After", "5")
			writeJSON(w, http.StatusServiceUnavailable, oauthError{"temporarily_unavailable", "the Hub cannot be asked now"})
			return
		}
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_grant", "the login behind the refresh token has ended"})
		return
	}
	f, access, refresh, ok := s.tokens.renew(f.id, digest, s.cfg.AccessTokenTTL)
	if !ok { // another refresh with the same token won the race: that one's tokens stand
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_grant", "unknown, replaced or expired refresh token"})
		return
	}
	s.metrics.issued.WithLabelValues("refresh_token").Inc()
	s.tokenResponse(w, f, access, refresh)
}

// scopeWithin reports whether the scope a refresh asks for (space-separated; "": the
// granted one) is within the granted one.
func scopeWithin(asked, granted string) bool {
	have := strings.Fields(granted)
	for _, s := range strings.Fields(asked) {
		found := false
		for _, g := range have {
			found = found || g == s
		}
		if !found {
			return false
		}
	}
	return true
}

// stillGranted checks what a family's token stands on: the user's approval of its
// client and redirect URI, and the Hub token, which must still name the user. A
// rejection ends the family; an error wrapping auth.ErrUnavailable is the Hub not
// answering, and ends nothing.
func (s *Server) stillGranted(ctx context.Context, f family) error {
	if !s.approved(f.user, f.clientID, f.redirectURI) {
		s.tokens.revoke(f.id)
		return errTokenRejected
	}
	user, err := s.cfg.Verify(ctx, f.hubToken)
	if errors.Is(err, auth.ErrUnavailable) {
		return err
	}
	if err != nil || user != f.user {
		if s.tokens.revoke(f.id) {
			s.metrics.revoked.WithLabelValues("hub_token_rejected").Inc()
			s.log.Info("a sidecar token's Hub token is no longer admitted: its login's tokens are revoked")
		}
		return errTokenRejected
	}
	return nil
}

// revokeToken is RFC 7009's endpoint: a client ends a token of its own (a refresh
// token: its whole family; an access token: that token). Public clients name
// themselves with client_id; the answer is 200 whatever the token was.
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request", "a form body of at most 16 KiB"})
		return
	}
	tok, clientID := r.PostForm.Get("token"), r.PostForm.Get("client_id")
	if tok == "" || clientID == "" {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request", "token and client_id are required"})
		return
	}
	digest := hash(tok)
	if f, ok := s.tokens.byAccess(digest); ok && f.clientID == clientID {
		s.tokens.revokeAccess(digest)
	}
	if f, state := s.tokens.byRefresh(digest); state == refreshLive && f.clientID == clientID && s.tokens.revoke(f.id) {
		s.metrics.revoked.WithLabelValues("client_revoked").Inc()
	}
	w.WriteHeader(http.StatusOK)
}

// Verifier admits, besides what next admits (users' Hub tokens), the sidecar's access
// tokens, each to the user it names while its approval and Hub token stand. A token
// with the sidecar's prefix is never handed to next, so never sent to the Hub.
func (s *Server) Verifier(next auth.Verifier) auth.Verifier {
	return tokenVerifier{s: s, next: next}
}

type tokenVerifier struct {
	s    *Server
	next auth.Verifier
}

// Familiar reports whether token is an access token the sidecar gave, or a Hub token
// next finds familiar (auth.Familiar); Verify decides.
func (v tokenVerifier) Familiar(token string) bool {
	if !strings.HasPrefix(token, tokenPrefix) {
		next, ok := v.next.(auth.Familiar)
		return ok && next.Familiar(token)
	}
	_, ok := v.s.tokens.byAccess(hash(token))
	return ok && strings.HasPrefix(token, accessPrefix)
}

func (v tokenVerifier) Verify(ctx context.Context, token string) (auth.Principal, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return v.next.Verify(ctx, token)
	}
	f, ok := v.s.tokens.byAccess(hash(token))
	if !ok || !strings.HasPrefix(token, accessPrefix) {
		return auth.Principal{}, errTokenRejected
	}
	if err := v.s.stillGranted(ctx, f); err != nil {
		return auth.Principal{}, err
	}
	return auth.Principal{User: f.user}, nil
}
