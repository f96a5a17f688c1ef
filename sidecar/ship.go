package sidecar

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"

	"golang.org/x/sync/errgroup"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/front"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

// Ship tails the local SQLite store and appends its rows into the shared Postgres store
// until ctx is done, so sidecars elsewhere can serve from Postgres. The store's loads are
// streamed (sqlite.Config.StreamLoads): its memory does not grow with the store. It serves
// /healthz, /readyz and /metrics, as serve does, on server.metrics_listen, or on
// server.listen when that is not set.
func Ship(ctx context.Context, cfg config.Config) error {
	log := cmp.Or(cfg.Logger, slog.Default())
	reg, metricsHandler, err := newRegistry()
	if err != nil {
		return err
	}
	obs := config.Obs{Logger: log, Registerer: reg}
	source, err := sqlite.New(cfg.ShipSource(obs))
	if err != nil {
		return fmt.Errorf("ship source: %w", err)
	}
	defer source.Close()
	id := cfg.Ship.SourceID
	if id == "" {
		if id, err = os.Hostname(); err != nil {
			return fmt.Errorf("ship.source_id: %w", err)
		}
	}
	dest := cfg.ShipDestination(obs, os.Getenv)

	s, err := postgres.NewShipper(dest, source, id)
	if err != nil {
		return fmt.Errorf("ship: %w", err)
	}
	health := NewHealth(func() ystore.Status { return shipStatus(s.Status()) }, func() []rooms.Degradation { return nil }, nil, nil, cfg.Store.LagThreshold)
	fc := cfg.Server.FrontConfig("", nil, obs)
	fc.Listen, fc.MetricsListen = "", cmp.Or(cfg.Server.MetricsListen, cfg.Server.Listen) // the probes only
	f, err := front.New(fc, front.Probes{Live: live, Ready: health.Ready(), Metrics: metricsHandler})
	if err != nil {
		return err
	}
	log.Info("shipping the SQLite store into Postgres", "store", cfg.Store.SQLite.Path, "source_id", id, "owned", dest.Owner != "",
		"probes", fc.MetricsListen)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return f.Run(gctx) })
	g.Go(func() error { return s.Run(gctx) })
	return g.Wait()
}

// shipStatus is what /readyz says of a Shipper: its source's status, unreachable also
// while Postgres refuses its writes.
func shipStatus(st postgres.ShipStatus) ystore.Status {
	out := st.Source
	if !st.Reachable && st.LastError != "" {
		out.Reachable = false
		out.LastError = "postgres: " + st.LastError
	}
	return out
}
