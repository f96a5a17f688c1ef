package sidecar

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

// envHubUser names the user a JupyterHub single-user server runs for.
const envHubUser = "JUPYTERHUB_USER"

// Ship tails the local SQLite store and appends its rows into the shared Postgres store
// until ctx is done, so sidecars elsewhere can serve from Postgres.
func Ship(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	source, err := sqlite.New(cfg.Store.SQLite.TailerConfig(log, nil))
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
	dest := cfg.Ship.Postgres.StoreConfig(log)
	dest.Owner = cmp.Or(cfg.Ship.Owner, os.Getenv(envHubUser)) // JupyterHub sets JUPYTERHUB_USER in every single-user server

	s, err := postgres.NewShipper(dest, source, id)
	if err != nil {
		return fmt.Errorf("ship: %w", err)
	}
	log.Info("shipping the SQLite store into Postgres", "store", cfg.Store.SQLite.Path, "source_id", id, "owned", dest.Owner != "")
	return s.Run(ctx)
}
