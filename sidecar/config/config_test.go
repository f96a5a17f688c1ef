package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the error; it must start with the key
	}{
		{"log level", func(c *Config) { c.Log.Level = "loud" }, "log.level: must be one of"},
		{"log format", func(c *Config) { c.Log.Format = "xml" }, "log.format: must be one of"},
		{"backend", func(c *Config) { c.Store.Backend = "redis" }, "store.backend: must be one of"},
		{"lag threshold", func(c *Config) { c.Store.LagThreshold = 0 }, "store.lag_threshold: must be > 0"},
		{"sqlite path", func(c *Config) { c.Store.SQLite.Path = "" }, "store.sqlite.path: must not be empty"},
		{"sqlite poll", func(c *Config) { c.Store.SQLite.PollInterval = -time.Second }, "store.sqlite.poll_interval: must be > 0"},
		{"postgres without dsn", func(c *Config) { c.Store.Backend = "postgres" }, "store.postgres.dsn: must be set"},
		{"postgres dsn twice", func(c *Config) { c.Store.Postgres.DSN, c.Store.Postgres.DSNFile = "x", "y" }, "store.postgres.dsn: set either"},
		{"postgres schema", func(c *Config) { c.Store.Postgres.Schema = "a;drop" }, "store.postgres.schema: must be a SQL identifier"},
		{"postgres table", func(c *Config) { c.Store.Postgres.Table = "" }, "store.postgres.table: must be a SQL identifier"},
		{"postgres channel", func(c *Config) { c.Store.Postgres.Channel = "Upper" }, "store.postgres.channel: must be a SQL identifier"},
		{"postgres poll", func(c *Config) { c.Store.Postgres.PollInterval = 0 }, "store.postgres.poll_interval: must be > 0"},
		{"fileid url", func(c *Config) { c.FileID.API.URL = "ftp://x" }, "fileid.api.url: must be an http(s) URL"},
		{"fileid token twice", func(c *Config) { c.FileID.API.Token, c.FileID.API.TokenFile = "a", "b" }, "fileid.api.token: set either"},
		{"transport", func(c *Config) { c.Server.Transport = "ws" }, "server.transport: must be one of"},
		{"listen", func(c *Config) { c.Server.Listen = "localhost" }, "server.listen: must be host:port"},
		{"path", func(c *Config) { c.Server.Path = "mcp" }, "server.path: must start with /"},
		{"token twice", func(c *Config) { c.Server.Token, c.Server.TokenFile = "a", "b" }, "server.token: set either"},
		{"blank token", func(c *Config) { c.Server.Token = " \t " }, "server.token: is only white space"},
		{"blank dsn", func(c *Config) { c.Store.Postgres.DSN = "  " }, "store.postgres.dsn: is only white space"},
		{"origin", func(c *Config) { c.Server.AllowedOrigins = []string{"https://ok.example", "nope"} }, "server.allowed_origins[1]: must be"},
		{"verifier", func(c *Config) { c.Server.Verifier.Name = "" }, "server.verifier.name: must not be empty"},
		{"max request", func(c *Config) { c.Server.MaxRequestBytes = 0 }, "server.max_request_bytes: must be at least 1024, got 0"},
		{"max request under the transport's", func(c *Config) { c.Server.MaxRequestBytes = 100 }, "server.max_request_bytes: must be at least 1024, got 100"},
		{"max connections", func(c *Config) { c.Server.MaxConnections = 0 }, "server.max_connections: 0: want at least 1"},
		{"replay bytes", func(c *Config) { c.Server.Limits.ReplayBytes = 0 }, "server.limits.replay_buffer_bytes: 0: want at least 1"},
		{"max names", func(c *Config) { c.Server.Limits.MaxNames = 0 }, "server.limits.max_names: 0: want at least 1"},
		{"drain", func(c *Config) { c.Server.DrainTimeout = 0 }, "server.drain_timeout: must be > 0"},
		{"max sessions", func(c *Config) { c.Server.Limits.MaxSessions = 0 }, "server.limits.max_sessions: 0: want at least 1"},
		{"session idle", func(c *Config) { c.Server.Limits.SessionIdleTimeout = 0 }, "server.limits.session_idle_timeout: must be > 0"},
		{"subscription bytes", func(c *Config) { c.Server.Limits.MaxSubscriptionBytes = -1 }, "server.limits.max_subscription_bytes: -1: want at least 1"},
		{"metrics listen", func(c *Config) { c.Server.MetricsListen = ":" }, "server.metrics_listen: must be host:port"},
		{"notebook name", func(c *Config) { c.Notebooks["a/b"] = "x.ipynb" }, "notebooks.a/b: invalid notebook name"},
		{"notebook path", func(c *Config) { c.Notebooks["a"] = "/abs.ipynb" }, "notebooks.a: invalid notebook path"},
		{"debounce", func(c *Config) { c.Notifications.Debounce = -1 }, "notifications.debounce: must be >= 0"},
		{"max delay", func(c *Config) { c.Notifications.MaxDelay = time.Millisecond }, "notifications.max_delay: must be >="},
		{"ship dsn twice", func(c *Config) { c.Ship.Postgres.DSN, c.Ship.Postgres.DSNFile = "a", "b" }, "ship.postgres.dsn: set either"},
		{"ship table", func(c *Config) { c.Ship.Postgres.Table = "x-y" }, "ship.postgres.table: must be a SQL identifier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %q, want it to contain %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v, not ErrInvalid", err)
			}
			var ke *KeyError
			if !errors.As(err, &ke) || !strings.HasPrefix(tt.want, ke.Key+":") {
				t.Fatalf("first KeyError = %v, want key of %q", ke, tt.want)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	c := Default()
	c.Store.Backend = "postgres"
	c.Store.Postgres.DSNFile = "/run/secrets/dsn"
	c.Store.SQLite.Path = ""
	c.Server.Transport = "stdio"
	c.Server.Listen = ""
	c.Server.AllowedOrigins = []string{"*", "http://localhost:8888"}
	c.Notebooks["analysis"] = "work/analysis.ipynb"
	c.Notifications = Notifications{}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
}

func TestValidateShip(t *testing.T) {
	c := Default()
	if err := c.ValidateShip(); err == nil || !strings.Contains(err.Error(), "ship.postgres.dsn: must be set") {
		t.Fatalf("ValidateShip() = %v", err)
	}
	c.Ship.Postgres.DSN = "postgres://localhost/db"
	if err := c.ValidateShip(); err != nil {
		t.Fatalf("ValidateShip() = %v", err)
	}
	c.Store.Backend = "postgres"
	if err := c.ValidateShip(); err == nil || !strings.Contains(err.Error(), "store.backend: ship reads a sqlite store") {
		t.Fatalf("ValidateShip() = %v", err)
	}
}

func TestCheckNames(t *testing.T) {
	names := Names{
		Publishers: []string{"pgnotify", "webhook"},
		Gates:      []string{"allow"}, Verifiers: []string{"static"}, Extensions: []string{"ext"}, Hooks: []string{"audit", "metrics"},
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"defaults", func(*Config) {}, ""},
		{"known", func(c *Config) {
			c.Publisher.Name, c.Gate.Name, c.Extensions["ext"], c.Hooks["audit"] = "webhook", "allow", nil, nil
		}, ""},
		{"publisher", func(c *Config) { c.Publisher.Name = "kafka" }, `publisher.name: unknown name "kafka" (registered: pgnotify, webhook)`},
		{"gate", func(c *Config) { c.Gate.Name = "deny" }, `gate.name: unknown name "deny"`},
		{"verifier", func(c *Config) { c.Server.Verifier.Name = "hub" }, `server.verifier.name: unknown name "hub"`},
		{"extension", func(c *Config) { c.Extensions["nope"] = nil }, `extensions.nope: unknown name "nope"`},
		{"hook", func(c *Config) { c.Hooks["nope"] = nil }, `hooks.nope: unknown name "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			err := c.CheckNames(names)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckNames() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckNames() = %v, want %q", err, tt.want)
			}
		})
	}
	c := Default()
	c.Hooks["audit"] = nil
	if err := c.CheckNames(names); err != nil {
		t.Fatalf("CheckNames() = %v", err)
	}
	names.Hooks = nil
	if err := c.CheckNames(names); err == nil || !strings.Contains(err.Error(), `hooks.audit: unknown name "audit" (none registered)`) {
		t.Fatalf("CheckNames(no hooks registered) = %v", err)
	}
}

func TestResolveSecrets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := Default()
	c.Server.TokenFile = write("token", "s3cret\n")
	c.Store.Postgres.DSNFile = write("dsn", "  postgres://u:p@h/db \n")
	c.FileID.API.TokenFile = write("api", "apitoken")
	c.Ship.Postgres.DSNFile = write("ship", "host=h password=pw")
	if err := c.ResolveSecrets(); err != nil {
		t.Fatal(err)
	}
	if c.Server.Token != "s3cret" || c.Store.Postgres.DSN != "postgres://u:p@h/db" ||
		c.FileID.API.Token != "apitoken" || c.Ship.Postgres.DSN != "host=h password=pw" {
		t.Fatalf("resolved = %+v", c)
	}

	for _, tt := range []struct{ file, want string }{
		{write("empty", " \n"), "server.token_file: secret file"},
		{filepath.Join(dir, "missing"), "server.token_file: reading secret"},
	} {
		c := Default()
		c.Server.TokenFile = tt.file
		err := c.ResolveSecrets()
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("ResolveSecrets(%s) = %v, want %q", tt.file, err, tt.want)
		}
	}
}

func TestMasked(t *testing.T) {
	c := Default()
	c.Server.Token = "s3cret"
	c.FileID.API.Token = "apitoken"
	c.Store.Postgres.DSN = "postgres://user:pa55@db:5432/y?sslmode=disable"
	c.Ship.Postgres.DSN = "host=db password='p w' user=u"
	c.Publisher = resources.Seam{Name: "webhook", Options: map[string]any{"url": "https://x", "auth_token": "tok", "headers": map[string]any{"Api-Key": "k"}}}
	c.Hooks["audit"] = map[string]any{"password": "pw", "level": "info"}
	m := c.Masked()
	if m.Server.Token != Mask || m.FileID.API.Token != Mask {
		t.Errorf("tokens not masked: %q %q", m.Server.Token, m.FileID.API.Token)
	}
	if got, want := m.Store.Postgres.DSN, "postgres://user:xxxxx@db:5432/y?sslmode=disable"; got != want {
		t.Errorf("dsn = %q, want %q", got, want)
	}
	if got, want := m.Ship.Postgres.DSN, "host=db password=xxxxx user=u"; got != want {
		t.Errorf("ship dsn = %q, want %q", got, want)
	}
	if m.Publisher.Options["auth_token"] != Mask || m.Publisher.Options["url"] != "https://x" ||
		m.Publisher.Options["headers"].(map[string]any)["Api-Key"] != Mask {
		t.Errorf("publisher options = %v", m.Publisher.Options)
	}
	if m.Hooks["audit"]["password"] != Mask || m.Hooks["audit"]["level"] != "info" {
		t.Errorf("hooks = %v", m.Hooks)
	}
	if c.Server.Token != "s3cret" || c.Publisher.Options["auth_token"] != "tok" || c.Hooks["audit"]["password"] != "pw" {
		t.Error("Masked changed the original")
	}
	if got := MaskDSN("postgres://h/db?password=x&user=u"); got != "postgres://h/db?password=xxxxx&user=u" {
		t.Errorf("MaskDSN(query) = %q", got)
	}
}

func TestPaths(t *testing.T) {
	c := Default()
	c.Store.SQLite.Path = "/srv/jupyter/.jupyter_ystore.db"
	if got := c.RootDirPath(); got != "/srv/jupyter" {
		t.Errorf("RootDirPath() = %q", got)
	}
	t.Setenv("STATE_DIRECTORY", "")
	states := func() string {
		files, configured := c.StateFiles()
		dirs, hubConfigured := c.HubStateDirs()
		return fmt.Sprint(files, configured, dirs, hubConfigured)
	}
	if got := states(); got != "[/srv/jupyter/.jupyter-mcp-sidecar-names.json] false [.] false" {
		t.Errorf("state places by default: %s", got)
	}
	t.Setenv("STATE_DIRECTORY", "/var/lib/a:/var/lib/b")
	if got := states(); got != "[/var/lib/a/names.json /srv/jupyter/.jupyter-mcp-sidecar-names.json] false [/var/lib/a .] false" {
		t.Errorf("state places under systemd's StateDirectory=: %s", got)
	}
	c.FileID.RootDir, c.Server.StateFile = "/root", "/var/lib/s/names.json"
	if got := states(); c.RootDirPath() != "/root" || got != "[/var/lib/s/names.json] true [/var/lib/s] true" {
		t.Errorf("explicit paths ignored: %q %s", c.RootDirPath(), got)
	}
	c.Hub.StateDir = "/var/lib/hub"
	if dirs, configured := c.HubStateDirs(); fmt.Sprint(dirs, configured) != "[/var/lib/hub] true" {
		t.Errorf("hub.state_dir ignored: %v %v", dirs, configured)
	}
	t.Setenv("JUPYTER_DATA_DIR", "/data/jupyter")
	if got := c.FileIDDBPath(); got != "/data/jupyter/file_id_manager.db" {
		t.Errorf("FileIDDBPath() = %q", got)
	}
	t.Setenv("JUPYTER_DATA_DIR", "")
	t.Setenv("XDG_DATA_HOME", "/xdg")
	if got := c.FileIDDBPath(); got != "/xdg/jupyter/file_id_manager.db" {
		t.Errorf("FileIDDBPath() = %q", got)
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := c.FileIDDBPath(); got != "/home/u/.local/share/jupyter/file_id_manager.db" {
		t.Errorf("FileIDDBPath() = %q", got)
	}
	c.FileID.DBPath = "/x.db"
	if got := c.FileIDDBPath(); got != "/x.db" {
		t.Errorf("FileIDDBPath() = %q", got)
	}
}
