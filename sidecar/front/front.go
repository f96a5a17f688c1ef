// Package front is the sidecar's HTTP front, one for single mode and hub mode: the
// listener and its connection shares (internal/conns: the anonymous', each
// principal's), the admission of the MCP endpoint (origin policy, CORS, bearer token,
// the connection's principal: Edge), and the probes (/healthz, /readyz) and /metrics,
// on the MCP listener or on a metrics listener of their own.
// Single mode serves one MCP server's endpoint behind it; hub mode its users' router
// and the Hub's login routes.
package front

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/conns"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/rpcerror"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
)

// Defaults of the daemon's front (DefaultConfig).
const (
	DefaultListen         = "127.0.0.1:4040"
	DefaultMaxConnections = 1024
	DefaultIdleTimeout    = 30 * time.Second
	DefaultReadTimeout    = 10 * time.Second
	DefaultDrainTimeout   = 10 * time.Second
)

// Config is what the front is built from: the daemon's server section's listener
// settings. A zero field is no bound, no timeout, no listener: DefaultConfig is the
// daemon's.
type Config struct {
	Listen         string         // the MCP listener's address; "" without Listener: none (stdio)
	Listener       net.Listener   // served instead of listening on Listen; nil: listen
	Name           string         // the MCP listener's label in connections_refused_total: "mcp", "hub"
	MaxConnections int            // connections held for the principals at most, on each listener (the anonymous have their own: conns.Limits)
	PerPrincipal   int            // requests in flight one principal has at most on the MCP listener; 0: MaxConnections (one principal: single mode)
	Proxies        []netip.Prefix // peers pooling their clients' requests on the MCP listener (conns.Limits.Proxies): hub mode's trusted proxies
	IdleTimeout    time.Duration  // keep-alive connections idle this long are closed
	ReadTimeout    time.Duration  // a request's header, then its body, must arrive within it
	DrainTimeout   time.Duration  // how long open requests have to end once the front stops
	MetricsListen  string         // the probes' and /metrics' own listener; "": the MCP listener
	// ProbePrefixes are where /healthz and /readyz are served on the MCP listener
	// whatever MetricsListen ("" the root): hub mode's, reached through the Hub's proxy.
	ProbePrefixes []string
	// Listening is told the MCP listener's address once it listens; nil: nobody.
	Listening func(net.Addr)

	Logger     *slog.Logger          // nil: slog.Default()
	Registerer prometheus.Registerer // where the listeners' refusals are counted; nil: nowhere
}

// DefaultConfig is the daemon's front: the configuration's defaults are these.
func DefaultConfig() Config {
	return Config{Listen: DefaultListen, MaxConnections: DefaultMaxConnections, IdleTimeout: DefaultIdleTimeout,
		ReadTimeout: DefaultReadTimeout, DrainTimeout: DefaultDrainTimeout}
}

// Validate reports what is wrong with c as the daemon configures it (every bound
// set), each a *keyerr.KeyError (keyerr.ErrInvalid) naming its field in snake case
// (sidecar/config renames them to the daemon's keys): an address that is not
// host:port, a bound or timeout not above zero.
func (c Config) Validate() error {
	var errs []error
	for _, a := range []struct{ key, addr string }{{"listen", c.Listen}, {"metrics_listen", c.MetricsListen}} {
		if _, port, err := net.SplitHostPort(a.addr); a.addr != "" && (err != nil || port == "") {
			errs = append(errs, keyerr.Invalid(a.key, "must be host:port, got %q", a.addr))
		}
	}
	for _, d := range []struct {
		key string
		d   time.Duration
	}{{"drain_timeout", c.DrainTimeout}, {"idle_timeout", c.IdleTimeout}, {"read_timeout", c.ReadTimeout}} {
		if d.d <= 0 {
			errs = append(errs, keyerr.Invalid(d.key, "must be > 0, got %s", d.d))
		}
	}
	if c.MaxConnections < 1 {
		errs = append(errs, keyerr.Invalid("max_connections", "%d: want at least 1", c.MaxConnections))
	}
	return errors.Join(errs...)
}

// Probes are the handlers of /healthz, /readyz and /metrics; a nil one is not served
// (the sse feed's front serves none).
type Probes struct {
	Live, Ready, Metrics http.Handler
}

// Front serves the MCP listener and the metrics listener.
type Front struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux // the MCP listener's
	probes  *http.ServeMux // the metrics listener's; nil without one
	refused *prometheus.CounterVec
	// metricsRefused counts the metrics listener's refusals; nil without one.
	metricsRefused *prometheus.CounterVec
}

// New builds the front (no I/O): p on the metrics listener if cfg.MetricsListen is
// set, else on the MCP listener; their refusals counted on cfg.Registerer.
func New(cfg Config, p Probes) (*Front, error) {
	f := &Front{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), mux: http.NewServeMux()}
	r := promreg.On(cfg.Registerer)
	if cfg.Listen != "" || cfg.Listener != nil {
		f.refused = promreg.Register(r, conns.RefusedCounter(cfg.Name))
	}
	onMain := cfg.ProbePrefixes
	if cfg.MetricsListen == "" {
		if !slices.Contains(onMain, "") {
			onMain = append([]string{""}, onMain...)
		}
		handle(f.mux, "GET /metrics", p.Metrics)
	} else {
		f.metricsRefused = promreg.Register(r, conns.RefusedCounter("metrics"))
		f.probes = http.NewServeMux()
		handle(f.probes, "GET /healthz", p.Live)
		handle(f.probes, "GET /readyz", p.Ready)
		handle(f.probes, "GET /metrics", p.Metrics)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register listener metrics: %w", err)
	}
	for _, prefix := range onMain {
		handle(f.mux, "GET "+prefix+"/healthz", p.Live)
		handle(f.mux, "GET "+prefix+"/readyz", p.Ready)
	}
	return f, nil
}

// handle serves h at pattern on mux, unless h is nil.
func handle(mux *http.ServeMux, pattern string, h http.Handler) {
	if h != nil {
		mux.Handle(pattern, h)
	}
}

// Handle serves h at pattern on the MCP listener.
func (f *Front) Handle(pattern string, h http.Handler) { f.mux.Handle(pattern, h) }

// Run serves the listeners until ctx is done, then gives open requests
// cfg.DrainTimeout to end before it closes their connections.
func (f *Front) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	if ln := f.cfg.Listener; ln != nil || f.cfg.Listen != "" {
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", f.cfg.Listen); err != nil {
				return fmt.Errorf("listen %s: %w", f.cfg.Listen, err)
			}
		}
		if f.cfg.Listening != nil {
			f.cfg.Listening(ln.Addr())
		}
		g.Go(func() error {
			l := f.limits()
			l.PerPrincipal, l.Proxies = f.cfg.PerPrincipal, f.cfg.Proxies
			if err := f.serve(gctx, conns.Listen(ln, l, f.refused), f.mux); err != nil {
				return fmt.Errorf("serve http: %w", err)
			}
			return nil
		})
	}
	if f.probes != nil {
		g.Go(func() error {
			addr := f.cfg.MetricsListen
			ln, err := net.Listen("tcp", addr)
			if err == nil {
				err = f.serve(gctx, conns.Listen(ln, f.limits(), f.metricsRefused), f.probes)
			}
			if err != nil {
				return fmt.Errorf("metrics listener %s: %w", addr, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// limits are a listener's connection limits.
func (f *Front) limits() conns.Limits {
	return conns.Limits{MaxConnections: f.cfg.MaxConnections, IdleTimeout: f.cfg.IdleTimeout, ReadTimeout: f.cfg.ReadTimeout}
}

// serve serves mux on ln within its shares until ctx is done, then drains.
func (f *Front) serve(ctx context.Context, ln *conns.Listener, mux http.Handler) error {
	srv := ln.Server(mux)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.DrainTimeout)
	defer cancel()
	if err := srv.Shutdown(drain); err != nil {
		f.log.Warn("drain deadline passed; closing connections", "err", err)
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Edge is the admission of an MCP endpoint, in front of it: the origin policy
// (listed origins and loopback ones), CORS for the listed origins, the bearer token,
// and the connection admitted for the token's principal within its share
// (conns.Admit: 429 beyond it); a panic in them, or in the endpoint, is answered as a JSON-RPC internal
// error (internal/rpcerror) logged on the Guard's logger (nil: slog.Default()).
type Edge struct {
	AllowedOrigins []string
	Verifier       auth.Verifier // nil: no authentication (server.insecure_no_auth, or the hub's users' servers)
	Guard          auth.Guard    // how refusals are answered, logged and counted
}

// Wrap puts the edge before h: recover → origin → CORS → bearer token → share → h.
func (e Edge) Wrap(h http.Handler) (http.Handler, error) {
	h = share(h)
	if e.Verifier != nil {
		var err error
		if h, err = auth.RequireBearerWith(e.Verifier, e.Guard, h); err != nil {
			return nil, err
		}
	}
	h = CORS(e.AllowedOrigins, h)
	h = auth.OriginPolicy{Allowed: e.AllowedOrigins, AllowLoopback: true}.Wrap(h)
	return rpcerror.Recover(e.Guard.Logger, h), nil
}

// share admits a request's connection for its principal (the anonymous "" without a
// verifier: single mode's one user), within the principal's share.
func share(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.PrincipalFrom(r.Context())
		if conns.Admit(w, r, p.User) {
			next.ServeHTTP(w, r)
		}
	})
}

// Loopback reports whether addr is a TCP address on a loopback interface only.
func Loopback(addr net.Addr) bool {
	a, ok := addr.(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}
