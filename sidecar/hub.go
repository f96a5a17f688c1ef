package sidecar

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/front"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/hubauth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/transport"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/confine"
)

// Hub mode serves every user of a JupyterHub their own notebooks from one process.
// A request's JupyterHub token names its user (the "jupyterhub" verifier); the user's
// store is loaded on first need into a tenant (an instance: the user's tailer, rooms
// and an MCP server of their own, mounted behind one listener) and released after
// hub.idle_timeout without a session or request. Isolation is by construction: a
// user's server knows only that user's store and name bindings, so another user's
// notebook, session or subscription is not found rather than refused. Every instance
// registers its metrics on the process's registry, so the users feed one set of
// series (internal/promreg) and /metrics names no user.

// errNoUser answers a token that names no Hub user.
var errNoUser = errors.New("the token names no JupyterHub user")

// hub holds the active tenants.
type hub struct {
	cfg     config.Config
	obs     config.Obs // the hub's logger; the process's registerer, shared by the users' instances
	version string
	m       *hubMetrics
	// stateDir is where users' name bindings persist (hubStateDir); "": in memory.
	stateDir string

	// shared is what every active user's tailer shares: the file watcher of their
	// SQLite stores (one inotify instance for all; none with store.sqlite.fsnotify
	// off), or the follower of the shared Postgres store (hub.stores.backend postgres).
	shared shared

	// idKey keys the pseudonyms that name users in logs (logID).
	idKey []byte

	mu      sync.Mutex
	tenants map[string]*tenant
	wg      sync.WaitGroup // tenants' goroutines and releases
}

// tenant is one active user's instance.
type tenant struct {
	user     string
	in       *instance
	cancel   context.CancelFunc
	done     chan struct{}
	loaded   chan struct{} // closed when the store's first read has finished
	lastUsed atomic.Int64  // unix nanoseconds of the last request
	err      error         // set before loaded closes when the tenant could not start
	// swapped is set when a directory of the user's was found replaced after it was
	// opened (confine.ErrSwapped): the user is refused until the tenant is released.
	swapped atomic.Bool
}

// runHub serves hub mode until ctx is done.
func runHub(ctx context.Context, cfg config.Config, obs config.Obs, metrics http.Handler, o runOptions) error {
	h := &hub{cfg: cfg, obs: obs.With("component", "hub"), version: o.version, tenants: map[string]*tenant{}}
	var err error
	if h.idKey, err = logIDKey(cfg.Hub.APIToken); err != nil {
		return err
	}
	if h.stateDir, err = hubStateDir(cfg, h.obs); err != nil {
		return err
	}
	if h.m, err = newHubMetrics(h.obs.Registerer, h.users); err != nil {
		return err
	}
	b, err := backendOf(cfg.Hub.Stores.Backend)
	if err != nil {
		return fmt.Errorf("hub stores: %w", err)
	}
	sh, release, err := b.share(cfg, h.obs)
	if err != nil {
		return err
	}
	defer release()
	sh.hub = true
	h.shared = sh
	verifier, err := hubVerifier(cfg, h.obs)
	if err != nil {
		return err
	}
	// The front: the users' router behind the origin check, CORS and the Hub's
	// tokens; the probes also under the service prefix, where the Hub's proxy reaches.
	fc := cfg.Server.FrontConfig("hub", o.listener, h.obs) // "mcp" is the users' transports' own, shared
	fc.ProbePrefixes = []string{"", cfg.Hub.PrefixedPath("")}
	fc.PerPrincipal, _ = cfg.Hub.UserShare(cfg.Server) // each user's share of the listener
	trusted, err := hubauth.ParseTrustedProxies(cfg.Hub.OAuth.TrustedProxies)
	if err != nil {
		return fmt.Errorf("hub.oauth.trusted_proxies: %w", err)
	}
	fc.Proxies = trusted // the Hub's proxy pools every user's requests: shared out request by request
	fc.Listening = func(addr net.Addr) {
		obs.Logger.Info("sidecar started in hub mode", "listen", addr.String(), "endpoint", cfg.Hub.PrefixedPath(cfg.Server.Path), "service", cfg.Hub.ServiceName)
	}
	f, err := front.New(fc, front.Probes{Live: live, Ready: h.ready(), Metrics: metrics})
	if err != nil {
		return fmt.Errorf("register hub metrics: %w", err)
	}
	challenge, endpointVerifier, err := mountHubAuth(f, cfg, verifier, h.obs)
	if err != nil {
		return err
	}
	endpoint, err := front.Edge{AllowedOrigins: cfg.Server.AllowedOrigins, Verifier: endpointVerifier,
		Guard: auth.Guard{Challenge: challenge, Logger: h.obs.Logger, Registerer: h.obs.Registerer,
			Failures: hubauth.TokenFailures(trusted, cfg.Hub.OAuth.ProxyHops)}}.Wrap(h)
	if err != nil {
		return err
	}
	f.Handle(cfg.Hub.PrefixedPath(cfg.Server.Path), endpoint)
	g, gctx := errgroup.WithContext(ctx)
	if h.shared.follower != nil {
		g.Go(func() error { return h.shared.follower.Run(gctx) })
	}
	g.Go(func() error { return f.Run(gctx) })
	g.Go(func() error {
		h.reap(gctx)
		h.closeAll()
		return nil
	})
	err = drain(gctx, cfg.Server.DrainTimeout, g.Wait)
	obs.Logger.Info("sidecar stopped", "err", err)
	return err
}

// ServeHTTP hands an authenticated request to its user's server.
func (h *hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, _ := auth.PrincipalFrom(r.Context())
	if p.User == "" {
		http.Error(w, errNoUser.Error(), http.StatusForbidden)
		return
	}
	t, err := h.tenant(r.Context(), p.User)
	var refused *refusal
	switch {
	case errors.Is(err, config.ErrBadUsername):
		http.Error(w, "this user's store cannot be served", http.StatusForbidden)
		return
	case errors.As(err, &refused):
		http.Error(w, refused.ForUser(), http.StatusForbidden)
		return
	case err != nil:
		h.tenantLog(p.User).Error("cannot serve a user", "err", err)
		http.Error(w, "the user's notebooks cannot be loaded", http.StatusServiceUnavailable)
		return
	}
	if t.swapped.Load() {
		http.Error(w, (&refusal{what: "notebook directory", err: confine.ErrSwapped}).ForUser(), http.StatusForbidden)
		return
	}
	t.lastUsed.Store(time.Now().UnixNano())
	t.in.srv.Handler().ServeHTTP(w, r)
	t.lastUsed.Store(time.Now().UnixNano())
}

// tenant returns the user's active tenant, starting it and waiting for its store's
// first read if it is not active.
func (h *hub) tenant(ctx context.Context, user string) (*tenant, error) {
	h.mu.Lock()
	t, ok := h.tenants[user]
	if !ok {
		var err error
		if t, err = h.start(user); err != nil {
			h.mu.Unlock()
			return nil, err
		}
		h.tenants[user] = t
	}
	h.mu.Unlock()
	select {
	case <-t.loaded:
		return t, t.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// start builds and runs the user's instance; h.mu is held.
func (h *hub) start(user string) (*tenant, error) {
	cfg, err := h.userConfig(user)
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	obs := config.Obs{Logger: h.tenantLog(user), Registerer: h.obs.Registerer}
	t := &tenant{user: user, done: make(chan struct{}), loaded: make(chan struct{})}
	conf, err := userConfinement(h.cfg.Hub, user, func(err error) {
		// Told once per swap, from whichever open found it; the logger redacts the path.
		t.swapped.Store(true)
		h.m.swaps.Inc()
		obs.Logger.Error("a user's directory was replaced after their tenant started: the user is refused until it is released", "err", err)
	})
	if err != nil {
		return nil, err
	}
	obs.Logger.Debug("tenant started", "user", user) // the one line that maps the pseudonym (docs/HUB.md, "Logs")
	if t.in, err = newInstance(cfg, obs, h.version, user, h.shared, conf, resources.WithTransport(transport.HTTP(cfg.Server.TransportConfig(obs)))); err != nil {
		conf.close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	t.lastUsed.Store(begin.UnixNano())
	h.m.loads.Inc()
	h.wg.Add(2)
	go func() {
		defer h.wg.Done()
		defer close(t.done)
		defer conf.close()
		defer t.in.close()
		if err := t.in.run(ctx); err != nil {
			obs.Logger.Error("user instance stopped", "err", err)
		}
	}()
	go func() {
		defer h.wg.Done()
		defer close(t.loaded)
		// Served once the user's names are loaded and the store's first read is done.
		for _, ready := range []<-chan struct{}{t.in.srv.Loaded(), t.in.tailer.FirstRead()} {
			select {
			case <-ready:
			case <-t.done:
				t.err = errors.New("the user's instance stopped while loading")
				return
			}
		}
		if err := checkFiles(cfg, conf); err != nil {
			// Released at the next reap, so that a fixed home is served again.
			obs.Logger.Error("a user's notebooks are not served: their files are refused", "err", err)
			t.err = err
			return
		}
		h.m.loadSeconds.Observe(time.Since(begin).Seconds())
	}()
	return t, nil
}

// userConfig is the single-server configuration of user's store.
func (h *hub) userConfig(user string) (config.Config, error) {
	cfg := h.cfg
	cfg.Store.Backend = cfg.Hub.Stores.Backend
	b, err := backendOf(cfg.Store.Backend)
	if err == nil {
		err = b.forUser(&cfg, user)
	}
	if err != nil {
		return cfg, err
	}
	if cfg.FileID.DBPath, err = cfg.Hub.FileIDDBPath(user); err != nil {
		return cfg, err
	}
	if cfg.FileID.RootDir, err = cfg.Hub.RootDirPath(user); err != nil {
		return cfg, err
	}
	cfg.Server.Path = cfg.Hub.PrefixedPath(cfg.Server.Path)
	cfg.Server.InsecureNoAuth = true // the hub authenticated the request
	_, cfg.Server.Limits.MaxSessions = cfg.Hub.UserShare(cfg.Server)
	cfg.Store.MaxRooms, cfg.Store.MaxBytes, cfg.Store.MaxMemory = cfg.Hub.MaxRoomsPerUser, cfg.Hub.MaxStoreBytesPerUser, cfg.Hub.MaxMemoryPerUser // the user's bound
	cfg.Server.Limits.MaxReadBytes = cfg.Hub.MaxMemoryPerUser                                                                                     // and what her reads build at once
	cfg.Server.StateFile = ""
	if h.stateDir != "" {
		cfg.Server.StateFile = filepath.Join(h.stateDir, fileName(user)+".names.json")
	}
	return cfg, nil
}

// reap releases tenants idle for hub.idle_timeout until ctx is done.
func (h *hub) reap(ctx context.Context) {
	idle := h.cfg.Hub.IdleTimeout
	every(ctx, max(idle/4, 10*time.Millisecond), func() {
		now := time.Now()
		var idleOnes []*tenant
		for _, t := range h.snapshot() { // asked outside h.mu: a tenant may be slow to answer
			select {
			case <-t.loaded:
			default:
				continue
			}
			if t.err == nil && !t.swapped.Load() && (t.in.srv.Active() || now.Sub(time.Unix(0, t.lastUsed.Load())) < idle) {
				continue
			}
			idleOnes = append(idleOnes, t)
		}
		var gone []*tenant
		h.mu.Lock()
		for _, t := range idleOnes {
			if h.tenants[t.user] == t {
				delete(h.tenants, t.user)
				h.m.releases.Inc()
				gone = append(gone, t)
			}
		}
		h.mu.Unlock()
		if len(gone) > 0 {
			h.release(gone)
		}
	})
}

// release stops tenants (their instances take their share out of the gauges as they
// close) and, once they have stopped, returns their memory to the OS: left to itself
// the runtime of a quiet process collects only at its forced GC (every 2 minutes) and
// then returns the freed heap at the scavenger's pace, so RSS stayed at its peak for
// minutes.
func (h *hub) release(ts []*tenant) {
	for _, t := range ts {
		t.cancel()
	}
	h.wg.Add(1) // closeAll waits for it
	go func() {
		defer h.wg.Done()
		for _, t := range ts {
			<-t.done
		}
		debug.FreeOSMemory()
	}()
}

// closeAll stops every tenant and waits for them and for the releases under way.
func (h *hub) closeAll() {
	h.mu.Lock()
	for user, t := range h.tenants {
		delete(h.tenants, user)
		t.cancel()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// ready answers /readyz in hub mode. With the shared Postgres store (hub.stores.backend
// postgres) it is the follower's Readiness: 503 with the reasons from start until the
// follower's first read, while the store is unreachable and while the follower's lag is
// above store.lag_threshold, and always its lag and last error, so that a replica that
// takes over another's users (or one restarted) tells how far behind it is. Anyone
// reaches it through the Hub's proxy: it tells nothing of the users (their counts are
// in /metrics, h.users).
func (h *hub) ready() http.Handler {
	if h.shared.follower != nil {
		return NewHealth(h.shared.follower.Status, func() []rooms.Degradation { return nil }, nil, nil, h.cfg.Store.LagThreshold).Ready()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"ready": true})
	})
}

// users counts the active users and those of them not served yet or not ready (a
// store not loaded yet, unreachable, behind or degraded; files refused).
func (h *hub) users() (active, unready int) {
	ts := h.snapshot()
	for _, t := range ts {
		select {
		case <-t.loaded:
			if t.err != nil || !t.in.health.Check().Ready {
				unready++
			}
		default:
			unready++ // still loading, or stuck: not serving yet
		}
	}
	return len(ts), unready
}

// snapshot is the tenants now. Nothing asks a tenant anything under h.mu, which every
// user's first request takes: one tenant slow to answer (a user's huge notebook file
// being read) would hold up every other user's.
func (h *hub) snapshot() []*tenant {
	h.mu.Lock()
	defer h.mu.Unlock()
	ts := make([]*tenant, 0, len(h.tenants))
	for _, t := range h.tenants {
		ts = append(ts, t)
	}
	return ts
}

// fileName names a user in file names: the name itself when it is a plain identifier,
// else a hex encoding (never a path).
func fileName(user string) string {
	if strings.IndexFunc(user, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) < 0 && user != "." && user != ".." {
		return user
	}
	return fmt.Sprintf("x%x", user)
}

// logIDKey is the key of the pseudonyms naming users in logs: derived from the service's
// API token, so that a user keeps one pseudonym across restarts and replicas of a
// deployment and nobody without the token can tell who it is (a plain hash of a name
// is reversed by hashing the Hub's user list); without a token, random, for this
// process only.
func logIDKey(token string) ([]byte, error) {
	if token != "" {
		k := sha256.Sum256([]byte("jupyter-mcp-sidecar log id\x00" + token))
		return k[:], nil
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("log id key: %w", err)
	}
	return k, nil
}

// LogID is the pseudonym naming user in logs under key: "u-" and 16 hex digits of
// HMAC-SHA256(key, user). `jupyter-mcp-sidecar hub log-id` computes it for an operator.
func LogID(key []byte, user string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(user))
	return "u-" + hex.EncodeToString(m.Sum(nil)[:8])
}

// LogIDKey is the key hub mode's logs are pseudonymized with for cfg (after
// ResolveSecrets); an error when none is stable (no service token: a random key per
// process).
func LogIDKey(cfg config.Config) ([]byte, error) {
	if cfg.Hub.APIToken == "" {
		return nil, errors.New("no hub.api_token: each process picks a random key, logged pseudonyms cannot be computed")
	}
	return logIDKey(cfg.Hub.APIToken)
}

// tenantLog is the logger of user's tenant: its lines carry the user's pseudonym
// (tenant), and the user's directories and quoted name are written with the
// placeholder {username} (redacting), so that no line names the user.
func (h *hub) tenantLog(user string) *slog.Logger {
	pairs := [][2]string{{strconv.Quote(user), strconv.Quote(config.Placeholder)}}
	st := h.cfg.Hub.Stores
	for _, tmpl := range []string{st.SQLitePath, st.FileIDDB, st.RootDir} {
		if dir, err := config.UserDir(tmpl, user); err == nil {
			generic, _ := config.UserDir(tmpl, config.Placeholder)
			pairs = append(pairs, [2]string{dir, generic})
		}
		if p, err := config.Render(tmpl, user); err == nil {
			pairs = append(pairs, [2]string{p, tmpl})
		}
	}
	return slog.New(redacting(h.obs.Logger.Handler(), pairs...)).With("tenant", LogID(h.idKey, user))
}

// hubVerifier is hub mode's token verifier: the registered hubauth.VerifierName, from
// the hub section.
func hubVerifier(cfg config.Config, obs config.Obs) (auth.Verifier, error) {
	v, err := auth.New(hubauth.VerifierName, cfg.Hub.VerifierSettings(obs))
	if err != nil {
		return nil, fmt.Errorf("hub token verifier: %w", err)
	}
	return v, nil
}

// hubLogin builds hub.oauth's login with the Hub (no I/O), resolving a Hub token to its
// user with verifier.
func hubLogin(cfg config.Config, verifier auth.Verifier, obs config.Obs) (*hubauth.Server, error) {
	lc, err := cfg.LoginConfig(obs)
	if err != nil {
		return nil, err
	}
	lc.Verify = func(ctx context.Context, token string) (string, error) {
		p, err := verifier.Verify(ctx, token)
		return p.User, err
	}
	return hubauth.New(lc)
}

// mountHubAuth serves, with hub.oauth on, the login with the Hub (sidecar/hubauth) under
// the service prefix and returns the challenge parameter a 401 carries and the MCP
// endpoint's verifier: verifier, and the login's own tokens with hub.oauth on; "" and
// verifier when off.
func mountHubAuth(f *front.Front, cfg config.Config, verifier auth.Verifier, obs config.Obs) (string, auth.Verifier, error) {
	if !cfg.Hub.OAuth.Enabled {
		return "", verifier, nil
	}
	srv, err := hubLogin(cfg, verifier, obs)
	if err != nil {
		return "", nil, err
	}
	h := srv.Handler()
	for _, p := range hubauth.Paths {
		f.Handle(cfg.Hub.PrefixedPath(p), h)
	}
	return srv.Challenge(), srv.Verifier(verifier), nil
}
