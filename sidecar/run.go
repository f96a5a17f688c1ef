// Package sidecar wires the daemon together and owns its lifecycle: the store tailer
// feeds live notebook rooms, their changes are debounced per notebook, and the MCP
// server announces them; health, readiness and metrics are served beside it.
package sidecar

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/debounce"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/front"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/ondisk"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/transport"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// pathRefresh is how often room paths are re-resolved, so renames are followed.
const pathRefresh = 2 * time.Second

// ErrDrainTimeout is returned by Run when what it runs has not stopped within
// server.drain_timeout of being told to: Run returns anyway, for the process to exit.
var ErrDrainTimeout = errors.New("not stopped within server.drain_timeout")

// Option adjusts Run.
type Option func(*runOptions)

type runOptions struct {
	version  string
	listener net.Listener
	stdin    io.Reader
	stdout   io.Writer
}

// WithVersion reports v as the server's version.
func WithVersion(v string) Option { return func(o *runOptions) { o.version = v } }

// WithListener serves HTTP on l instead of listening on server.listen.
func WithListener(l net.Listener) Option { return func(o *runOptions) { o.listener = l } }

// WithStdio sets the streams of the stdio transport.
func WithStdio(in io.Reader, out io.Writer) Option {
	return func(o *runOptions) { o.stdin, o.stdout = in, out }
}

// Run serves until ctx is done or the MCP server ends (its stdio client closed
// its input), then drains within server.drain_timeout: past it, Run returns
// ErrDrainTimeout, leaving behind what did not stop. cfg must be
// valid with its secrets resolved (config.Config.Validate, ResolveSecrets); Run logs to
// cfg.Logger. With hub.enabled it serves every user of a JupyterHub their own notebooks
// (runHub).
func Run(ctx context.Context, cfg config.Config, opts ...Option) error {
	log := cmp.Or(cfg.Logger, slog.Default())
	var o runOptions
	for _, opt := range opts {
		opt(&o)
	}
	reg, metricsHandler, err := newRegistry()
	if err != nil {
		return err
	}
	obs := config.Obs{Logger: log, Registerer: reg}
	if cfg.Hub.Enabled {
		return runHub(ctx, cfg, obs, metricsHandler, o)
	}

	tc := cfg.Server.TransportConfig(obs)
	nt := transport.HTTP(tc)
	stdio := cfg.Server.Transport == transport.KindStdio
	if stdio {
		nt = transport.Stdio(tc, o.stdin, o.stdout)
	}
	cfg, err = withStateFile(cfg, obs)
	if err != nil {
		return err
	}
	in, err := newInstance(cfg, obs, o.version, "", shared{}, confinement{}, resources.WithTransport(nt))
	if err != nil {
		return err
	}
	defer in.close()

	g, gctx := errgroup.WithContext(ctx)
	gctx, stop := context.WithCancel(gctx)
	defer stop()
	g.Go(func() error { defer stop(); return in.run(gctx) }) // the instance done (stdio input closed), all stops
	// The front: the MCP endpoint with the probes, or stdio with the probes on a
	// listener of their own.
	if !stdio || cfg.Server.MetricsListen != "" {
		f, err := singleFront(cfg.Server, in, metricsHandler, obs, o.listener, stdio)
		if err != nil {
			return err
		}
		g.Go(func() error { return f.Run(gctx) })
	}
	log.Info("sidecar started", "backend", cfg.Store.Backend, "transport", cfg.Server.Transport, "listen", cfg.Server.Listen)
	err = drain(gctx, cfg.Server.DrainTimeout, g.Wait)
	log.Info("sidecar stopped", "err", err)
	return err
}

// instance is one store served by one MCP server: the tailer feeding live rooms, their
// changes debounced per notebook and announced by the server. Single-server mode runs
// one; hub mode one per active user.
type instance struct {
	tailer        ystore.Tailer
	rooms         *rooms.Writer
	deb           *debounce.Debouncer[string, change]
	srv           *resources.Server
	health        *Health
	metrics       *roomsMetrics
	files         *ondisk.Watcher // nil with ondisk.enabled false
	closeResolver func() error
	drainTimeout  time.Duration // server.drain_timeout
}

// newInstance builds an instance of cfg's store and server, logging to obs.Logger and
// registering its metrics on obs.Registerer (the instances on one feed the same series); opts are more server options
// (its listener, its stdio). user is the hub user the store belongs to ("" outside hub
// mode), named in every change event; sh is what hub mode's users' tailers share; conf
// confines what is opened for the user (hub mode). No
// I/O. Each part is built from parts built before it: the store, the file reader, the
// rooms (the server's library), the server, the debouncer and the rooms' writer that
// tells them (docs/ARCHITECTURE.md, "Wiring").
func newInstance(cfg config.Config, obs config.Obs, version, user string,
	sh shared, conf confinement, opts ...resources.Option) (*instance, error) {
	tailer, resolver, closeResolver, err := openStore(cfg, obs, sh, conf)
	if err != nil {
		return nil, err
	}
	closeStore := func() { tailer.Close(); _ = closeResolver() }
	m, err := NewMetrics(obs.Registerer)
	if err != nil {
		closeStore()
		return nil, err
	}
	rm := &roomsMetrics{m: m}
	rc := cfg.RoomsConfig(obs)
	rc.Resolver, rc.Metrics, rc.Scope = resolver, rm, user // a hub user's versions are theirs alone
	if rl, ok := tailer.(ystore.Reloader); ok {
		rc.Reload = rl.Reload
	}
	var files *ondisk.Watcher
	if cfg.OnDisk.Enabled {
		fc := cfg.FilesConfig(obs)
		fc.DisableFSNotify = fc.DisableFSNotify || sh.hub // hub mode: one inotify instance in all (the store watcher's)
		fc.Confine = conf.notebooks
		files = ondisk.New(fc)
		rc.Files = files
	}
	set := rooms.New(rc)
	srv, err := resources.New(cfg.ServerConfig(version, obs), set, opts...)
	if err != nil {
		closeStore()
		return nil, fmt.Errorf("mcp server: %w", err)
	}
	// Every notebook's changes, bound to a name or not, are debounced per path with
	// their origin; the server turns each burst into one event for the publisher.
	deb := debounce.New(cfg.Notifications.Debounce, cfg.Notifications.MaxDelay, mergeChange,
		func(path string, c change) {
			srv.NotebookChanged(path, c.ch, publishOrigin(c.origin, user))
			m.changesFlushed.Inc() // after: a count seen means the change's URIs are settled
		})
	return &instance{
		tailer:        tailer,
		rooms:         set.Writer(announcer{deb: deb, srv: srv, user: user}),
		deb:           deb,
		srv:           srv,
		health:        NewHealth(tailer.Status, set.Degradations, srv, resolver, cfg.Store.LagThreshold),
		metrics:       rm,
		files:         files,
		closeResolver: closeResolver,
		drainTimeout:  cfg.Server.DrainTimeout,
	}, nil
}

// run tails, debounces and serves until ctx is done or its MCP server ends, then stops
// within the drain timeout (or returns ErrDrainTimeout).
func (in *instance) run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	gctx, stop := context.WithCancel(gctx)
	defer stop()
	g.Go(func() error {
		if err := in.tailer.Run(gctx, in.rooms.Sink); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("store tailer: %w", err)
		}
		return nil
	})
	g.Go(func() error { return in.deb.Run(gctx) })
	g.Go(func() error { defer stop(); return in.srv.Run(gctx) }) // the MCP server done (stdio input closed), the instance stops
	g.Go(func() error { refreshPaths(gctx, in.rooms); return nil })
	g.Go(func() error { return in.rooms.Run(gctx) })
	if in.files != nil {
		g.Go(func() error { return in.files.Run(gctx, in.rooms) })
	}
	return drain(gctx, in.drainTimeout, g.Wait)
}

// drain returns wait's result, or, if wait has not returned d after ctx is done, an
// error wrapping ErrDrainTimeout. wait's goroutines are then left behind: one blocked
// in a system call cannot be stopped, and must not keep the process from exiting.
func drain(ctx context.Context, d time.Duration, wait func() error) error {
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("%w (%v)", ErrDrainTimeout, d)
	}
}

// close takes the instance out of the metrics (its rooms and its tailer's status; its
// counters stay counted) and releases the file id resolvers; run has returned.
func (in *instance) close() {
	in.metrics.release()
	in.tailer.Close()
	_ = in.closeResolver()
}

// Check tries where Run would keep name bindings (a file written and removed there:
// a configured place that cannot be used is the error Run stops with) and builds,
// without other I/O, the MCP server Run would build from cfg (its gate, publisher,
// hooks and extensions with their options) and the front's token verifier (hub mode:
// the "jupyterhub" one and, with hub.oauth, the login), logging to cfg.Logger as Run does,
// and returns the error Run would stop with. cfg must be valid with its secrets resolved.
func Check(cfg config.Config) error {
	obs := config.Obs{Logger: cmp.Or(cfg.Logger, slog.Default()), Registerer: prometheus.NewRegistry()}
	var err error
	if cfg.Hub.Enabled {
		_, err = hubStateDir(cfg, obs)
	} else {
		cfg, err = withStateFile(cfg, obs)
	}
	if err != nil {
		return err
	}
	if _, err := resources.New(cfg.ServerConfig("", obs), nil); err != nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	switch { // the front's verifier (and hub mode's login), as Run builds them
	case cfg.Hub.Enabled:
		var v auth.Verifier
		if v, err = hubVerifier(cfg, obs); err == nil && cfg.Hub.OAuth.Enabled {
			_, err = hubLogin(cfg, v, obs)
		}
	case cfg.Server.Transport != transport.KindStdio:
		if _, err = mcpVerifier(cfg.Server, obs); err != nil {
			err = fmt.Errorf("mcp server: %w", err)
		}
	}
	return err
}

// refreshPaths re-resolves room paths until ctx is done.
func refreshPaths(ctx context.Context, w *rooms.Writer) {
	every(ctx, pathRefresh, func() { w.RefreshPaths(ctx) })
}

// every calls f every d until ctx is done.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// newRegistry returns the process's metric registry, with the Go and process collectors,
// and its /metrics handler.
func newRegistry() (*prometheus.Registry, http.Handler, error) {
	reg := prometheus.NewRegistry()
	r := promreg.On(reg)
	promreg.Register(r, collectors.NewGoCollector())
	promreg.Register(r, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := r.Err(); err != nil {
		return nil, nil, fmt.Errorf("register process metrics: %w", err)
	}
	return reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), nil
}

// afterLoad holds each request until srv has loaded its name bindings (or stopped), so
// that no read misses a bound name.
func afterLoad(srv *resources.Server, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-srv.Loaded():
			h.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	})
}

// mcpVerifier is the token verifier of single mode's MCP endpoint (server.verifier,
// server.token); nil with server.insecure_no_auth.
func mcpVerifier(s config.Server, obs config.Obs) (auth.Verifier, error) {
	if s.InsecureNoAuth {
		return nil, nil
	}
	return auth.New(s.Verifier.Name, s.VerifierSettings(obs))
}

// singleFront is single mode's front: the instance's MCP endpoint behind the origin
// check, CORS and the configured token verifier, and the probes; with stdio, the
// probes alone, on the metrics listener.
func singleFront(s config.Server, in *instance, metrics http.Handler, obs config.Obs, ln net.Listener, stdio bool) (*front.Front, error) {
	mcp := obs.With("component", "mcp")
	fc := s.FrontConfig("mcp", ln, obs)
	fc.Listening = func(addr net.Addr) {
		mcp.Logger.Info("mcp server listening", "addr", addr.String(), "path", s.Path, "auth", !s.InsecureNoAuth)
		if s.InsecureNoAuth && !front.Loopback(addr) {
			mcp.Logger.Warn("AUTHENTICATION IS DISABLED (server.insecure_no_auth) on an address other than loopback: "+
				"anyone who can reach it reads every notebook and binds names. Set a token, or listen on 127.0.0.1 behind an authenticating proxy",
				"listen", s.Listen)
		}
	}
	if stdio {
		fc.Listening = nil // no MCP listener (config.Server.FrontConfig)
	}
	f, err := front.New(fc, front.Probes{Live: live, Ready: in.health.Ready(), Metrics: metrics})
	if err != nil || stdio {
		return f, err
	}
	v, err := mcpVerifier(s, mcp)
	if err != nil {
		return nil, err
	}
	endpoint, err := front.Edge{AllowedOrigins: s.AllowedOrigins, Verifier: v, Guard: auth.Guard{Logger: mcp.Logger, Registerer: mcp.Registerer}}.Wrap(in.srv.Handler())
	if err != nil {
		return nil, err
	}
	f.Handle(s.Path, afterLoad(in.srv, endpoint))
	return f, nil
}
