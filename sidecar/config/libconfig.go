package config

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/versions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/front"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/hubauth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/ondisk"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/transport"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

// The configuration mapped onto the libraries' own: every typed library config the
// daemon builds from its keys comes from here. What only a running daemon has (a
// logger, a metrics registry) is the one Obs argument; what hub mode adds for a user (a
// shared watcher, confinement) the caller sets on the result.

// Obs is what only a running daemon has: where it logs and where it registers its
// metrics. The mapping functions take it, and the wiring (package sidecar) hands it
// between its functions, as one value; a library gets it as its Config's Logger and
// Registerer fields.
type Obs struct {
	Logger     *slog.Logger          // nil: the library's default
	Registerer prometheus.Registerer // nil: no metrics
}

// With is o logging with args added to every line (slog.Logger.With).
func (o Obs) With(args ...any) Obs {
	o.Logger = cmp.Or(o.Logger, slog.Default()).With(args...)
	return o
}

// TailerConfig is the sqlite.Config of this section.
func (s SQLite) TailerConfig(o Obs) sqlite.Config {
	return sqlite.Config{
		Path:            s.Path,
		PollInterval:    s.PollInterval,
		ChunkRows:       s.ChunkRows,
		DisableFSNotify: !s.FSNotify,
		Logger:          o.Logger,
		Registerer:      o.Registerer,
	}
}

// SQLiteTailer is the sqlite.Config of a served store's tailer: the section's, following
// at most store.max_rooms rooms, as its rooms.Set holds (RoomsConfig). Ship copies every
// room (SQLite.TailerConfig).
func (s Store) SQLiteTailer(o Obs) sqlite.Config {
	c := s.SQLite.TailerConfig(o)
	c.MaxRooms = s.MaxRooms
	return c
}

// PostgresTailer is the postgres.Config of a served store's tailer: the section's,
// following at most store.max_rooms rooms, as its rooms.Set holds (RoomsConfig).
func (s Store) PostgresTailer(o Obs) postgres.Config {
	c := s.Postgres.StoreConfig(o)
	c.MaxRooms = s.MaxRooms
	return c
}

// StoreConfig is the postgres.Config of this section.
func (p Postgres) StoreConfig(o Obs) postgres.Config {
	return postgres.Config{
		DSN:           p.DSN,
		Schema:        p.Schema,
		Table:         p.Table,
		Channel:       p.Channel,
		PollInterval:  p.PollInterval,
		DisableListen: p.DisableListen,
		Owner:         p.Owner,
		ChunkRows:     p.ChunkRows,
		Logger:        o.Logger,
		Registerer:    o.Registerer,
	}
}

// StoreConfig is the postgres.Config of this section.
func (p ShipPostgres) StoreConfig(o Obs) postgres.Config {
	return postgres.Config{DSN: p.DSN, Schema: p.Schema, Table: p.Table, Logger: o.Logger, Registerer: o.Registerer}
}

// ServerConfig is the MCP server's resources.Config: the surface's limits; version is
// reported to clients.
func (c Config) ServerConfig(version string, o Obs) resources.Config {
	l := c.Server.Limits
	return resources.Config{
		Limits: resources.Limits{
			MaxURIBytes: l.MaxURIBytes, MaxSubscriptions: l.MaxSubscriptions, MaxSubscriptionBytes: l.MaxSubscriptionBytes,
			MaxListenURIs: l.MaxListenURIs, MaxNames: l.MaxNames, MaxPathBytes: l.MaxPathBytes,
		},
		StateFile:   c.Server.StateFile, // as the daemon settled it (sidecar: the first writable; hub mode: the user's)
		Notebooks:   c.Notebooks,
		Publisher:   c.Publisher,
		Gate:        c.Gate,
		Extensions:  c.Extensions,
		Effective:   c.Masked(),
		Hooks:       c.Hooks,
		StopTimeout: c.Server.DrainTimeout,
		Version:     version,
		Logger:      o.Logger,
		Registerer:  o.Registerer,
	}
}

// TransportConfig is the MCP server's transport.Config: the server section's endpoint
// path, request limit, drain and the limits of its sessions.
func (s Server) TransportConfig(o Obs) transport.Config {
	return transport.Config{
		Path: s.Path, MaxRequestBytes: s.MaxRequestBytes, DrainTimeout: s.DrainTimeout,
		SessionIdleTimeout: s.Limits.SessionIdleTimeout, MaxSessions: s.Limits.MaxSessions,
		ReplayEvents: s.Limits.ReplayEvents, ReplayBytes: s.Limits.ReplayBytes,
		Logger: o.Logger, Registerer: o.Registerer,
	}
}

// RoomsConfig is the rooms.Config of the store section; the caller adds the rooms'
// resolver, file reader, metrics and reload.
func (c Config) RoomsConfig(o Obs) rooms.Config {
	return rooms.Config{Logger: o.Logger, GapAfter: c.Store.GapAfter, MaxRooms: c.Store.MaxRooms, MaxBytes: c.Store.MaxBytes,
		Versions: versions.Config{MaxVersions: c.Changes.MaxVersions, MaxAge: c.Changes.MaxAge}}
}

// FilesConfig is the ondisk.Config of the ondisk section, under the Jupyter root.
func (c Config) FilesConfig(o Obs) ondisk.Config {
	return ondisk.Config{
		Root:           c.RootDirPath(),
		PollInterval:   c.OnDisk.PollInterval,
		MaxWatchedDirs: c.OnDisk.MaxWatchedDirs,
		MaxFileBytes:   c.OnDisk.MaxFileBytes,
		FSNotify:       c.OnDisk.FSNotify,
		Logger:         o.Logger,
	}
}

// FileIDConfig is the fileid.DBConfig of the fileid section: its database, and the
// Jupyter root made absolute.
func (c Config) FileIDConfig(o Obs) (fileid.DBConfig, error) {
	root, err := filepath.Abs(c.RootDirPath())
	if err != nil {
		return fileid.DBConfig{}, fmt.Errorf("fileid.root_dir: %w", err)
	}
	return fileid.DBConfig{Path: c.FileIDDBPath(), RootDir: root, Logger: o.Logger, Registerer: o.Registerer}, nil
}

// RESTConfig is the fileid.RESTConfig of the fileid.api section.
func (a FileIDAPI) RESTConfig() fileid.RESTConfig {
	return fileid.RESTConfig{BaseURL: a.URL, Token: a.Token}
}

// VerifierOptions are the options of the "jupyterhub" token verifier (resources/auth)
// for this configuration. Call it after WithServiceEnv.
func (h Hub) VerifierOptions() hubauth.HubOptions {
	return hubauth.HubOptions{APIURL: h.APIURL, ServiceName: h.ServiceName, TokenCacheTTL: h.TokenCacheTTL}
}

// FrontConfig is the front of the server section's listeners: the MCP listener (ln
// instead of listening, if set), its refusals counted as name's, and the metrics one;
// one principal may hold every connection the principals hold (single mode's one
// user; hub mode sets its users' share).
func (s Server) FrontConfig(name string, ln net.Listener, o Obs) front.Config {
	return front.Config{
		Listen: s.Listen, Listener: ln, Name: name, MaxConnections: s.MaxConnections,
		IdleTimeout: s.IdleTimeout, ReadTimeout: s.ReadTimeout, DrainTimeout: s.DrainTimeout,
		MetricsListen: s.MetricsListen, Logger: o.Logger, Registerer: o.Registerer,
	}
}
