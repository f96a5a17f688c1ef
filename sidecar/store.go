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
func openStore(cfg config.Config, log *slog.Logger, reg prometheus.Registerer, sh shared) (ystore.Tailer, fileid.Chain, func() error, error) {
	tailer, err := openTailer(cfg, log, reg, sh)
	if err != nil {
		return nil, nil, nil, err
	}
	resolver, closeResolver, err := openResolver(cfg, log, reg)
	if err != nil {
		tailer.Close()
		return nil, nil, nil, err
	}
	return tailer, resolver, closeResolver, nil
}

// openTailer builds the configured store backend from its typed configuration, on sh.
func openTailer(cfg config.Config, log *slog.Logger, reg prometheus.Registerer, sh shared) (ystore.Tailer, error) {
	b, err := backendOf(cfg.Store.Backend)
	var t ystore.Tailer
	if err == nil {
		t, err = b.tailer(cfg, log, reg, sh)
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return t, nil
}

// storeBackend is what the sidecar does differently for each store backend; backendOf
// is the one place that tells them apart.
type storeBackend interface {
	// tailer builds the tailer of cfg's store, on sh.
	tailer(cfg config.Config, log *slog.Logger, reg prometheus.Registerer, sh shared) (ystore.Tailer, error)
	// share opens what the tailers of hub mode's users share; release frees it.
	share(cfg config.Config, log *slog.Logger) (sh shared, release func(), err error)
	// forUser points cfg's store at user's part of the hub's stores.
	forUser(cfg *config.Config, user string) error
}

// backendOf is the sidecar's side of backend b.
func backendOf(b config.Backend) (storeBackend, error) {
	switch b {
	case config.BackendSQLite:
		return sqliteBackend{}, nil
	case config.BackendPostgres:
		return postgresBackend{}, nil
	}
	return nil, fmt.Errorf("backend %q (have %v): %w", b, config.Backends, config.ErrInvalid)
}

// sqliteBackend: a SQLite file per store; hub mode's users share one file watcher.
type sqliteBackend struct{}

func (sqliteBackend) tailer(cfg config.Config, log *slog.Logger, reg prometheus.Registerer, sh shared) (ystore.Tailer, error) {
	c := cfg.Store.SQLite.TailerConfig(log, reg)
	c.Watcher = sh.watcher
	return newTailer(sqlite.New(c))
}

// share is one inotify instance for every user's store (none with store.sqlite.fsnotify off).
func (sqliteBackend) share(cfg config.Config, log *slog.Logger) (shared, func(), error) {
	if !cfg.Store.SQLite.FSNotify {
		return shared{}, func() {}, nil
	}
	w := sqlite.NewWatcher(log)
	return shared{watcher: w}, func() { _ = w.Close() }, nil
}

func (sqliteBackend) forUser(cfg *config.Config, user string) (err error) {
	cfg.Store.SQLite.Path, err = cfg.Hub.StorePath(user)
	return err
}

// postgresBackend: one shared table; hub mode's users share one follower of it.
type postgresBackend struct{}

func (postgresBackend) tailer(cfg config.Config, log *slog.Logger, reg prometheus.Registerer, sh shared) (ystore.Tailer, error) {
	if sh.follower != nil {
		return sh.follower.Tailer(cfg.Store.Postgres.StoreConfig(log, reg))
	}
	return newTailer(postgres.New(cfg.Store.Postgres.StoreConfig(log, reg)))
}

// share is one follower of every owner's rooms; each user's tailer takes theirs.
func (postgresBackend) share(cfg config.Config, log *slog.Logger) (shared, func(), error) {
	all := cfg.Store.Postgres.StoreConfig(log, nil)
	all.Owner = ""
	f, err := postgres.NewFollower(postgres.FollowerConfig{Store: all})
	if err != nil {
		return shared{}, nil, fmt.Errorf("hub postgres follower: %w", err)
	}
	return shared{follower: f}, func() {}, nil
}

// forUser: the shared store's rooms that ship recorded as user's.
func (postgresBackend) forUser(cfg *config.Config, user string) error {
	cfg.Store.Postgres.Owner = user
	return nil
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
func openResolver(cfg config.Config, log *slog.Logger, reg prometheus.Registerer) (fileid.Chain, func() error, error) {
	root, err := filepath.Abs(cfg.RootDirPath())
	if err != nil {
		return nil, nil, fmt.Errorf("fileid.root_dir: %w", err)
	}
	db, err := fileid.NewDB(fileid.DBConfig{Path: cfg.FileIDDBPath(), RootDir: root, Logger: log, Registerer: reg})
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
