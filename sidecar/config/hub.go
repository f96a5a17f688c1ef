package config

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/conns"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/hubauth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

// Hub configures hub mode: one sidecar, run as a JupyterHub service, serving every
// user of the Hub their own notebooks. Off by default (single-server mode).
type Hub struct {
	Enabled       bool          `option:"enabled" yaml:"enabled"`
	APIURL        string        `option:"api_url" yaml:"api_url"`               // "" = $JUPYTERHUB_API_URL
	APIToken      string        `option:"api_token" yaml:"api_token"`           // "" = $JUPYTERHUB_API_TOKEN
	APITokenFile  string        `option:"api_token_file" yaml:"api_token_file"` // or a file holding it
	ServiceName   string        `option:"service_name" yaml:"service_name"`     // "" = $JUPYTERHUB_SERVICE_NAME, else mcp
	ServicePrefix string        `option:"service_prefix" yaml:"service_prefix"` // "" = $JUPYTERHUB_SERVICE_PREFIX, else /services/{name}/
	Stores        HubStores     `option:"stores" yaml:"stores"`
	TokenCacheTTL time.Duration `option:"token_cache_ttl" yaml:"token_cache_ttl"` // reuse of a token's Hub answer
	IdleTimeout   time.Duration `option:"idle_timeout" yaml:"idle_timeout"`       // a user's rooms are released after it
	StateDir      string        `option:"state_dir" yaml:"state_dir"`             // users' name bindings; "" = server.state_file's directory, else $STATE_DIRECTORY, else the working directory (Config.HubStateDirs)
	OAuth         HubOAuth      `option:"oauth" yaml:"oauth"`                     // MCP clients log in with the Hub (sidecar/hubauth)
	// MaxConnectionsPerUser is a user's share of requests in flight, streams included,
	// and of their sessions (UserShare); 0: an eighth of server.max_connections.
	MaxConnectionsPerUser int `option:"max_connections_per_user" yaml:"max_connections_per_user"`
	// MaxRoomsPerUser, MaxStoreBytesPerUser and MaxMemoryPerUser bound what a user's
	// store makes the process hold: its rooms, the bytes of rows they decode, and the
	// memory their documents take (rooms.Config; the user's store.max_rooms,
	// store.max_bytes and store.max_memory).
	MaxRoomsPerUser      int   `option:"max_rooms_per_user" yaml:"max_rooms_per_user"`
	MaxStoreBytesPerUser int64 `option:"max_store_bytes_per_user" yaml:"max_store_bytes_per_user"`
	MaxMemoryPerUser     int64 `option:"max_memory_per_user" yaml:"max_memory_per_user"`
}

// UserShare is the requests one user has in flight at most (hub.max_connections_per_user,
// else conns.UserShare of server.max_connections), and the 2025-11-25 sessions at
// most (server.limits.max_sessions if lower): each session's GET stream is a request
// in flight.
func (h Hub) UserShare(s Server) (connections, sessions int) {
	connections = h.MaxConnectionsPerUser
	if connections == 0 {
		connections = conns.UserShare(s.MaxConnections)
	}
	return connections, min(connections, s.Limits.MaxSessions)
}

// HubOAuth configures the MCP authorization flow with the Hub as the login (docs/HUB.md,
// "Log in with the Hub").
type HubOAuth struct {
	Enabled   bool   `option:"enabled" yaml:"enabled"`
	PublicURL string `option:"public_url" yaml:"public_url"` // the Hub's origin as browsers reach it, e.g. https://hub.example.org
	ClientID  string `option:"client_id" yaml:"client_id"`   // the service's OAuth client id at the Hub; "" = service-{service_name}
	ProxyHops int    `option:"proxy_hops" yaml:"proxy_hops"` // proxies in front appending to X-Forwarded-For (the Hub's: 1): the rate limits' source address

	AccessTokenTTL  time.Duration `option:"access_token_ttl" yaml:"access_token_ttl"`   // a sidecar access token's life
	RefreshTokenTTL time.Duration `option:"refresh_token_ttl" yaml:"refresh_token_ttl"` // a login's refresh tokens' life, never beyond the Hub token's
	// TrustedProxies are the peers (IP addresses, CIDR prefixes) whose X-Forwarded-For
	// names the source; empty: none, a request's source is its connection's peer.
	TrustedProxies []string `option:"trusted_proxies" yaml:"trusted_proxies"`
	// AllowedRedirectSchemes are the short private-use schemes clients may register
	// redirect URIs with (vscode, cursor), besides https, http on a loopback host and
	// reverse-domain schemes (com.example.app:).
	AllowedRedirectSchemes []string         `option:"allowed_redirect_schemes" yaml:"allowed_redirect_schemes"`
	Registration           string           `option:"registration" yaml:"registration"`                       // who registers clients: open, token (RFC 7591 initial access token), closed (only clients)
	RegistrationToken      string           `option:"registration_token" yaml:"registration_token"`           // the initial access token with registration token
	RegistrationTokenFile  string           `option:"registration_token_file" yaml:"registration_token_file"` // or a file holding it
	RegistrationTTL        time.Duration    `option:"registration_ttl" yaml:"registration_ttl"`               // a client no user approved is forgotten after it at the latest
	Clients                []HubOAuthClient `option:"clients" yaml:"clients"`                                 // clients the operator registers
	AllowOpener            bool             `option:"allow_opener" yaml:"allow_opener"`                       // the login's pages keep the window that opened them (web clients' popups): only with users' servers on subdomains
}

// HubOAuthClient is a client the operator registers (hub.oauth.clients).
type HubOAuthClient struct {
	ClientID     string   `option:"client_id" yaml:"client_id"`
	ClientName   string   `option:"client_name" yaml:"client_name"`
	RedirectURIs []string `option:"redirect_uris" yaml:"redirect_uris"`
}

// maxProxyHops bounds hub.oauth.proxy_hops.
const maxProxyHops = 10

// OAuthClientID is the service's OAuth client id at the Hub. Call it after WithServiceEnv.
func (h Hub) OAuthClientID() string {
	if h.OAuth.ClientID != "" {
		return h.OAuth.ClientID
	}
	return "service-" + h.ServiceName
}

// HubStores are the templates of each user's files; {username} is the Hub user's name.
type HubStores struct {
	Backend    Backend `option:"backend" yaml:"backend"`         // sqlite: one file per user; postgres: store.postgres, rooms by owner
	SQLitePath string  `option:"sqlite_path" yaml:"sqlite_path"` // the user's pycrdt-store file
	FileIDDB   string  `option:"fileid_db" yaml:"fileid_db"`     // the user's jupyter_server_fileid database
	RootDir    string  `option:"root_dir" yaml:"root_dir"`       // the user's Jupyter root directory
}

// Placeholder is what the store templates put a user's name in place of.
const Placeholder = "{username}"

// The JupyterHub service environment: what the Hub gives a managed service.
const (
	EnvHubAPIURL        = "JUPYTERHUB_API_URL"
	EnvHubAPIToken      = "JUPYTERHUB_API_TOKEN"
	EnvHubServiceName   = "JUPYTERHUB_SERVICE_NAME"
	EnvHubServicePrefix = "JUPYTERHUB_SERVICE_PREFIX"
	EnvHubServiceURL    = "JUPYTERHUB_SERVICE_URL"
)

// DefaultServiceName is the service's name when neither hub.service_name nor
// $JUPYTERHUB_SERVICE_NAME says otherwise.
const DefaultServiceName = "mcp"

// ErrBadUsername is wrapped by the errors of StorePath, FileIDDBPath and RootDirPath for
// a user name that cannot be put into a path safely.
var ErrBadUsername = errors.New("user name not usable in a store path")

// DefaultHubIdleTimeout is hub.idle_timeout's default. Decided here: the sidecar, the
// one reader of hub.idle_timeout, is a package config cannot import.
const DefaultHubIdleTimeout = 10 * time.Minute

// DefaultHub returns hub mode's defaults: off, a user's files where a single-user server
// running in /home/{username} writes them by default.
func DefaultHub() Hub {
	home := "/home/" + Placeholder
	return Hub{
		Stores: HubStores{
			Backend:    BackendSQLite,
			SQLitePath: home + "/" + sqlite.DefaultPath,
			FileIDDB:   home + "/.local/share/jupyter/" + fileid.DBName,
			RootDir:    home,
		},
		TokenCacheTTL:        hubauth.DefaultTokenCacheTTL,
		IdleTimeout:          DefaultHubIdleTimeout,
		MaxRoomsPerUser:      rooms.DefaultMaxRooms,
		MaxStoreBytesPerUser: rooms.DefaultMaxBytes,
		MaxMemoryPerUser:     rooms.DefaultMaxMemory,
		OAuth: HubOAuth{ProxyHops: hubauth.DefaultProxyHops, AccessTokenTTL: hubauth.DefaultAccessTokenTTL, RefreshTokenTTL: hubauth.DefaultRefreshTokenTTL,
			Registration: string(hubauth.DefaultRegistration), RegistrationTTL: hubauth.DefaultRegistrationTTL,
			TrustedProxies: slices.Clone(hubauth.DefaultTrustedProxies), AllowedRedirectSchemes: []string{}, Clients: []HubOAuthClient{}},
	}
}

// WithServiceEnv fills, when hub mode is on, what the configuration leaves empty from
// the environment JupyterHub gives a service (getenv is os.Getenv): the API URL and
// token, the service's name (else DefaultServiceName) and its proxy prefix (else
// /services/{name}/). A configured key wins over the environment.
func (h Hub) WithServiceEnv(getenv func(string) string) Hub {
	if !h.Enabled {
		return h
	}
	fill := func(field *string, vals ...string) {
		for _, v := range vals {
			if *field == "" {
				*field = v
			}
		}
	}
	fill(&h.APIURL, getenv(EnvHubAPIURL))
	if h.APITokenFile == "" {
		fill(&h.APIToken, getenv(EnvHubAPIToken))
	}
	fill(&h.ServiceName, getenv(EnvHubServiceName), DefaultServiceName)
	fill(&h.ServicePrefix, getenv(EnvHubServicePrefix), "/services/"+h.ServiceName+"/")
	return h
}

// ServiceListen is the address $JUPYTERHUB_SERVICE_URL names (getenv is os.Getenv): the
// service's url in the Hub's configuration, where the Hub's proxy sends its requests, as
// host:port for server.listen; "" when unset. Only http: the sidecar serves no TLS.
func ServiceListen(getenv func(string) string) (string, error) {
	raw := getenv(EnvHubServiceURL)
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", &KeyError{Key: "server.listen", Msg: fmt.Sprintf("$%s: %v", EnvHubServiceURL, err), Err: ErrInvalid}
	case u.Scheme != "http" || u.Hostname() == "":
		return "", &KeyError{Key: "server.listen", Msg: fmt.Sprintf("$%s is %q: want http://host[:port]/ (the sidecar serves plain HTTP; set server.listen)", EnvHubServiceURL, raw), Err: ErrInvalid}
	}
	return net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "80")), nil
}

// PrefixedPath is path (server.path, /healthz, …) under the service's proxy prefix:
// /mcp becomes /services/mcp/mcp. Call it after WithServiceEnv.
func (h Hub) PrefixedPath(path string) string {
	return strings.TrimRight(h.ServicePrefix, "/") + path
}

// StorePath is the user's SQLite store: hub.stores.sqlite_path for user.
func (h Hub) StorePath(user string) (string, error) { return render(h.Stores.SQLitePath, user) }

// FileIDDBPath is the user's jupyter_server_fileid database: hub.stores.fileid_db for user.
func (h Hub) FileIDDBPath(user string) (string, error) { return render(h.Stores.FileIDDB, user) }

// RootDirPath is the user's Jupyter root directory: hub.stores.root_dir for user.
func (h Hub) RootDirPath(user string) (string, error) { return render(h.Stores.RootDir, user) }

// UserDir is the directory a store template's file is confined to for user in hub mode:
// the template rendered up to and including its first component that holds {username}
// (/home/alice for /home/{username}/.jupyter_ystore.db), or, when that component is the
// file itself (/srv/ystores/{username}.db), the directory it is in.
func UserDir(tmpl, user string) (string, error) {
	p, err := render(tmpl, user)
	if err != nil {
		return "", err
	}
	base, _ := templateBase(tmpl) // render checked it
	comp, _, more := strings.Cut(p[len(base):], "/")
	if !more {
		return filepath.Clean(base), nil
	}
	return base + comp, nil
}

// TemplateBase is the directory above the users' part of a store template: its fixed
// part before the first component holding {username} (/home/ for
// /home/{username}/work), which hub mode opens every user's directory from.
func TemplateBase(tmpl string) (string, error) { return templateBase(tmpl) }

// validate checks hub mode's keys when it is on.
func (h Hub) validate(v *validator, s Server) {
	if !h.Enabled {
		return
	}
	if s.Transport != "http" {
		v.fail("hub.enabled", "hub mode serves HTTP: needs server.transport http, got %q", s.Transport)
	}
	if h.APIURL == "" { // its form is the verifier's to check (libraryChecks)
		v.fail("hub.api_url", "must be set with hub.enabled (or run as a JupyterHub service: $%s)", EnvHubAPIURL)
	}
	v.exclusive("hub.api_token", h.APIToken, "hub.api_token_file", h.APITokenFile)
	if h.ServicePrefix != "" && (!strings.HasPrefix(h.ServicePrefix, "/") || !strings.HasSuffix(h.ServicePrefix, "/")) {
		v.fail("hub.service_prefix", "must start and end with /, e.g. /services/mcp/, got %q", h.ServicePrefix)
	}
	v.backend("hub.stores.backend", h.Stores.Backend)
	for _, t := range []struct{ key, tmpl string }{
		{"hub.stores.sqlite_path", h.Stores.SQLitePath},
		{"hub.stores.fileid_db", h.Stores.FileIDDB},
		{"hub.stores.root_dir", h.Stores.RootDir},
	} {
		if _, err := templateBase(t.tmpl); err != nil {
			v.fail(t.key, "%v", err)
		}
	}
	v.positive("hub.idle_timeout", h.IdleTimeout)
	if share, _ := h.UserShare(s); share < 1 || share >= s.MaxConnections {
		v.fail("hub.max_connections_per_user", "a user's share must be at least 1 and under server.max_connections (%d), got %d", s.MaxConnections, share)
	}
	if h.MaxRoomsPerUser <= 0 {
		v.fail("hub.max_rooms_per_user", "must be > 0: a user's store is bounded, got %d", h.MaxRoomsPerUser)
	}
	if h.MaxStoreBytesPerUser <= 0 {
		v.fail("hub.max_store_bytes_per_user", "must be > 0: a user's store is bounded, got %d", h.MaxStoreBytesPerUser)
	}
	if h.MaxMemoryPerUser <= 0 {
		v.fail("hub.max_memory_per_user", "must be > 0: a user's store is bounded, got %d", h.MaxMemoryPerUser)
	}
	if h.OAuth.Enabled {
		if u, err := url.Parse(h.OAuth.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			v.fail("hub.oauth.public_url", "must be the Hub's origin as browsers reach it, e.g. https://hub.example.org, got %q", h.OAuth.PublicURL)
		}
		if h.OAuth.ProxyHops < 0 || h.OAuth.ProxyHops > maxProxyHops {
			v.fail("hub.oauth.proxy_hops", "must be 0 to %d (the proxies in front of the sidecar), got %d", maxProxyHops, h.OAuth.ProxyHops)
		}
		v.positive("hub.oauth.access_token_ttl", h.OAuth.AccessTokenTTL)
		v.positive("hub.oauth.refresh_token_ttl", h.OAuth.RefreshTokenTTL)
		if h.APIToken == "" && h.APITokenFile == "" {
			v.fail("hub.oauth.enabled", "needs the service's API token (hub.api_token, hub.api_token_file or $%s): it is the service's OAuth client secret", EnvHubAPIToken)
		}
		h.OAuth.validate(v)
	}
}

// validate checks hub.oauth's registration keys.
func (o HubOAuth) validate(v *validator) {
	if _, err := hubauth.ParseTrustedProxies(o.TrustedProxies); err != nil {
		v.fail("hub.oauth.trusted_proxies", "%v", err)
	}
	for _, s := range o.AllowedRedirectSchemes {
		if err := hubauth.CheckAllowedScheme(s); err != nil {
			v.fail("hub.oauth.allowed_redirect_schemes", "%v", err)
		}
	}
	regs := make([]string, len(hubauth.Registrations))
	for i, r := range hubauth.Registrations {
		regs[i] = string(r)
	}
	v.oneOf("hub.oauth.registration", o.Registration, regs)
	v.exclusive("hub.oauth.registration_token", o.RegistrationToken, "hub.oauth.registration_token_file", o.RegistrationTokenFile)
	hasToken := o.RegistrationToken != "" || o.RegistrationTokenFile != ""
	switch {
	case o.Registration == string(hubauth.RegistrationToken) && !hasToken:
		v.fail("hub.oauth.registration_token", "must be set (or hub.oauth.registration_token_file) with hub.oauth.registration token")
	case o.Registration != string(hubauth.RegistrationToken) && hasToken:
		v.fail("hub.oauth.registration_token", "is used only with hub.oauth.registration token, not %q", o.Registration)
	}
	v.positive("hub.oauth.registration_ttl", o.RegistrationTTL)
	ids := map[string]bool{}
	for i, c := range o.OAuthClients() {
		key := fmt.Sprintf("hub.oauth.clients[%d]", i)
		if err := hubauth.CheckClient(c, o.AllowedRedirectSchemes); err != nil {
			v.fail(key, "%v", err)
		}
		if ids[c.ID] {
			v.fail(key, "client_id %q is listed twice", c.ID)
		}
		ids[c.ID] = true
	}
}

// OAuthClients are hub.oauth.clients as hubauth takes them.
func (o HubOAuth) OAuthClients() []hubauth.Client {
	out := make([]hubauth.Client, len(o.Clients))
	for i, c := range o.Clients {
		out[i] = hubauth.Client{ID: c.ClientID, Name: c.ClientName, RedirectURIs: c.RedirectURIs}
	}
	return out
}

// templateBase checks a store template and returns its directory: the fixed part
// before the first path component holding {username}, inside which every rendering
// stays. A template is an absolute, clean path with {username} in at least one
// component and no other {…}.
func templateBase(tmpl string) (string, error) {
	if !filepath.IsAbs(tmpl) || filepath.Clean(tmpl) != tmpl {
		return "", fmt.Errorf("must be an absolute, clean path (no .., no // or trailing /), got %q", tmpl)
	}
	if strings.Count(tmpl, "{") != strings.Count(tmpl, Placeholder) || strings.Count(tmpl, "}") != strings.Count(tmpl, Placeholder) {
		return "", fmt.Errorf("%s is the only placeholder, got %q", Placeholder, tmpl)
	}
	i := strings.Index(tmpl, Placeholder)
	if i < 0 {
		return "", fmt.Errorf("must contain %s (one store per user), got %q", Placeholder, tmpl)
	}
	return tmpl[:strings.LastIndexByte(tmpl[:i], '/')+1], nil
}

// checkUsername refuses names that could leave a template's directory or that no file
// system takes as part of a name: empty, . and .., /, \, NUL and other control
// characters, invalid UTF-8, more than 255 bytes.
func checkUsername(user string) error {
	switch {
	case user == "" || user == "." || user == "..":
	case len(user) > 255 || !utf8.ValidString(user):
	case strings.ContainsAny(user, `/\`) || strings.ContainsFunc(user, unicode.IsControl):
	default:
		return nil
	}
	return fmt.Errorf("%w: %q", ErrBadUsername, user)
}

// Render is tmpl (a store template) for user.
func Render(tmpl, user string) (string, error) { return render(tmpl, user) }

// render puts user into tmpl and checks that the result stays inside the template's
// directory.
func render(tmpl, user string) (string, error) {
	base, err := templateBase(tmpl)
	if err != nil {
		return "", err
	}
	if err := checkUsername(user); err != nil {
		return "", err
	}
	p := strings.ReplaceAll(tmpl, Placeholder, user)
	if filepath.Clean(p) != p || !strings.HasPrefix(p, base) {
		return "", fmt.Errorf("%w: %q leaves %s", ErrBadUsername, user, base)
	}
	return p, nil
}
