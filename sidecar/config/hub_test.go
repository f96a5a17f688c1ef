package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/hubauth"
)

// hubOn is the default configuration with hub mode on and its API URL set.
func hubOn() Config {
	c := Default()
	c.Hub.Enabled = true
	c.Hub.APIURL = "http://127.0.0.1:8081/hub/api"
	return c
}

// oauthOn is hubOn with hub.oauth on.
func oauthOn() Config {
	c := hubOn()
	c.Hub.APIToken, c.Hub.OAuth.Enabled, c.Hub.OAuth.PublicURL = "t", true, "https://hub.example.org"
	return c
}

func TestHubValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // "" = valid; else a substring starting with the key
	}{
		{"off ignores everything", func(c *Config) { c.Hub = Hub{Stores: HubStores{SQLitePath: "relative"}} }, ""},
		{"on", func(c *Config) { *c = hubOn() }, ""},
		{"tljh layout", func(c *Config) {
			*c = hubOn()
			c.Hub.Stores = HubStores{Backend: "sqlite", SQLitePath: "/home/jupyter-{username}/.jupyter_ystore.db",
				FileIDDB: "/home/jupyter-{username}/.local/share/jupyter/file_id_manager.db", RootDir: "/home/jupyter-{username}"}
		}, ""},
		{"no api url", func(c *Config) { c.Hub.Enabled = true }, "hub.api_url: must be set"},
		{"api url", func(c *Config) { *c = hubOn(); c.Hub.APIURL = "127.0.0.1:8081" }, "hub.api_url: must be the Hub's http(s) API URL"},
		{"stdio", func(c *Config) { *c = hubOn(); c.Server.Transport = "stdio" }, "hub.enabled: hub mode serves HTTP"},
		{"token twice", func(c *Config) { *c = hubOn(); c.Hub.APIToken, c.Hub.APITokenFile = "a", "b" }, "hub.api_token: set either"},
		{"service name", func(c *Config) { *c = hubOn(); c.Hub.ServiceName = "m/cp" }, "hub.service_name: must be a JupyterHub service name"},
		{"prefix", func(c *Config) { *c = hubOn(); c.Hub.ServicePrefix = "/services/mcp" }, "hub.service_prefix: must start and end with /"},
		{"sqlite template", func(c *Config) { *c = hubOn(); c.Hub.Stores.SQLitePath = "/home/alice/.jupyter_ystore.db" }, "hub.stores.sqlite_path: must contain {username}"},
		{"fileid template", func(c *Config) { *c = hubOn(); c.Hub.Stores.FileIDDB = "home/{username}/f.db" }, "hub.stores.fileid_db: must be an absolute, clean path"},
		{"root template", func(c *Config) { *c = hubOn(); c.Hub.Stores.RootDir = "/home/{user}" }, "hub.stores.root_dir: {username} is the only placeholder"},
		{"postgres", func(c *Config) {
			*c = hubOn()
			c.Hub.Stores.Backend, c.Store.Postgres.DSN = "postgres", "postgres://db/ystore"
		}, ""},
		{"postgres without dsn", func(c *Config) { *c = hubOn(); c.Hub.Stores.Backend = "postgres" }, "store.postgres.dsn: must be set"},
		{"backend", func(c *Config) { *c = hubOn(); c.Hub.Stores.Backend = "mysql" }, "hub.stores.backend: must be one of postgres, sqlite"},
		{"cache ttl", func(c *Config) { *c = hubOn(); c.Hub.TokenCacheTTL = 0 }, "hub.token_cache_ttl: must be > 0"},
		{"idle", func(c *Config) { *c = hubOn(); c.Hub.IdleTimeout = -time.Second }, "hub.idle_timeout: must be > 0"},
		{"user share", func(c *Config) { *c = hubOn(); c.Hub.MaxConnectionsPerUser = 1023 }, ""},
		{"user share is the whole", func(c *Config) { *c = hubOn(); c.Hub.MaxConnectionsPerUser = 1024 }, "hub.max_connections_per_user: a user's share must be at least 1 and under server.max_connections (1024), got 1024"},
		{"user share negative", func(c *Config) { *c = hubOn(); c.Hub.MaxConnectionsPerUser = -1 }, "hub.max_connections_per_user: a user's share must be at least 1"},
		{"one connection for all", func(c *Config) { *c = hubOn(); c.Server.MaxConnections = 1 }, "hub.max_connections_per_user: a user's share must be at least 1 and under server.max_connections (1)"},
		{"oauth", func(c *Config) {
			*c = hubOn()
			c.Hub.APIToken, c.Hub.OAuth.Enabled, c.Hub.OAuth.PublicURL = "t", true, "https://hub.example.org"
		}, ""},
		{"proxy hops", func(c *Config) {
			*c = hubOn()
			c.Hub.APIToken, c.Hub.OAuth.Enabled, c.Hub.OAuth.PublicURL, c.Hub.OAuth.ProxyHops = "t", true, "https://hub.example.org", -1
		}, "hub.oauth.proxy_hops: must be 0 to 10"},
		{"trusted proxies", func(c *Config) {
			*c = oauthOn()
			c.Hub.OAuth.TrustedProxies = []string{"127.0.0.1/32", "10.0.0.1", "::1", "2001:db8::/48"}
		}, ""},
		{"trusted proxy name", func(c *Config) { *c = oauthOn(); c.Hub.OAuth.TrustedProxies = []string{"proxy.local"} },
			"hub.oauth.trusted_proxies: \"proxy.local\" is neither an IP address nor a CIDR prefix"},
		{"sse in hub mode", func(c *Config) { *c = oauthOn(); c.Publisher.Name = "sse" },
			"publisher.name: sse listens on one address, so it cannot serve every hub user's tenant: use pgnotify or webhook in hub mode"},
		{"allowed schemes", func(c *Config) { *c = oauthOn(); c.Hub.OAuth.AllowedRedirectSchemes = []string{"vscode", "cursor"} }, ""},
		{"browser scheme allowed", func(c *Config) { *c = oauthOn(); c.Hub.OAuth.AllowedRedirectSchemes = []string{"microsoft-edge"} },
			"hub.oauth.allowed_redirect_schemes: \"microsoft-edge\" is a browser's or the system's own scheme"},
		{"registration", func(c *Config) { *c = oauthOn(); c.Hub.OAuth.Registration = "invite" }, "hub.oauth.registration: must be one of open, token, closed"},
		{"registration token", func(c *Config) {
			*c = oauthOn()
			c.Hub.OAuth.Registration, c.Hub.OAuth.RegistrationTokenFile = "token", "/run/secrets/registration"
		}, ""},
		{"registration token missing", func(c *Config) { *c = oauthOn(); c.Hub.OAuth.Registration = "token" },
			"hub.oauth.registration_token: must be set (or hub.oauth.registration_token_file) with hub.oauth.registration token"},
		{"registration token unused", func(c *Config) { *c = oauthOn(); c.Hub.OAuth.RegistrationToken = "0123456789abcdef" },
			"hub.oauth.registration_token: is used only with hub.oauth.registration token"},
		{"registration token twice", func(c *Config) {
			*c = oauthOn()
			c.Hub.OAuth.Registration, c.Hub.OAuth.RegistrationToken, c.Hub.OAuth.RegistrationTokenFile = "token", "0123456789abcdef", "/f"
		}, "hub.oauth.registration_token: set either"},
		{"registration ttl", func(c *Config) { *c = oauthOn(); c.Hub.OAuth.RegistrationTTL = 0 }, "hub.oauth.registration_ttl: must be > 0"},
		{"clients", func(c *Config) {
			*c = oauthOn()
			c.Hub.OAuth.Registration = "closed"
			c.Hub.OAuth.Clients = []HubOAuthClient{{ClientID: "vscode", ClientName: "VS Code", RedirectURIs: []string{"http://127.0.0.1:33418/", "https://vscode.dev/redirect"}}}
		}, ""},
		{"client redirect", func(c *Config) {
			*c = oauthOn()
			c.Hub.OAuth.Clients = []HubOAuthClient{{ClientID: "x", RedirectURIs: []string{"googlechromes://evil.example/x"}}}
		}, "hub.oauth.clients[0]: client x: redirect URI scheme \"googlechromes\" refused"},
		{"client twice", func(c *Config) {
			*c = oauthOn()
			one := HubOAuthClient{ClientID: "x", RedirectURIs: []string{"https://app.example/cb"}}
			c.Hub.OAuth.Clients = []HubOAuthClient{one, one}
		}, "hub.oauth.clients[1]: client_id \"x\" is listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			c.Hub = c.Hub.WithServiceEnv(func(string) string { return "" })
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			var ke *KeyError
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.As(err, &ke) || !strings.HasPrefix(tt.want, ke.Key+":") {
				t.Fatalf("Validate() = %v, want %q first", err, tt.want)
			}
		})
	}
}

// TestHubUserShare: a user's share of connections is hub.max_connections_per_user, else
// an eighth of server.max_connections; of sessions, the same, or
// server.limits.max_sessions if lower.
func TestHubUserShare(t *testing.T) {
	for _, tt := range []struct {
		perUser, maxConns, maxSessions int
		conns, sessions                int
	}{
		{0, 1024, 1024, 128, 128},
		{0, 64, 1024, 8, 8},
		{0, 4, 1024, 1, 1},
		{100, 1024, 1024, 100, 100},
		{100, 1024, 10, 100, 10},
	} {
		s := Default().Server
		s.MaxConnections, s.Limits.MaxSessions = tt.maxConns, tt.maxSessions
		c, n := Hub{MaxConnectionsPerUser: tt.perUser}.UserShare(s)
		if c != tt.conns || n != tt.sessions {
			t.Errorf("UserShare(per user %d, max_connections %d, max_sessions %d) = %d, %d; want %d, %d",
				tt.perUser, tt.maxConns, tt.maxSessions, c, n, tt.conns, tt.sessions)
		}
	}
}

func TestHubWithServiceEnv(t *testing.T) {
	env := map[string]string{
		EnvHubAPIURL: "http://hub:8081/hub/api", EnvHubAPIToken: "svc-token",
		EnvHubServiceName: "notebooks-mcp", EnvHubServicePrefix: "/services/notebooks-mcp/",
	}
	tests := []struct {
		name        string
		hub         Hub
		env         map[string]string
		want        Hub // only the four filled fields are compared
		wantPrefixd string
	}{
		{"off: untouched", Hub{}, env, Hub{}, "/mcp"},
		{"from the environment", Hub{Enabled: true}, env,
			Hub{APIURL: "http://hub:8081/hub/api", APIToken: "svc-token", ServiceName: "notebooks-mcp", ServicePrefix: "/services/notebooks-mcp/"},
			"/services/notebooks-mcp/mcp"},
		{"no environment: defaults", Hub{Enabled: true}, nil,
			Hub{ServiceName: "mcp", ServicePrefix: "/services/mcp/"}, "/services/mcp/mcp"},
		{"prefix follows a configured name", Hub{Enabled: true, ServiceName: "x"}, map[string]string{EnvHubAPIURL: "http://h/hub/api"},
			Hub{APIURL: "http://h/hub/api", ServiceName: "x", ServicePrefix: "/services/x/"}, "/services/x/mcp"},
		{"configured keys win", Hub{Enabled: true, APIURL: "https://hub.example.org/hub/api", APIToken: "mine", ServiceName: "a", ServicePrefix: "/p/"}, env,
			Hub{APIURL: "https://hub.example.org/hub/api", APIToken: "mine", ServiceName: "a", ServicePrefix: "/p/"}, "/p/mcp"},
		{"a token file wins over the environment's token", Hub{Enabled: true, APITokenFile: "/run/secrets/t"}, env,
			Hub{APIURL: "http://hub:8081/hub/api", ServiceName: "notebooks-mcp", ServicePrefix: "/services/notebooks-mcp/"},
			"/services/notebooks-mcp/mcp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.hub.WithServiceEnv(func(k string) string { return tt.env[k] })
			if got.APIURL != tt.want.APIURL || got.APIToken != tt.want.APIToken ||
				got.ServiceName != tt.want.ServiceName || got.ServicePrefix != tt.want.ServicePrefix {
				t.Fatalf("WithServiceEnv = %+v, want %+v", got, tt.want)
			}
			if p := got.PrefixedPath("/mcp"); p != tt.wantPrefixd {
				t.Fatalf("PrefixedPath(/mcp) = %q, want %q", p, tt.wantPrefixd)
			}
		})
	}
}

func TestHubStorePaths(t *testing.T) {
	tests := []struct {
		tmpl, user, want string // want "" = refused
	}{
		{"/home/{username}/.jupyter_ystore.db", "alice", "/home/alice/.jupyter_ystore.db"},
		{"/home/jupyter-{username}/.jupyter_ystore.db", "bob", "/home/jupyter-bob/.jupyter_ystore.db"},
		{"/srv/stores/{username}.db", "carol", "/srv/stores/carol.db"},
		{"/home/{username}", "alice@example.org", "/home/alice@example.org"},
		{"/home/{username}", "a..b", "/home/a..b"},
		{"/home/{username}", ".hidden", "/home/.hidden"},
		{"/home/{username}", "zoë", "/home/zoë"},
		{"/home/{username}/x", "", ""},
		{"/home/{username}/x", ".", ""},
		{"/home/{username}/x", "..", ""},
		{"/home/jupyter-{username}/x", "..", ""},
		{"/home/{username}/x", "../root", ""},
		{"/home/{username}/x", "a/b", ""},
		{"/home/{username}/x", `a\b`, ""},
		{"/home/{username}/x", "a\x00b", ""},
		{"/home/{username}/x", "a\nb", ""},
		{"/home/{username}/x", "a\u0085b", ""},
		{"/home/{username}/x", "\xff", ""},
		{"/home/{username}/x", strings.Repeat("a", 256), ""},
	}
	for _, tt := range tests {
		got, err := render(tt.tmpl, tt.user)
		switch {
		case tt.want == "" && !errors.Is(err, ErrBadUsername):
			t.Errorf("render(%q, %q) = %q, %v; want ErrBadUsername", tt.tmpl, tt.user, got, err)
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("render(%q, %q) = %q, %v; want %q", tt.tmpl, tt.user, got, err, tt.want)
		}
	}
	h := DefaultHub()
	for _, f := range []struct {
		name string
		fn   func(string) (string, error)
		want string
	}{
		{"StorePath", h.StorePath, "/home/alice/.jupyter_ystore.db"},
		{"FileIDDBPath", h.FileIDDBPath, "/home/alice/.local/share/jupyter/file_id_manager.db"},
		{"RootDirPath", h.RootDirPath, "/home/alice"},
	} {
		if got, err := f.fn("alice"); err != nil || got != f.want {
			t.Errorf("%s(alice) = %q, %v; want %q", f.name, got, err, f.want)
		}
		if _, err := f.fn("../bob"); !errors.Is(err, ErrBadUsername) {
			t.Errorf("%s(../bob) = %v, want ErrBadUsername", f.name, err)
		}
	}
}

func TestHubTemplates(t *testing.T) {
	tests := []struct {
		tmpl, base, err string
	}{
		{"/home/{username}/.jupyter_ystore.db", "/home/", ""},
		{"/home/jupyter-{username}/x", "/home/", ""},
		{"/{username}", "/", ""},
		{"/srv/{username}/db/{username}.db", "/srv/", ""},
		{"home/{username}", "", "absolute, clean"},
		{"/home/../{username}", "", "absolute, clean"},
		{"/home//{username}", "", "absolute, clean"},
		{"/home/{username}/", "", "absolute, clean"},
		{"/home/./{username}", "", "absolute, clean"},
		{"/home/{user}", "", "only placeholder"},
		{"/home/{username}{x}", "", "only placeholder"},
		{"/home/{username", "", "only placeholder"},
		{"/home/alice", "", "must contain {username}"},
		{"", "", "absolute, clean"},
	}
	for _, tt := range tests {
		base, err := templateBase(tt.tmpl)
		if tt.err == "" && (err != nil || base != tt.base) {
			t.Errorf("templateBase(%q) = %q, %v; want %q", tt.tmpl, base, err, tt.base)
		}
		if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("templateBase(%q) error %v, want %q", tt.tmpl, err, tt.err)
		}
	}
}

// The hub keys build the "jupyterhub" verifier as they are, through the registry.
func TestHubVerifierOptions(t *testing.T) {
	h := hubOn().Hub.WithServiceEnv(func(string) string { return "" })
	s := h.VerifierSettings(Obs{})
	if want := map[string]any{"api_url": h.APIURL, "service_name": DefaultServiceName, "token_cache_ttl": h.TokenCacheTTL}; !reflect.DeepEqual(s.Options, want) || s.Token != h.APIToken {
		t.Fatalf("VerifierSettings = %+v, want options %+v", s, want)
	}
	if _, err := auth.New(hubauth.VerifierName, s); err != nil {
		t.Fatalf("auth.New(%q, %+v) = %v", hubauth.VerifierName, s, err)
	}
}

func TestHubTokenMaskedAndFromFile(t *testing.T) {
	c := hubOn()
	c.Hub.APIToken = "svc-secret"
	if m := c.Masked(); m.Hub.APIToken != Mask {
		t.Fatalf("masked hub.api_token = %q", m.Hub.APIToken)
	}
	file := t.TempDir() + "/token"
	if err := os.WriteFile(file, []byte(" from-file \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Hub.APIToken, c.Hub.APITokenFile = "", file
	if err := c.ResolveSecrets(); err != nil || c.Hub.APIToken != "from-file" {
		t.Fatalf("ResolveSecrets: %q, %v", c.Hub.APIToken, err)
	}
}

// FuzzStorePath: whatever name the Hub reports, a user's store is either refused or a
// clean path directly under the template's directory, holding the name as one component.
func FuzzStorePath(f *testing.F) {
	for _, u := range []string{"alice", "..", "a/b", "a\x00b", ".", "jupyter-bob", "zoë", "a..b", ""} {
		f.Add(u)
	}
	h := DefaultHub()
	f.Fuzz(func(t *testing.T, user string) {
		p, err := h.StorePath(user)
		if err != nil {
			if !errors.Is(err, ErrBadUsername) {
				t.Fatalf("StorePath(%q) = %v, not ErrBadUsername", user, err)
			}
			return
		}
		rel, err := filepath.Rel("/home", p)
		if err != nil || filepath.Clean(p) != p || rel != user+"/.jupyter_ystore.db" || strings.Count(rel, "/") != 1 {
			t.Fatalf("StorePath(%q) = %q (relative %q, %v): not the user's own directory under /home", user, p, rel, err)
		}
	})
}

// A template's file is confined to the user's directory in it: the template up to and
// including its first component holding {username}, or that file's directory when the
// component is the file itself.
func TestUserDir(t *testing.T) {
	for _, c := range []struct{ tmpl, want string }{
		{"/home/{username}/.jupyter_ystore.db", "/home/alice"},
		{"/home/jupyter-{username}/.local/share/jupyter/file_id_manager.db", "/home/jupyter-alice"},
		{"/home/{username}", "/home"},
		{"/srv/ystores/{username}.db", "/srv/ystores"},
		{"/srv/{username}/{username}.db", "/srv/alice"},
	} {
		if got, err := UserDir(c.tmpl, "alice"); err != nil || got != c.want {
			t.Errorf("UserDir(%q) = %q, %v; want %q", c.tmpl, got, err, c.want)
		}
	}
	if _, err := UserDir("/home/{username}/x", ".."); !errors.Is(err, ErrBadUsername) {
		t.Errorf("UserDir for .. = %v, want ErrBadUsername", err)
	}
}
