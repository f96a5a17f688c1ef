package sidecar

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

// shared is what the tailers of hub mode's users share: the file watcher of their
// SQLite stores, or the follower of the shared Postgres store. Zero outside hub mode:
// a tailer then watches or follows on its own.
type shared struct {
	watcher  *sqlite.Watcher
	follower *postgres.Follower
	// hub: the instances are hub mode's users'. Their notebook files are polled (ondisk):
	// an inotify instance each would exhaust fs.inotify.max_user_instances (128).
	hub bool
}

// openStore builds the configured store backend, on sh, and the file id resolvers;
// close releases the resolvers. The caller closes the tailer.
func openStore(cfg config.Config, log *slog.Logger, reg prometheus.Registerer, sh shared) (ystore.Tailer, fileid.Resolver, func() error, error) {
	tailer, err := openTailer(cfg, log, reg, sh)
	if err != nil {
		return nil, nil, nil, err
	}
	resolver, closeResolver, err := openResolver(cfg)
	if err != nil {
		tailer.Close()
		return nil, nil, nil, err
	}
	return tailer, resolver, closeResolver, nil
}

// openTailer builds the configured store backend from its typed configuration, on sh.
func openTailer(cfg config.Config, log *slog.Logger, reg prometheus.Registerer, sh shared) (ystore.Tailer, error) {
	var (
		t   ystore.Tailer
		err error
	)
	switch cfg.Store.Backend {
	case config.BackendSQLite:
		c := cfg.Store.SQLite.TailerConfig(log, reg)
		c.Watcher = sh.watcher
		t, err = newTailer(sqlite.New(c))
	case config.BackendPostgres:
		if sh.follower != nil {
			t, err = sh.follower.Tailer(cfg.Store.Postgres.StoreConfig(log, reg))
		} else {
			t, err = newTailer(postgres.New(cfg.Store.Postgres.StoreConfig(log, reg)))
		}
	default:
		err = fmt.Errorf("backend %q (have %v): %w", cfg.Store.Backend, config.Backends, config.ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return t, nil
}

// newTailer returns a backend's tailer as a ystore.Tailer, nil on error.
func newTailer[T ystore.Tailer](t T, err error) (ystore.Tailer, error) {
	if err != nil {
		return nil, err
	}
	return t, nil
}

// openResolver builds the file id resolvers: the fileid database, then the REST
// endpoint when configured. Paths the document records are the fallback (sidecar/rooms).
// The returned close releases the database.
func openResolver(cfg config.Config) (fileid.Resolver, func() error, error) {
	root, err := filepath.Abs(cfg.RootDirPath())
	if err != nil {
		return nil, nil, fmt.Errorf("fileid.root_dir: %w", err)
	}
	db, err := fileid.NewDB(fileid.DBConfig{Path: cfg.FileIDDBPath(), RootDir: root})
	if err != nil {
		return nil, nil, fmt.Errorf("fileid: %w", err)
	}
	chain := fileid.Chain{db}
	if cfg.FileID.API.URL != "" {
		rest, err := fileid.NewREST(fileid.RESTConfig{BaseURL: cfg.FileID.API.URL, Token: cfg.FileID.API.Token})
		if err != nil {
			_ = db.Close()
			return nil, nil, fmt.Errorf("fileid.api: %w", err)
		}
		chain = append(chain, rest)
	}
	return chain, db.Close, nil
}
