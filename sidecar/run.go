// Package sidecar wires the daemon together and owns its lifecycle: the store tailer
// feeds live notebook rooms, their changes are debounced per notebook, and the MCP
// server announces them; health, readiness and metrics are served beside it.
package sidecar

import (
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

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/debounce"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// pathRefresh is how often room paths are re-resolved, so renames are followed.
const pathRefresh = 2 * time.Second

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

// Run serves until ctx is done, then drains within server.drain_timeout. cfg must be
// valid with its secrets resolved (config.Config.Validate, ResolveSecrets).
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, opts ...Option) error {
	var o runOptions
	for _, opt := range opts {
		opt(&o)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	tailer, resolver, closeResolver, err := openStore(cfg, log, reg)
	if err != nil {
		return err
	}
	defer func() { _ = closeResolver() }()

	m := NewMetrics(reg, tailer.Status)
	var srv *resources.Server
	deb := debounce.New(cfg.Notifications.Debounce, cfg.Notifications.MaxDelay,
		func(old, add ynotebook.Changes) ynotebook.Changes { old.Merge(add); return old },
		func(path string, ch ynotebook.Changes) {
			m.changesFlushed.Inc()
			srv.NotebookChanged(path, ch)
		})
	rooms := NewRooms(log, resolver, m, Notify{
		Changed: deb.Add,
		Moved:   func(oldPath, newPath string) { srv.NotebookMoved(oldPath, newPath) },
	})
	health := NewHealth(tailer.Status, rooms.Degraded, cfg.Store.LagThreshold)
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})

	srvOpts := []resources.Option{resources.WithLogger(log), resources.WithRegisterer(reg)}
	if cfg.Server.MetricsListen == "" {
		srvOpts = append(srvOpts,
			resources.WithHandler("GET /healthz", health.Live()),
			resources.WithHandler("GET /readyz", health.Ready()),
			resources.WithHandler("GET /metrics", metricsHandler))
	}
	if o.listener != nil {
		srvOpts = append(srvOpts, resources.WithListener(o.listener))
	}
	if o.stdin != nil || o.stdout != nil {
		srvOpts = append(srvOpts, resources.WithStdio(o.stdin, o.stdout))
	}
	srv, err = resources.New(serverConfig(cfg, o.version), rooms, srvOpts...)
	if err != nil {
		return fmt.Errorf("mcp server: %w", err)
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := tailer.Run(gctx, rooms.Sink); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("store tailer: %w", err)
		}
		return nil
	})
	g.Go(func() error { return deb.Run(gctx) })
	g.Go(func() error { return srv.Run(gctx) })
	g.Go(func() error { refreshPaths(gctx, rooms); return nil })
	if cfg.Server.MetricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /healthz", health.Live())
		mux.Handle("GET /readyz", health.Ready())
		mux.Handle("GET /metrics", metricsHandler)
		g.Go(func() error { return serveMetrics(gctx, cfg.Server.MetricsListen, mux, cfg.Server.DrainTimeout) })
	}
	log.Info("sidecar started", "backend", cfg.Store.Backend, "transport", cfg.Server.Transport, "listen", cfg.Server.Listen)
	err = g.Wait()
	log.Info("sidecar stopped", "err", err)
	return err
}

// serverConfig maps the sidecar's configuration onto the MCP server's.
func serverConfig(cfg config.Config, version string) resources.Config {
	return resources.Config{
		Transport:        cfg.Server.Transport,
		Listen:           cfg.Server.Listen,
		Path:             cfg.Server.Path,
		Token:            cfg.Server.Token,
		InsecureNoAuth:   cfg.Server.InsecureNoAuth,
		AllowedOrigins:   cfg.Server.AllowedOrigins,
		Verifier:         cfg.Server.Verifier,
		MaxRequestBytes:  cfg.Server.MaxRequestBytes,
		StateFile:        cfg.StateFilePath(),
		Notebooks:        cfg.Notebooks,
		Publisher:        cfg.Publisher,
		Gate:             cfg.Gate,
		Extensions:       cfg.Extensions,
		Hooks:            cfg.Hooks,
		DrainTimeout:     cfg.Server.DrainTimeout,
		MaxURIBytes:      cfg.Server.Limits.MaxURIBytes,
		MaxSubscriptions: cfg.Server.Limits.MaxSubscriptions,
		MaxListenURIs:    cfg.Server.Limits.MaxListenURIs,
		ReplayEvents:     cfg.Server.Limits.ReplayBufferEvents,
		ReplayBytes:      cfg.Server.Limits.ReplayBufferBytes,
		Version:          version,
	}
}

// refreshPaths re-resolves room paths until ctx is done.
func refreshPaths(ctx context.Context, rooms *Rooms) {
	t := time.NewTicker(pathRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rooms.RefreshPaths(ctx)
		}
	}
}

// serveMetrics serves mux on addr until ctx is done.
func serveMetrics(ctx context.Context, addr string, mux http.Handler, drain time.Duration) error {
	hs := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics listener %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("metrics listener %s: %w", addr, err)
	}
	return nil
}
