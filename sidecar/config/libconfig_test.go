package config

import (
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/versions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/debounce"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/front"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/hubauth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/ondisk"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/transport"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

// The store sections map every key onto the backends' typed configs.
func TestStoreConfigs(t *testing.T) {
	s := SQLite{Path: "/s/y.db", PollInterval: 3 * time.Second, FSNotify: false, ChunkRows: 7}
	if got, want := s.TailerConfig(Obs{}), (sqlite.Config{
		Path: "/s/y.db", PollInterval: 3 * time.Second, ChunkRows: 7, DisableFSNotify: true,
	}); got.Path != want.Path || got.PollInterval != want.PollInterval || got.ChunkRows != want.ChunkRows ||
		got.DisableFSNotify != want.DisableFSNotify {
		t.Errorf("TailerConfig() = %+v, want %+v", got, want)
	}
	p := Postgres{DSN: "postgres://h/db", Schema: "s", Table: "t", Channel: "c", PollInterval: time.Second, DisableListen: true, Owner: "alice", ChunkRows: 9}
	if got, want := p.StoreConfig(Obs{}), (postgres.Config{
		DSN: "postgres://h/db", Schema: "s", Table: "t", Channel: "c", PollInterval: time.Second, DisableListen: true, Owner: "alice", ChunkRows: 9,
	}); got != want {
		t.Errorf("StoreConfig() = %+v, want %+v", got, want)
	}
	sp := ShipPostgres{DSN: "postgres://h/db", Schema: "s", Table: "t"}
	if got, want := sp.StoreConfig(Obs{}), (postgres.Config{DSN: "postgres://h/db", Schema: "s", Table: "t"}); got != want {
		t.Errorf("ShipPostgres.StoreConfig() = %+v, want %+v", got, want)
	}
}

// The other sections map onto their libraries' configs, with the logger and the
// registerer handed over as given.
func TestLibraryConfigs(t *testing.T) {
	log, reg := slog.New(slog.DiscardHandler), prometheus.NewRegistry()
	obs := Obs{Logger: log, Registerer: reg}
	c := Default()
	c.Store.GapAfter, c.Store.MaxRooms, c.Store.MaxBytes = 7*time.Second, 3, 11
	c.FileID = FileID{DBPath: "/j/ids.db", RootDir: "rel/root", API: FileIDAPI{URL: "http://127.0.0.1:1/", Token: "t"}}
	c.OnDisk = OnDisk{Enabled: true, FSNotify: true, PollInterval: time.Minute, MaxWatchedDirs: 3, MaxFileBytes: 9}
	c.Server.Listen, c.Server.Limits.MaxNames, c.Server.StateFile = "127.0.0.1:1", 5, "/s/names.json"
	c.Notebooks = map[string]string{"nb": "a.ipynb"}
	c.Server.Token = "secret"

	if rc := c.RoomsConfig(obs); rc.Logger != log || rc.GapAfter != 7*time.Second || rc.MaxRooms != 3 || rc.MaxBytes != 11 {
		t.Errorf("RoomsConfig = %+v", rc)
	}
	// The served store's reader follows the rooms its Set may hold; ship's copies all.
	if sc, pc, ship := c.Store.SQLiteTailer(obs), c.Store.PostgresTailer(obs), c.Store.SQLite.TailerConfig(obs); sc.MaxRooms != 3 || pc.MaxRooms != 3 || ship.MaxRooms != 0 {
		t.Errorf("store readers bounded by %d (sqlite), %d (postgres), ship's %d; want 3, 3, 0", sc.MaxRooms, pc.MaxRooms, ship.MaxRooms)
	}
	if fc := c.FilesConfig(obs); fc.Root != "rel/root" || fc.PollInterval != time.Minute || fc.MaxWatchedDirs != 3 ||
		fc.MaxFileBytes != 9 || fc.DisableFSNotify || fc.Confine != nil || fc.Logger != log {
		t.Errorf("FilesConfig = %+v", fc)
	}
	abs, _ := filepath.Abs("rel/root")
	if dc, err := c.FileIDConfig(obs); err != nil || dc != (fileid.DBConfig{Path: "/j/ids.db", RootDir: abs, Logger: log, Registerer: reg}) {
		t.Errorf("FileIDConfig = %+v, %v", dc, err)
	}
	if rc := c.FileID.API.RESTConfig(); rc.BaseURL != "http://127.0.0.1:1/" || rc.Token != "t" {
		t.Errorf("RESTConfig = %+v", rc)
	}
	sc := c.ServerConfig("v1", obs)
	l := c.Server.Limits
	if sc.Limits != (resources.Limits{MaxURIBytes: l.MaxURIBytes, MaxSubscriptions: l.MaxSubscriptions, MaxSubscriptionBytes: l.MaxSubscriptionBytes,
		MaxListenURIs: l.MaxListenURIs, MaxNames: 5, MaxPathBytes: l.MaxPathBytes, MaxReadBytes: l.MaxReadBytes}) || sc.StopTimeout != c.Server.DrainTimeout || sc.StateFile != "/s/names.json" ||
		!reflect.DeepEqual(sc.Notebooks, c.Notebooks) || sc.Version != "v1" || sc.Logger != log || sc.Registerer != reg ||
		!reflect.DeepEqual(sc.Hooks, c.Hooks) || !reflect.DeepEqual(sc.Effective, c.Masked()) {
		t.Errorf("ServerConfig = %+v", sc)
	}
	if m, _ := sc.Effective.(Config); m.Server.Token != Mask {
		t.Errorf("the configuration shown to extensions is not masked: %+v", sc.Effective)
	}
	if tc := c.Server.TransportConfig(obs); tc != (transport.Config{Path: c.Server.Path, MaxRequestBytes: c.Server.MaxRequestBytes,
		DrainTimeout: c.Server.DrainTimeout, SessionIdleTimeout: l.SessionIdleTimeout, MaxSessions: l.MaxSessions,
		ReplayEvents: l.ReplayEvents, ReplayBytes: l.ReplayBytes, Logger: log, Registerer: reg}) {
		t.Errorf("TransportConfig = %+v", tc)
	}
	if fc := c.Server.FrontConfig("mcp", nil, obs); fc.Listen != "127.0.0.1:1" || fc.Name != "mcp" || fc.MaxConnections != c.Server.MaxConnections ||
		fc.IdleTimeout != c.Server.IdleTimeout || fc.ReadTimeout != c.Server.ReadTimeout || fc.DrainTimeout != c.Server.DrainTimeout ||
		fc.Logger != log || fc.Registerer != reg {
		t.Errorf("FrontConfig = %+v", fc)
	}
}

// The daemon's defaults (Default, which configs/sidecar.yaml documents) are the ones
// the MCP server and its transport run with: filling their own defaults changes
// nothing the daemon configures, and the metrics hook is on; the front's are its
// DefaultConfig.
func TestServerRunsWithTheDocumentedDefaults(t *testing.T) {
	d := Default()
	sc := d.ServerConfig("v", Obs{})
	filled := sc.Defaults()
	tc := d.Server.TransportConfig(Obs{})
	tfilled := tc.Defaults()
	tfilled.Logger = nil
	tfilled.HeartbeatInterval, tfilled.SessionGrace, tfilled.SendTimeout = 0, 0, 0 // no keys: the transport's own
	fc, fd := d.Server.FrontConfig("mcp", nil, Obs{}), front.DefaultConfig()
	for name, pair := range map[string][2]any{
		"transport":      {d.Server.Transport, transport.DefaultKind},
		"listen":         {fc.Listen, fd.Listen},
		"drain_timeout":  {fc.DrainTimeout, fd.DrainTimeout},
		"idle_timeout":   {fc.IdleTimeout, fd.IdleTimeout},
		"read_timeout":   {fc.ReadTimeout, fd.ReadTimeout},
		"max_connection": {fc.MaxConnections, fd.MaxConnections},
		"stop_timeout":   {sc.StopTimeout, filled.StopTimeout},
		"hooks":          {sc.Hooks, filled.Hooks},
		"limits":         {sc.Limits, filled.Limits},
		"the transport":  {tc, tfilled},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s: the daemon configures %v, the library's default is %v", name, pair[0], pair[1])
		}
	}
	if _, ok := sc.Hooks["metrics"]; !ok {
		t.Errorf("default hooks %v: the metrics hook is off", sc.Hooks)
	}
}

// The daemon's defaults are the libraries' Default constants, decided there once
// (configs/sidecar.yaml documents them: cmd/jupyter-mcp-sidecar checks that it is
// Default, and TestServerRunsWithTheDocumentedDefaults the server's).
func TestDefaultsAreTheLibraries(t *testing.T) {
	d := Default()
	h := d.Hub
	t.Setenv("JUPYTER_DATA_DIR", "/data/jupyter")
	for name, pair := range map[string][2]any{
		"store.lag_threshold":          {d.Store.LagThreshold, ystore.DefaultLagThreshold},
		"store.gap_after":              {d.Store.GapAfter, rooms.DefaultGapAfter},
		"store.sqlite.path":            {d.Store.SQLite.Path, sqlite.DefaultPath},
		"store.sqlite.poll_interval":   {d.Store.SQLite.PollInterval, sqlite.DefaultPollInterval},
		"store.sqlite.chunk_rows":      {d.Store.SQLite.ChunkRows, sqlite.DefaultChunkRows},
		"store.postgres.schema":        {d.Store.Postgres.Schema, postgres.DefaultSchema},
		"store.postgres.table":         {d.Store.Postgres.Table, postgres.DefaultTable},
		"store.postgres.channel":       {d.Store.Postgres.Channel, postgres.DefaultChannel},
		"store.postgres.poll_interval": {d.Store.Postgres.PollInterval, postgres.DefaultPollInterval},
		"store.postgres.chunk_rows":    {d.Store.Postgres.ChunkRows, postgres.DefaultChunkRows},
		"ship.postgres.schema":         {d.Ship.Postgres.Schema, postgres.DefaultSchema},
		"ship.postgres.table":          {d.Ship.Postgres.Table, postgres.DefaultTable},
		"fileid.db_path (unset)":       {d.FileIDDBPath(), fileid.DefaultDBPath()},
		"notifications.debounce":       {d.Notifications.Debounce, debounce.DefaultQuiet},
		"notifications.max_delay":      {d.Notifications.MaxDelay, debounce.DefaultCeiling},
		"ondisk.poll_interval":         {d.OnDisk.PollInterval, ondisk.DefaultPollInterval},
		"ondisk.max_watched_dirs":      {d.OnDisk.MaxWatchedDirs, ondisk.DefaultMaxWatchedDirs},
		"ondisk.max_file_bytes":        {d.OnDisk.MaxFileBytes, int64(ondisk.DefaultMaxFileBytes)},
		"hub.token_cache_ttl":          {h.TokenCacheTTL, hubauth.DefaultTokenCacheTTL},
		"hub.max_rooms_per_user":       {h.MaxRoomsPerUser, rooms.DefaultMaxRooms},
		"hub.max_store_bytes_per_user": {h.MaxStoreBytesPerUser, rooms.DefaultMaxBytes},
		"hub.max_memory_per_user":      {h.MaxMemoryPerUser, rooms.DefaultMaxMemory},
		"store.max_memory (none)":      {d.Store.MaxMemory, int64(0)},
		"store.max_rooms (none)":       {d.Store.MaxRooms, 0},
		"store.max_bytes (none)":       {d.Store.MaxBytes, int64(0)},
		"hub.oauth.proxy_hops":         {h.OAuth.ProxyHops, hubauth.DefaultProxyHops},
		"hub.oauth.access_token_ttl":   {h.OAuth.AccessTokenTTL, hubauth.DefaultAccessTokenTTL},
		"hub.oauth.refresh_token_ttl":  {h.OAuth.RefreshTokenTTL, hubauth.DefaultRefreshTokenTTL},
		"hub.oauth.registration":       {h.OAuth.Registration, string(hubauth.DefaultRegistration)},
		"hub.oauth.registration_ttl":   {h.OAuth.RegistrationTTL, hubauth.DefaultRegistrationTTL},
		"hub.stores.sqlite_path":       {filepath.Base(h.Stores.SQLitePath), sqlite.DefaultPath},
		"hub.stores.fileid_db":         {filepath.Base(h.Stores.FileIDDB), fileid.DBName},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s: the daemon's default is %v, the library's %v", name, pair[0], pair[1])
		}
	}
	if d.Store.Postgres.DisableListen || !d.Store.SQLite.FSNotify {
		t.Errorf("store defaults %+v", d.Store)
	}
	// A user's store files are where their single-user server, started in their home
	// directory, writes them by default.
	for tmpl, def := range map[string]string{h.Stores.SQLitePath: sqlite.DefaultPath, h.Stores.FileIDDB: ".local/share/jupyter/" + fileid.DBName} {
		if got, err := Render(tmpl, "alice"); err != nil || got != filepath.Join("/home/alice", def) {
			t.Errorf("template %s for alice = %q, %v; want /home/alice/%s", tmpl, got, err, def)
		}
	}
}

// The bounds of what a store makes the process hold: single mode's may be none (0), a
// hub user's may not.
func TestValidateStoreBounds(t *testing.T) {
	for _, tt := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Store.MaxRooms = -1 }, "store.max_rooms: must be >= 0"},
		{func(c *Config) { c.Store.MaxBytes = -1 }, "store.max_bytes: must be >= 0"},
		{func(c *Config) { c.Store.MaxMemory = -1 }, "store.max_memory: must be >= 0"},
		{func(c *Config) {
			c.Hub.Enabled, c.Hub.APIURL, c.Hub.MaxMemoryPerUser = true, "http://127.0.0.1:8081/hub/api", 0
		}, "hub.max_memory_per_user: must be > 0"},
		{func(c *Config) {
			c.Hub.Enabled, c.Hub.APIURL, c.Hub.MaxRoomsPerUser = true, "http://127.0.0.1:8081/hub/api", 0
		}, "hub.max_rooms_per_user: must be > 0"},
		{func(c *Config) {
			c.Hub.Enabled, c.Hub.APIURL, c.Hub.MaxStoreBytesPerUser = true, "http://127.0.0.1:8081/hub/api", -5
		}, "hub.max_store_bytes_per_user: must be > 0"},
	} {
		c := Default()
		tt.set(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate() = %v, want %q", err, tt.want)
		}
	}
	c := Default()
	c.Store.MaxRooms, c.Store.MaxBytes = 0, 0
	if err := c.Validate(); err != nil {
		t.Fatalf("no bound in single mode: %v", err)
	}
}

func TestValidateStore(t *testing.T) {
	c := Default()
	c.Store.SQLite.ChunkRows = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "store.sqlite.chunk_rows: must be > 0") {
		t.Fatalf("Validate() = %v", err)
	}
	c = Default()
	c.Store.Postgres.ChunkRows = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "store.postgres.chunk_rows: must be > 0") {
		t.Fatalf("Validate() = %v", err)
	}
}

// TestLibrariesValidateTheirKeys: a key a library owns is refused once, by that
// library's validation of what the configuration maps onto it, named by the key and
// worded by the library.
func TestLibrariesValidateTheirKeys(t *testing.T) {
	hub := func(c *Config) {
		c.Hub.Enabled, c.Hub.APIURL, c.Hub.ServiceName = true, "http://127.0.0.1:8081/hub/api", "mcp"
	}
	for _, tt := range []struct {
		key   string
		set   func(*Config)
		lib   func(Config) error
		field string
	}{
		{"changes.max_versions", func(c *Config) { c.Changes.MaxVersions = versions.MaxVersionsLimit + 1 },
			func(c Config) error { return c.RoomsConfig(Obs{}).Versions.Validate() }, "max_versions"},
		{"changes.max_age", func(c *Config) { c.Changes.MaxAge = 0 },
			func(c Config) error { return c.RoomsConfig(Obs{}).Versions.Validate() }, "max_age"},
		{"ondisk.poll_interval", func(c *Config) { c.OnDisk.Enabled, c.OnDisk.PollInterval = true, 0 },
			func(c Config) error { return c.FilesConfig(Obs{}).Validate() }, "poll_interval"},
		{"ondisk.max_file_bytes", func(c *Config) { c.OnDisk.Enabled, c.OnDisk.MaxFileBytes = true, -1 },
			func(c Config) error { return c.FilesConfig(Obs{}).Validate() }, "max_file_bytes"},
		{"server.allowed_origins[1]", func(c *Config) { c.Server.AllowedOrigins = []string{"*", "https://x.example/path"} },
			func(c Config) error { return auth.OriginPolicy{Allowed: c.Server.AllowedOrigins}.Validate() }, "allowed[1]"},
		{"server.verifier.name", func(c *Config) { c.Server.Verifier.Name = "" },
			func(c Config) error { return auth.ValidateName(c.Server.Verifier.Name) }, "name"},
		{"hub.api_url", func(c *Config) { hub(c); c.Hub.APIURL = "ftp://hub/api" },
			func(c Config) error { return c.Hub.VerifierOptions().Validate() }, "api_url"},
		{"hub.service_name", func(c *Config) { hub(c); c.Hub.ServiceName = "a/b" },
			func(c Config) error { return c.Hub.VerifierOptions().Validate() }, "service_name"},
		{"hub.token_cache_ttl", func(c *Config) { hub(c); c.Hub.TokenCacheTTL = 0 },
			func(c Config) error { return c.Hub.VerifierOptions().Validate() }, "token_cache_ttl"},
		{"store.max_memory", func(c *Config) { c.Store.MaxMemory = -1 },
			func(c Config) error { return c.RoomsConfig(Obs{}).Validate() }, "max_memory"},
		{"store.gap_after", func(c *Config) { c.Store.GapAfter = 0 },
			func(c Config) error { return c.RoomsConfig(Obs{}).Validate() }, "gap_after"},
		{"server.limits.max_read_bytes", func(c *Config) { c.Server.Limits.MaxReadBytes = 0 },
			func(c Config) error { return c.ServerConfig("", Obs{}).Validate() }, "max_read_bytes"},
		{"store.sqlite.chunk_rows", func(c *Config) { c.Store.SQLite.ChunkRows = 0 },
			func(c Config) error { return c.Store.SQLiteTailer(Obs{}).Validate() }, "chunk_rows"},
		{"store.postgres.schema", func(c *Config) { c.Store.Postgres.Schema = "a;drop" },
			func(c Config) error { return c.Store.PostgresTailer(Obs{}).Validate() }, "schema"},
		{"ship.postgres.table", func(c *Config) { c.Ship.Postgres.Table = "Up" },
			func(c Config) error { return c.Ship.Postgres.StoreConfig(Obs{}).Validate() }, "table"},
		{"fileid.api.url", func(c *Config) { c.FileID.API.URL = "ftp://x" },
			func(c Config) error { return fileIDCheck(c.FileID.API) }, "base_url"},
	} {
		t.Run(tt.key, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			want := keyErrors(tt.lib(c))[tt.field]
			if len(want) != 1 {
				t.Fatalf("the library refuses %s %d times, want once: %v", tt.field, len(want), tt.lib(c))
			}
			got := keyErrors(c.Validate())[tt.key]
			if len(got) != 1 || got[0].Msg != want[0].Msg || !errors.Is(got[0], ErrInvalid) {
				t.Fatalf("Validate() refuses %s as %v, want once, as the library: %q", tt.key, got, want[0].Msg)
			}
		})
	}
	// What hub mode's environment fills is not refused before it: no API URL is
	// config's own refusal (naming $JUPYTERHUB_API_URL), no service name none.
	c := Default()
	c.Hub.Enabled = true
	errs := keyErrors(c.Validate())
	if len(errs["hub.api_url"]) != 1 || !strings.Contains(errs["hub.api_url"][0].Msg, EnvHubAPIURL) || len(errs["hub.service_name"]) != 0 {
		t.Fatalf("hub mode with nothing set: %v", c.Validate())
	}
}

// keyErrors are the *KeyErrors err joins, by key.
func keyErrors(err error) map[string][]*KeyError {
	out := map[string][]*KeyError{}
	for _, e := range keyerr.Rekey(err, func(key string) string { return key }) {
		var ke *KeyError
		if errors.As(e, &ke) {
			out[ke.Key] = append(out[ke.Key], ke)
		}
	}
	return out
}
