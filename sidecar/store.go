package sidecar

import (
	"errors"
	"fmt"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/confine"
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

// confinement is where hub mode confines what it opens for a user (ystore/confine): the
// user's directories their store, file id database and notebook files are resolved
// beneath, each opened from its template's base and pinned at its first use, every file
// owned by the owner of their root directory. The zero value, outside hub mode,
// confines nothing: paths are opened as given, as the Jupyter server running as the
// same user opens them.
type confinement struct {
	store, fileID, notebooks *confine.Dir
}

// userConfinement is hub mode's confinement of user's files: each store template's file
// beneath the user's directory in it (config.UserDir), the notebooks beneath their root
// directory, all owned by the owner of that root directory; each directory is opened
// from its template's base (config.TemplateBase). Templates that give the same
// directory share it. onSwap hears a directory found replaced after it was opened.
func userConfinement(h config.Hub, user string, onSwap func(error)) (confinement, error) {
	dirs := map[string]*confine.Dir{}
	dir := func(tmpl, root string, owner *confine.Dir) (*confine.Dir, error) {
		base, err := config.TemplateBase(tmpl)
		if err != nil {
			return nil, err
		}
		if d := dirs[base+"\x00"+root]; d != nil {
			return d, nil
		}
		d := confine.New(confine.Config{Base: base, Root: root, Owner: owner, OnSwap: onSwap})
		dirs[base+"\x00"+root] = d
		return d, nil
	}
	var c confinement
	root, err := h.RootDirPath(user)
	if err == nil {
		c.notebooks, err = dir(h.Stores.RootDir, root, nil)
	}
	for _, f := range []struct {
		tmpl string
		d    **confine.Dir
	}{{h.Stores.SQLitePath, &c.store}, {h.Stores.FileIDDB, &c.fileID}} {
		if err != nil {
			break
		}
		var ud string
		if ud, err = config.UserDir(f.tmpl, user); err == nil {
			*f.d, err = dir(f.tmpl, ud, c.notebooks)
		}
	}
	if err != nil {
		c.close()
		return confinement{}, err
	}
	return c, nil
}

// close closes the user's directories.
func (c confinement) close() {
	for _, d := range []*confine.Dir{c.store, c.fileID, c.notebooks} {
		if d != nil {
			_ = d.Close() // a directory shared by two is closed twice: the second does nothing
		}
	}
}

// refusal is a user's file that confinement refuses, said to the user without its path.
type refusal struct {
	what string // "Y-store", "file id database"
	err  error  // wraps confine.ErrRefused
}

func (r *refusal) Error() string { return "the user's " + r.what + " is refused: " + r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// ForUser is what the user is told: which file, and why, without a path.
func (r *refusal) ForUser() string {
	why := "it leads outside your home directory"
	switch {
	case errors.Is(r.err, confine.ErrNotOwned):
		why = "it is not owned by you"
	case errors.Is(r.err, confine.ErrSwapped):
		why = "your directory was replaced after the server opened it"
	case errors.Is(r.err, confine.ErrUnsafeBase):
		why = "the directory above your home can be written by users (the operator's to fix)"
	}
	return "your " + r.what + " cannot be served: " + why
}

// checkFiles returns a *refusal when cfg's store file or file id database is refused by
// conf: a path leading outside the user's directory, or a file the user does not own.
// A missing file is no refusal (the user's server has not written it yet). The tailer
// and the resolver enforce the same at every open; this tells the user and the
// operator why at once.
func checkFiles(cfg config.Config, conf confinement) error {
	b, err := backendOf(cfg.Store.Backend)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		what, path string
		dir        *confine.Dir
	}{
		{"Y-store", b.storeFile(cfg), conf.store},
		{"file id database", cfg.FileIDDBPath(), conf.fileID},
	} {
		if f.dir == nil || f.path == "" {
			continue
		}
		l, err := f.dir.Locate(f.path) // a missing root or file: nothing of theirs to serve yet
		if errors.Is(err, confine.ErrRefused) {
			return &refusal{what: f.what, err: err}
		}
		if err == nil {
			_ = l.Close()
		}
	}
	return nil
}

// openStore builds the configured store backend, on sh, and the file id resolvers,
// confined by conf; close releases the resolvers. The caller closes the tailer.
func openStore(cfg config.Config, obs config.Obs, sh shared, conf confinement) (ystore.Tailer, fileid.Chain, func() error, error) {
	tailer, err := openTailer(cfg, obs, sh, conf)
	if err != nil {
		return nil, nil, nil, err
	}
	resolver, closeResolver, err := openResolver(cfg, obs, conf)
	if err != nil {
		tailer.Close()
		return nil, nil, nil, err
	}
	return tailer, resolver, closeResolver, nil
}

// openTailer builds the configured store backend from its typed configuration, on sh,
// confined by conf.
func openTailer(cfg config.Config, obs config.Obs, sh shared, conf confinement) (ystore.Tailer, error) {
	b, err := backendOf(cfg.Store.Backend)
	var t ystore.Tailer
	if err == nil {
		t, err = b.tailer(cfg, obs, sh, conf)
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return t, nil
}

// storeBackend is what the sidecar does differently for each store backend; backendOf
// is the one place that tells them apart.
type storeBackend interface {
	// tailer builds the tailer of cfg's store, on sh, a store file confined by conf.
	tailer(cfg config.Config, obs config.Obs, sh shared, conf confinement) (ystore.Tailer, error)
	// share opens what the tailers of hub mode's users share; release frees it.
	share(cfg config.Config, obs config.Obs) (sh shared, release func(), err error)
	// forUser points cfg's store at user's part of the hub's stores.
	forUser(cfg *config.Config, user string) error
	// storeFile is the file cfg's store is read from, "" for none.
	storeFile(cfg config.Config) string
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

func (sqliteBackend) tailer(cfg config.Config, obs config.Obs, sh shared, conf confinement) (ystore.Tailer, error) {
	c := cfg.Store.SQLiteTailer(obs)
	c.Watcher, c.Confine = sh.watcher, conf.store
	return newTailer(sqlite.New(c))
}

// share is one inotify instance for every user's store (none with store.sqlite.fsnotify off).
func (sqliteBackend) share(cfg config.Config, obs config.Obs) (shared, func(), error) {
	if !cfg.Store.SQLite.FSNotify {
		return shared{}, func() {}, nil
	}
	w := sqlite.NewWatcher(cfg.Store.SQLite.WatcherConfig(obs))
	return shared{watcher: w}, func() { _ = w.Close() }, nil
}

func (sqliteBackend) forUser(cfg *config.Config, user string) (err error) {
	cfg.Store.SQLite.Path, err = cfg.Hub.StorePath(user)
	return err
}

func (sqliteBackend) storeFile(cfg config.Config) string { return cfg.Store.SQLite.Path }

// postgresBackend: one shared table; hub mode's users share one follower of it.
type postgresBackend struct{}

func (postgresBackend) tailer(cfg config.Config, obs config.Obs, sh shared, _ confinement) (ystore.Tailer, error) {
	if sh.follower != nil {
		return sh.follower.Tailer(cfg.Store.PostgresTailer(obs))
	}
	return newTailer(postgres.New(cfg.Store.PostgresTailer(obs)))
}

// share is one follower of every owner's rooms; each user's tailer takes theirs.
func (postgresBackend) share(cfg config.Config, obs config.Obs) (shared, func(), error) {
	f, err := postgres.NewFollower(cfg.Store.Postgres.FollowerConfig(obs))
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

func (postgresBackend) storeFile(config.Config) string { return "" }

// newTailer returns a backend's tailer as a ystore.Tailer, nil on error.
func newTailer[T ystore.Tailer](t T, err error) (ystore.Tailer, error) {
	if err != nil {
		return nil, err
	}
	return t, nil
}

// openResolver builds the file id resolvers: the fileid database, then the REST
// endpoint when configured. Paths the document records are the fallback (sidecar/rooms).
// The database is confined by conf. The returned close releases the database.
func openResolver(cfg config.Config, obs config.Obs, conf confinement) (fileid.Chain, func() error, error) {
	dc, err := cfg.FileIDConfig(obs)
	if err != nil {
		return nil, nil, err
	}
	dc.Confine = conf.fileID
	db, err := fileid.NewDB(dc)
	if err != nil {
		return nil, nil, fmt.Errorf("fileid: %w", err)
	}
	chain := fileid.Chain{db}
	if cfg.FileID.API.URL != "" {
		rest, err := fileid.NewREST(cfg.FileID.API.RESTConfig())
		if err != nil {
			_ = db.Close()
			return nil, nil, fmt.Errorf("fileid.api: %w", err)
		}
		chain = append(chain, rest)
	}
	return chain, db.Close, nil
}
