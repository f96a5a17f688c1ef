// Package config is the typed configuration of jupyter-mcp-sidecar: its defaults,
// validation with errors that name the offending key, secrets read from files, and a
// masked copy for printing. It does no parsing of files itself; the command decodes YAML,
// environment and flags into a Config.
package config

import (
	"cmp"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/versions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/debounce"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/front"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/ondisk"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/transport"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

// Config is the whole configuration; the option and yaml tags are the YAML keys
// (resources/option decodes it, as it decodes the plugins' options).
type Config struct {
	Log           Log                       `option:"log" yaml:"log"`
	Store         Store                     `option:"store" yaml:"store"`
	FileID        FileID                    `option:"fileid" yaml:"fileid"`
	Server        Server                    `option:"server" yaml:"server"`
	Notebooks     map[string]string         `option:"notebooks" yaml:"notebooks"`
	Notifications Notifications             `option:"notifications" yaml:"notifications"`
	Publisher     resources.Seam            `option:"publisher" yaml:"publisher"`
	Gate          resources.Seam            `option:"gate" yaml:"gate"`
	Extensions    map[string]map[string]any `option:"extensions" yaml:"extensions"`
	Hooks         map[string]map[string]any `option:"hooks" yaml:"hooks"`
	Ship          Ship                      `option:"ship" yaml:"ship"`
	Hub           Hub                       `option:"hub" yaml:"hub"`
	OnDisk        OnDisk                    `option:"ondisk" yaml:"ondisk"`
	Changes       Changes                   `option:"changes" yaml:"changes"`

	// Logger is where the daemon logs, built by the command from the log section (no
	// key); nil: slog.Default().
	Logger *slog.Logger `option:"-" yaml:"-"`
}

// OnDisk configures the watch of the notebooks' .ipynb files (sidecar/ondisk): a file
// rewritten while no room is open is served from the file until the store is live again.
type OnDisk struct {
	Enabled        bool          `option:"enabled" yaml:"enabled"`
	FSNotify       bool          `option:"fsnotify" yaml:"fsnotify"`           // false: poll every file
	PollInterval   time.Duration `option:"poll_interval" yaml:"poll_interval"` // polled files, path list
	MaxWatchedDirs int           `option:"max_watched_dirs" yaml:"max_watched_dirs"`
	MaxFileBytes   int64         `option:"max_file_bytes" yaml:"max_file_bytes"`
}

// Changes bounds the versions of its notebook each room keeps to answer
// notebook://{name}/changes?since= (resources/versions): whichever bound is smaller.
type Changes struct {
	MaxVersions int           `option:"max_versions" yaml:"max_versions"`
	MaxAge      time.Duration `option:"max_age" yaml:"max_age"`
	MaxMemory   int64         `option:"max_memory" yaml:"max_memory"` // all rooms', besides the versions served
}

// Log configures log/slog output.
type Log struct {
	Level  string `option:"level" yaml:"level"`   // debug, info, warn, error
	Format string `option:"format" yaml:"format"` // text, json
}

// Store selects and configures the Y-store backend the sidecar tails.
type Store struct {
	Backend      Backend       `option:"backend" yaml:"backend"`             // sqlite, postgres
	LagThreshold time.Duration `option:"lag_threshold" yaml:"lag_threshold"` // /readyz fails above it
	GapAfter     time.Duration `option:"gap_after" yaml:"gap_after"`         // updates waiting this long for a missing one: a gap (rooms.Config.GapAfter)
	// MaxRooms, MaxBytes and MaxMemory bound the rooms the store's rooms hold, the bytes
	// of rows they decode and the memory their documents take (rooms.Config); 0: no
	// bound, single mode's default (the store is the operator's own). Hub mode bounds
	// each user's by hub.max_rooms_per_user, hub.max_store_bytes_per_user and
	// hub.max_memory_per_user instead.
	MaxRooms  int      `option:"max_rooms" yaml:"max_rooms"`
	MaxBytes  int64    `option:"max_bytes" yaml:"max_bytes"`
	MaxMemory int64    `option:"max_memory" yaml:"max_memory"`
	SQLite    SQLite   `option:"sqlite" yaml:"sqlite"`
	Postgres  Postgres `option:"postgres" yaml:"postgres"`
}

// SQLite configures the pycrdt-store SQLite file tailer (see sqlite.Config).
type SQLite struct {
	Path         string        `option:"path" yaml:"path"`
	PollInterval time.Duration `option:"poll_interval" yaml:"poll_interval"`
	FSNotify     bool          `option:"fsnotify" yaml:"fsnotify"`
	ChunkRows    int           `option:"chunk_rows" yaml:"chunk_rows"` // rows per read transaction
}

// Postgres configures the Postgres Y-store tailer (see postgres.Config).
type Postgres struct {
	DSN           string        `option:"dsn" yaml:"dsn"`
	DSNFile       string        `option:"dsn_file" yaml:"dsn_file"`
	Schema        string        `option:"schema" yaml:"schema"`
	Table         string        `option:"table" yaml:"table"`
	Channel       string        `option:"channel" yaml:"channel"`
	PollInterval  time.Duration `option:"poll_interval" yaml:"poll_interval"`
	DisableListen bool          `option:"disable_listen" yaml:"disable_listen"` // poll only
	Owner         string        `option:"owner" yaml:"owner"`                   // only this user's rooms; "" = every room
	ChunkRows     int           `option:"chunk_rows" yaml:"chunk_rows"`         // rows per round trip of a cold load
}

// FileID configures how file ids are mapped to notebook paths.
type FileID struct {
	DBPath  string    `option:"db_path" yaml:"db_path"`
	RootDir string    `option:"root_dir" yaml:"root_dir"`
	API     FileIDAPI `option:"api" yaml:"api"`
}

// FileIDAPI is the optional Jupyter REST endpoint for file id lookups.
type FileIDAPI struct {
	URL       string `option:"url" yaml:"url"`
	Token     string `option:"token" yaml:"token"`
	TokenFile string `option:"token_file" yaml:"token_file"`
}

// Server configures the MCP server, its transport and its front (the HTTP listeners
// and the endpoint's admission); the mapping (libconfig.go) hands each library its
// own keys.
type Server struct {
	Transport       string         `option:"transport" yaml:"transport"`                 // "http" (default) or "stdio"
	Listen          string         `option:"listen" yaml:"listen"`                       // HTTP listen address
	Path            string         `option:"path" yaml:"path"`                           // HTTP endpoint path
	Token           string         `option:"token" yaml:"token"`                         // resolved bearer token (config, file or environment)
	InsecureNoAuth  bool           `option:"insecure_no_auth" yaml:"insecure_no_auth"`   // serve HTTP without a token; must be explicit
	AllowedOrigins  []string       `option:"allowed_origins" yaml:"allowed_origins"`     // browser origins admitted besides loopback ones; "*" admits all
	Verifier        resources.Seam `option:"verifier" yaml:"verifier"`                   // token verifier; "static": constant-time compare with Token
	MaxRequestBytes int64          `option:"max_request_bytes" yaml:"max_request_bytes"` // request body limit
	DrainTimeout    time.Duration  `option:"drain_timeout" yaml:"drain_timeout"`         // graceful shutdown deadline
	IdleTimeout     time.Duration  `option:"idle_timeout" yaml:"idle_timeout"`           // idle keep-alive HTTP connections are closed after it
	ReadTimeout     time.Duration  `option:"read_timeout" yaml:"read_timeout"`           // an HTTP request's header, then its body, must arrive within it
	MaxConnections  int            `option:"max_connections" yaml:"max_connections"`     // open HTTP connections at most
	TokenFile       string         `option:"token_file" yaml:"token_file"`               // the file Token is read from
	StateFile       string         `option:"state_file" yaml:"state_file"`
	MetricsListen   string         `option:"metrics_listen" yaml:"metrics_listen"`
	Limits          Limits         `option:"limits" yaml:"limits"`
}

// Limits bound what one client can make the server hold: the surface's
// (resources.Limits) and its transport's sessions (transport.Config).
type Limits struct {
	MaxURIBytes          int           `option:"max_uri_bytes" yaml:"max_uri_bytes"`
	MaxSubscriptions     int           `option:"max_subscriptions" yaml:"max_subscriptions"`
	MaxSubscriptionBytes int           `option:"max_subscription_bytes" yaml:"max_subscription_bytes"`
	MaxSessions          int           `option:"max_sessions" yaml:"max_sessions"`
	SessionIdleTimeout   time.Duration `option:"session_idle_timeout" yaml:"session_idle_timeout"`
	MaxListenURIs        int           `option:"max_listen_uris" yaml:"max_listen_uris"`
	ReplayEvents         int           `option:"replay_buffer_events" yaml:"replay_buffer_events"`
	ReplayBytes          int           `option:"replay_buffer_bytes" yaml:"replay_buffer_bytes"`
	MaxNames             int           `option:"max_names" yaml:"max_names"`
	MaxPathBytes         int           `option:"max_path_bytes" yaml:"max_path_bytes"`
	MaxReadBytes         int64         `option:"max_read_bytes" yaml:"max_read_bytes"`
}

// Notifications configures the per-notebook debounce of change notifications.
type Notifications struct {
	Debounce time.Duration `option:"debounce" yaml:"debounce"`   // quiet period; 0 sends every change
	MaxDelay time.Duration `option:"max_delay" yaml:"max_delay"` // ceiling after the first change
}

// Ship configures ship mode: the local SQLite store appended into a shared Postgres.
type Ship struct {
	SourceID string       `option:"source_id" yaml:"source_id"` // default: the host name
	Owner    string       `option:"owner" yaml:"owner"`         // the rooms' owner; default: $JUPYTERHUB_USER
	Postgres ShipPostgres `option:"postgres" yaml:"postgres"`
}

// ShipPostgres is the Postgres store ship mode writes into.
type ShipPostgres struct {
	DSN     string `option:"dsn" yaml:"dsn"`
	DSNFile string `option:"dsn_file" yaml:"dsn_file"`
	Schema  string `option:"schema" yaml:"schema"`
	Table   string `option:"table" yaml:"table"`
}

// Default returns the configuration used when no file, environment or flag says otherwise.
func Default() Config {
	tr, fr := transport.DefaultConfig(), front.DefaultConfig()
	return Config{
		Log: Log{Level: "info", Format: "text"},
		Store: Store{
			Backend:      BackendSQLite,
			LagThreshold: ystore.DefaultLagThreshold,
			GapAfter:     rooms.DefaultGapAfter,
			// The store defaults are the libraries' own, decided there once.
			SQLite: SQLite{
				Path: sqlite.DefaultPath, PollInterval: sqlite.DefaultPollInterval, FSNotify: true,
				ChunkRows: sqlite.DefaultChunkRows,
			},
			Postgres: Postgres{
				Schema: postgres.DefaultSchema, Table: postgres.DefaultTable, Channel: postgres.DefaultChannel,
				PollInterval: postgres.DefaultPollInterval, ChunkRows: postgres.DefaultChunkRows,
			},
		},
		Server: Server{
			Transport:       transport.DefaultKind,
			Listen:          fr.Listen,
			Path:            tr.Path,
			AllowedOrigins:  []string{},
			Verifier:        resources.Seam{Name: auth.Default, Options: map[string]any{}},
			MaxRequestBytes: tr.MaxRequestBytes,
			DrainTimeout:    fr.DrainTimeout,
			IdleTimeout:     fr.IdleTimeout,
			ReadTimeout:     fr.ReadTimeout,
			MaxConnections:  fr.MaxConnections,
			Limits: Limits{
				MaxURIBytes:          resources.DefaultMaxURIBytes,
				MaxSubscriptions:     resources.DefaultMaxSubscriptions,
				MaxSubscriptionBytes: resources.DefaultMaxSubscriptionBytes,
				MaxSessions:          tr.MaxSessions,
				SessionIdleTimeout:   tr.SessionIdleTimeout,
				MaxListenURIs:        resources.DefaultMaxListenURIs,
				ReplayEvents:         tr.ReplayEvents,
				ReplayBytes:          tr.ReplayBytes,
				MaxNames:             resources.DefaultMaxNames,
				MaxPathBytes:         resources.DefaultMaxPathBytes,
				MaxReadBytes:         resources.DefaultMaxReadBytes,
			},
		},
		Notebooks:     map[string]string{},
		Notifications: Notifications{Debounce: debounce.DefaultQuiet, MaxDelay: debounce.DefaultCeiling},
		Publisher:     resources.Seam{Options: map[string]any{}},
		Gate:          resources.Seam{Options: map[string]any{}},
		Extensions:    map[string]map[string]any{},
		Hooks:         resources.DefaultHooks(),
		Ship:          Ship{Postgres: ShipPostgres{Schema: postgres.DefaultSchema, Table: postgres.DefaultTable}},
		Hub:           DefaultHub(),
		OnDisk: OnDisk{
			Enabled: true, FSNotify: true, PollInterval: ondisk.DefaultPollInterval,
			MaxWatchedDirs: ondisk.DefaultMaxWatchedDirs, MaxFileBytes: ondisk.DefaultMaxFileBytes,
		},
		Changes: Changes{MaxVersions: versions.DefaultMaxVersions, MaxAge: versions.DefaultMaxAge, MaxMemory: versions.DefaultMaxMemory},
	}
}

// StoreDir is the directory of the SQLite store, or the working directory ("." ) for
// other backends; default locations of the root dir and the state file derive from it.
func (c Config) StoreDir() string {
	if c.Store.Backend == BackendSQLite && c.Store.SQLite.Path != "" {
		return filepath.Dir(c.Store.SQLite.Path)
	}
	return "."
}

// RootDirPath is fileid.root_dir, or the store's directory when unset.
func (c Config) RootDirPath() string {
	if c.FileID.RootDir != "" {
		return c.FileID.RootDir
	}
	return c.StoreDir()
}

// StateFiles lists where use_notebook bindings may persist, best first, and whether
// they were configured: server.state_file alone when set; else names.json in
// $STATE_DIRECTORY (systemd's StateDirectory=, its first directory) when set, then
// .jupyter-mcp-sidecar-names.json in the store's directory, where it always was. The
// sidecar keeps them in the first where a file can be written; in none: in memory.
func (c Config) StateFiles() (files []string, configured bool) {
	if c.Server.StateFile != "" {
		return []string{c.Server.StateFile}, true
	}
	if d := stateDirectory(); d != "" {
		files = append(files, filepath.Join(d, "names.json"))
	}
	return append(files, filepath.Join(c.StoreDir(), ".jupyter-mcp-sidecar-names.json")), false
}

// HubStateDirs lists where hub users' bindings may persist, best first, and whether
// they were configured: hub.state_dir alone when set, else server.state_file's
// directory alone when set; else $STATE_DIRECTORY when set, then the working directory.
func (c Config) HubStateDirs() (dirs []string, configured bool) {
	switch {
	case c.Hub.StateDir != "":
		return []string{c.Hub.StateDir}, true
	case c.Server.StateFile != "":
		return []string{filepath.Dir(c.Server.StateFile)}, true
	}
	if d := stateDirectory(); d != "" {
		dirs = append(dirs, d)
	}
	return append(dirs, "."), false
}

// stateDirectory is the first directory of $STATE_DIRECTORY, which systemd sets from
// the unit's StateDirectory= (a colon-separated list); "" when unset.
func stateDirectory() string {
	d, _, _ := strings.Cut(os.Getenv("STATE_DIRECTORY"), ":")
	return d
}

// FileIDDBPath is fileid.db_path, or jupyter_server_fileid's own default
// (fileid.DefaultDBPath: file_id_manager.db in Jupyter's data directory).
func (c Config) FileIDDBPath() string {
	return cmp.Or(c.FileID.DBPath, fileid.DefaultDBPath())
}
