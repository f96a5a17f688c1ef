package config

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/versions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
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
	Logger     *slog.Logger          // nil: slog.Default(), as for every library's Logger
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
// at most store.max_rooms rooms, as its rooms.Set holds (RoomsConfig), whose rooms
// decode a load as its rows are read, never holding them. Ship copies every room
// (ShipSource).
func (s Store) SQLiteTailer(o Obs) sqlite.Config {
	c := s.SQLite.TailerConfig(o)
	c.MaxRooms, c.StreamLoads = s.MaxRooms, true
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
			MaxListenURIs: l.MaxListenURIs, MaxNames: l.MaxNames, MaxPathBytes: l.MaxPathBytes, MaxReadBytes: l.MaxReadBytes,
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
	return rooms.Config{Logger: o.Logger, GapAfter: c.Store.GapAfter, MaxRooms: c.Store.MaxRooms, MaxBytes: c.Store.MaxBytes, MaxMemory: c.Store.MaxMemory,
		Versions: versions.Config{MaxVersions: c.Changes.MaxVersions, MaxAge: c.Changes.MaxAge, MaxMemory: c.Changes.MaxMemory}}
}

// FilesConfig is the ondisk.Config of the ondisk section, under the Jupyter root.
func (c Config) FilesConfig(o Obs) ondisk.Config {
	return ondisk.Config{
		Root:            c.RootDirPath(),
		PollInterval:    c.OnDisk.PollInterval,
		MaxWatchedDirs:  c.OnDisk.MaxWatchedDirs,
		MaxFileBytes:    c.OnDisk.MaxFileBytes,
		DisableFSNotify: !c.OnDisk.FSNotify,
		Logger:          o.Logger,
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

// VerifierSettings are the settings of hub mode's token verifier, the registered
// hubauth.VerifierName (sidecar/auth's registry): the service's token and the options
// hubauth.HubOptions decodes. Call it after WithServiceEnv.
func (h Hub) VerifierSettings(o Obs) auth.Settings {
	return auth.Settings{
		Token:   h.APIToken,
		Options: map[string]any{"api_url": h.APIURL, "service_name": h.ServiceName, "token_cache_ttl": h.TokenCacheTTL},
		Logger:  o.Logger, Registerer: o.Registerer,
	}
}

// VerifierOptions are the options of hub mode's token verifier, typed: what
// VerifierSettings hands the registry, validated by hubauth (libraryChecks).
func (h Hub) VerifierOptions() hubauth.HubOptions {
	return hubauth.HubOptions{APIURL: h.APIURL, ServiceName: h.ServiceName, TokenCacheTTL: h.TokenCacheTTL}
}

// VerifierSettings are the settings of single mode's token verifier (server.verifier,
// server.token).
func (s Server) VerifierSettings(o Obs) auth.Settings {
	return auth.Settings{Token: s.Token, Options: s.Verifier.Options, Logger: o.Logger, Registerer: o.Registerer}
}

// LoginConfig is the hubauth.Config of hub.oauth, the login with the Hub; the caller
// sets how a Hub token is resolved to its user (Verify).
func (c Config) LoginConfig(o Obs) (hubauth.Config, error) {
	h, oa := c.Hub, c.Hub.OAuth
	api, err := url.Parse(h.APIURL)
	if err != nil {
		return hubauth.Config{}, fmt.Errorf("hub.api_url: %w", err)
	}
	trusted, err := hubauth.ParseTrustedProxies(oa.TrustedProxies)
	if err != nil {
		return hubauth.Config{}, fmt.Errorf("hub.oauth.trusted_proxies: %w", err)
	}
	origin := strings.TrimRight(oa.PublicURL, "/")
	return hubauth.Config{
		Issuer:          origin + strings.TrimRight(h.ServicePrefix, "/"),
		Resource:        origin + h.PrefixedPath(c.Server.Path),
		HubAuthorizeURL: origin + strings.TrimRight(api.Path, "/") + "/oauth2/authorize",
		HubTokenURL:     strings.TrimRight(h.APIURL, "/") + "/oauth2/token",
		HubClientID:     h.OAuthClientID(),
		HubClientSecret: h.APIToken,
		HubRedirectURI:  h.ServicePrefix + "oauth_callback",
		ProxyHops:       oa.ProxyHops,
		AccessTokenTTL:  oa.AccessTokenTTL,
		RefreshTokenTTL: oa.RefreshTokenTTL,
		TrustedProxies:  trusted,
		RegistrationTTL: oa.RegistrationTTL,
		Registration:    hubauth.Registration(oa.Registration),
		// The token is the service's secret: resolved from registration_token_file or
		// $JUPYTER_MCP_SIDECAR_HUB_OAUTH_REGISTRATION_TOKEN, never logged.
		RegistrationToken:      oa.RegistrationToken,
		AllowedRedirectSchemes: oa.AllowedRedirectSchemes,
		Clients:                oa.OAuthClients(),
		AllowOpener:            oa.AllowOpener,
		Logger:                 o.Logger,
		Registerer:             o.Registerer,
	}, nil
}

// WatcherConfig is the sqlite.WatcherConfig of the file watcher hub mode's users'
// stores share.
func (s SQLite) WatcherConfig(o Obs) sqlite.WatcherConfig {
	return sqlite.WatcherConfig{Logger: o.Logger}
}

// FollowerConfig is the postgres.FollowerConfig of the one follower of every owner's
// rooms hub mode's users share: the section's store, every owner.
func (p Postgres) FollowerConfig(o Obs) postgres.FollowerConfig {
	all := p.StoreConfig(o) // the follower's reads count there; the users' tailers' status
	all.Owner = ""
	return postgres.FollowerConfig{Store: all}
}

// ShipSource is the sqlite.Config of ship mode's source: every room of the store
// section's SQLite file, a load streamed as it is read.
func (c Config) ShipSource(o Obs) sqlite.Config {
	s := c.Store.SQLite.TailerConfig(o)
	s.StreamLoads = true
	return s
}

// ShipDestination is the postgres.Config ship mode writes into: the ship section's
// store, its rooms owned by ship.owner, else $JUPYTERHUB_USER (getenv), which JupyterHub
// sets in every single-user server.
func (c Config) ShipDestination(o Obs, getenv func(string) string) postgres.Config {
	d := c.Ship.Postgres.StoreConfig(o)
	d.Owner = cmp.Or(c.Ship.Owner, getenv(EnvHubUser))
	return d
}

// EnvHubUser names the user a JupyterHub single-user server runs for.
const EnvHubUser = "JUPYTERHUB_USER"

// fileIDCheck is the file id API's validation, when one is configured.
func fileIDCheck(api FileIDAPI) error {
	if api.URL == "" {
		return nil
	}
	return api.RESTConfig().Validate()
}

// libraryCheck is one library's validation of what the configuration maps onto it,
// and the keys its fields have in the configuration.
type libraryCheck struct {
	err  error
	keys map[string]string // the library's field key → the configuration's; absent: not set from a key (dropped)
}

// libraryChecks validates what c maps onto each library, in the order its refusals
// are reported; a key set on two libraries (server.drain_timeout) is named by the
// first that refuses it. A list's field (allowed[1]) keeps its index under its key.
func (c Config) libraryChecks() []libraryCheck {
	checks := []libraryCheck{
		{transport.ValidateKind(c.Server.Transport), map[string]string{"kind": "server.transport"}},
		{c.Server.FrontConfig("mcp", nil, Obs{}).Validate(), map[string]string{
			"listen": "server.listen", "metrics_listen": "server.metrics_listen", "max_connections": "server.max_connections",
			"drain_timeout": "server.drain_timeout", "idle_timeout": "server.idle_timeout", "read_timeout": "server.read_timeout",
		}},
		{c.Server.TransportConfig(Obs{}).Validate(), map[string]string{
			"path": "server.path", "max_request_bytes": "server.max_request_bytes", "drain_timeout": "server.drain_timeout",
			"session_idle_timeout": "server.limits.session_idle_timeout", "max_sessions": "server.limits.max_sessions",
			"replay_events": "server.limits.replay_buffer_events", "replay_bytes": "server.limits.replay_buffer_bytes",
		}},
		{c.ServerConfig("", Obs{}).Validate(), map[string]string{
			"max_uri_bytes": "server.limits.max_uri_bytes", "max_subscriptions": "server.limits.max_subscriptions",
			"max_subscription_bytes": "server.limits.max_subscription_bytes", "max_listen_uris": "server.limits.max_listen_uris",
			"max_names": "server.limits.max_names", "max_path_bytes": "server.limits.max_path_bytes", "stop_timeout": "server.drain_timeout",
			"max_read_bytes": "server.limits.max_read_bytes",
		}},
		{auth.OriginPolicy{Allowed: c.Server.AllowedOrigins}.Validate(), map[string]string{"allowed": "server.allowed_origins"}},
		{auth.ValidateName(c.Server.Verifier.Name), map[string]string{"name": "server.verifier.name"}},
		{c.RoomsConfig(Obs{}).Versions.Validate(), map[string]string{"max_versions": "changes.max_versions", "max_age": "changes.max_age", "max_memory": "changes.max_memory"}},
		{c.Store.SQLiteTailer(Obs{}).Validate(), map[string]string{
			"poll_interval": "store.sqlite.poll_interval", "chunk_rows": "store.sqlite.chunk_rows",
		}},
		{c.Store.PostgresTailer(Obs{}).Validate(), map[string]string{
			"schema": "store.postgres.schema", "table": "store.postgres.table", "channel": "store.postgres.channel",
			"poll_interval": "store.postgres.poll_interval", "chunk_rows": "store.postgres.chunk_rows",
		}},
		{fileIDCheck(c.FileID.API), map[string]string{"base_url": "fileid.api.url"}},
		{c.Ship.Postgres.StoreConfig(Obs{}).Validate(), map[string]string{"schema": "ship.postgres.schema", "table": "ship.postgres.table"}},
		{c.RoomsConfig(Obs{}).Validate(), map[string]string{
			"max_rooms": "store.max_rooms", "max_bytes": "store.max_bytes", "max_memory": "store.max_memory", "gap_after": "store.gap_after",
		}},
	}
	if c.OnDisk.Enabled {
		checks = append(checks, libraryCheck{c.FilesConfig(Obs{}).Validate(), map[string]string{
			"poll_interval": "ondisk.poll_interval", "max_watched_dirs": "ondisk.max_watched_dirs", "max_file_bytes": "ondisk.max_file_bytes",
		}})
	}
	if h := c.Hub; h.Enabled {
		keys := map[string]string{"token_cache_ttl": "hub.token_cache_ttl"}
		if h.APIURL != "" { // unset: Validate's own refusal names the environment that sets it
			keys["api_url"] = "hub.api_url"
		}
		if h.ServiceName != "" { // unset: WithServiceEnv fills it
			keys["service_name"] = "hub.service_name"
		}
		checks = append(checks, libraryCheck{h.VerifierOptions().Validate(), keys})
	}
	return checks
}

// FrontConfig is the front of the server section's listeners: the MCP listener (ln
// instead of listening, if set; none with the stdio transport), its refusals counted
// as name's, and the metrics one;
// one principal may hold every connection the principals hold (single mode's one
// user; hub mode sets its users' share).
func (s Server) FrontConfig(name string, ln net.Listener, o Obs) front.Config {
	listen := s.Listen
	if s.Transport == transport.KindStdio {
		listen = ""
	}
	return front.Config{
		Listen: listen, Listener: ln, Name: name, MaxConnections: s.MaxConnections,
		IdleTimeout: s.IdleTimeout, ReadTimeout: s.ReadTimeout, DrainTimeout: s.DrainTimeout,
		MetricsListen: s.MetricsListen, Logger: o.Logger, Registerer: o.Registerer,
	}
}
