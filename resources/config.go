package resources

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Transports the server speaks.
const (
	TransportHTTP  = "http"
	TransportStdio = "stdio"
	// TransportMounted is Streamable HTTP behind another server's endpoint (hub
	// mode mounts one server per user); to the server, the same as TransportHTTP:
	// the caller serves Handler() either way (sidecar/front).
	TransportMounted = "mounted"
)

// Defaults of Config: the daemon's configuration defaults are these.
const (
	DefaultTransport            = TransportHTTP
	DefaultListen               = "127.0.0.1:4040"
	DefaultPath                 = "/mcp"
	DefaultMaxRequestBytes      = 4 << 20
	DefaultNotebookTTL          = 5 * time.Second
	DefaultOutputTTL            = 60 * time.Second
	DefaultDrainTimeout         = 10 * time.Second
	DefaultHeartbeatInterval    = 25 * time.Second
	DefaultSessionIdleTimeout   = 30 * time.Minute
	DefaultSessionGrace         = 10 * time.Second
	DefaultSendTimeout          = 5 * time.Second
	DefaultReplayEvents         = 1000
	DefaultReplayBytes          = 1 << 20
	DefaultMaxURIBytes          = 2048
	DefaultMaxSubscriptions     = 4096
	DefaultMaxSubscriptionBytes = 256 << 10 // 4096 subscriptions of 64-byte URIs
	DefaultMaxSessions          = 1024      // an idle 2025-11-25 session holds about 13 kB: 1024 hold about 13 MB
	DefaultMaxListenURIs        = 4096
	DefaultIdleTimeout          = 30 * time.Second
	DefaultReadTimeout          = 10 * time.Second
	DefaultMaxConnections       = 1024
	DefaultMaxNames             = 1000
	DefaultMaxPathBytes         = 1024
)

// DefaultHooks are the hooks enabled when the configuration names none: the
// Prometheus metrics of tool calls and resource reads.
func DefaultHooks() map[string]map[string]any { return map[string]map[string]any{"metrics": {}} }

// Seam names an implementation registered in the binary (a publisher, gate or
// token verifier) and its options; the tags are its configuration keys.
type Seam struct {
	Name    string         `option:"name" yaml:"name"`
	Options map[string]any `option:"options" yaml:"options"`
}

// Config is the typed configuration of the MCP server. The zero value of a
// field means its default (see Defaults).
type Config struct {
	Endpoint                             // how the server is reached
	Limits                               // what one client can make the server hold
	StateFile  string                    // where use_notebook bindings persist; "" keeps them in memory
	Notebooks  map[string]string         // configured bindings: name → path relative to the Jupyter root
	Publisher  Seam                      // default "subscribers"
	Gate       Seam                      // default "all"
	Extensions map[string]map[string]any // name → options; compiled-in extensions are on unless `enabled: false`
	Effective  any                       // the daemon's effective configuration, secrets masked, shown to extensions (YAML-encodable)
	Hooks      map[string]map[string]any // nil enables DefaultHooks; an empty map enables none

	NotebookTTL       time.Duration // cache hint for notebook and cell reads; default 5 s
	OutputTTL         time.Duration // cache hint for output reads; default 60 s
	HeartbeatInterval time.Duration // ping on idle 2025-11-25 GET streams; default 25 s
	SessionGrace      time.Duration // a 2025-11-25 session ends this long after its last GET stream closed; default 10 s
	SendTimeout       time.Duration // a session or listen stream whose notification queue stays full this long is ended; default 5 s
	Version           string        // reported in serverInfo; default "dev"

	Logger     *slog.Logger          // the server's and its plugins' logs; default slog.Default()
	Registerer prometheus.Registerer // the server's, publisher's and hooks' metrics (servers on one feed the same series); nil: none
}

// Endpoint is how the server is reached: its transport, address and path, who is
// admitted, and the limits of its HTTP connections. The tags are the keys of the
// daemon's server section, which holds it as is.
type Endpoint struct {
	Transport       string        `option:"transport" yaml:"transport"`                 // "http" (default) or "stdio"
	Listen          string        `option:"listen" yaml:"listen"`                       // HTTP listen address; default 127.0.0.1:4040
	Path            string        `option:"path" yaml:"path"`                           // HTTP endpoint path; default /mcp
	Token           string        `option:"token" yaml:"token"`                         // resolved bearer token (config, file or environment)
	InsecureNoAuth  bool          `option:"insecure_no_auth" yaml:"insecure_no_auth"`   // serve HTTP without a token; must be explicit
	AllowedOrigins  []string      `option:"allowed_origins" yaml:"allowed_origins"`     // browser origins admitted besides loopback ones; "*" admits all
	Verifier        Seam          `option:"verifier" yaml:"verifier"`                   // token verifier; default "static" (constant-time compare with Token)
	MaxRequestBytes int64         `option:"max_request_bytes" yaml:"max_request_bytes"` // request body limit; default 4 MiB
	DrainTimeout    time.Duration `option:"drain_timeout" yaml:"drain_timeout"`         // graceful shutdown deadline; default 10 s
	IdleTimeout     time.Duration `option:"idle_timeout" yaml:"idle_timeout"`           // idle keep-alive HTTP connections are closed after it; default 30 s
	ReadTimeout     time.Duration `option:"read_timeout" yaml:"read_timeout"`           // an HTTP request's header, then its body, must arrive within it; default 10 s
	MaxConnections  int           `option:"max_connections" yaml:"max_connections"`     // open HTTP connections at most; more are closed at once; default 1024
}

// Limits bound what one client can make the server hold. The tags are the keys of
// the daemon's server.limits section, which holds it as is.
type Limits struct {
	MaxURIBytes          int           `option:"max_uri_bytes" yaml:"max_uri_bytes"`                   // longest URI a subscription or listen filter may name; default 2 KiB
	MaxSubscriptions     int           `option:"max_subscriptions" yaml:"max_subscriptions"`           // resources/subscribe URIs per 2025-11-25 session; default 4096
	MaxSubscriptionBytes int           `option:"max_subscription_bytes" yaml:"max_subscription_bytes"` // bytes of the URIs one 2025-11-25 session subscribes to, summed; default 256 KiB
	MaxSessions          int           `option:"max_sessions" yaml:"max_sessions"`                     // live 2025-11-25 sessions at most; an initialize beyond is refused (503); default 1024
	SessionIdleTimeout   time.Duration `option:"session_idle_timeout" yaml:"session_idle_timeout"`     // 2025-11-25 sessions idle this long are closed; default 30 min
	MaxListenURIs        int           `option:"max_listen_uris" yaml:"max_listen_uris"`               // resource URIs one subscriptions/listen filter may name; default 4096
	ReplayEvents         int           `option:"replay_buffer_events" yaml:"replay_buffer_events"`     // per 2025-11-25 session, the last events kept for a stream resumed with Last-Event-ID; default 1000
	ReplayBytes          int           `option:"replay_buffer_bytes" yaml:"replay_buffer_bytes"`       // and at most this many bytes of them; default 1 MiB
	MaxNames             int           `option:"max_names" yaml:"max_names"`                           // names bound with use_notebook at most; default 1000
	MaxPathBytes         int           `option:"max_path_bytes" yaml:"max_path_bytes"`                 // longest notebook path a name is bound to; default 1024
}

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	c.Transport = cmp.Or(c.Transport, DefaultTransport)
	c.Listen = cmp.Or(c.Listen, DefaultListen)
	c.Path = cmp.Or(c.Path, DefaultPath)
	c.MaxRequestBytes = cmp.Or(c.MaxRequestBytes, DefaultMaxRequestBytes)
	if c.Hooks == nil {
		c.Hooks = DefaultHooks()
	}
	c.NotebookTTL = cmp.Or(c.NotebookTTL, DefaultNotebookTTL)
	c.OutputTTL = cmp.Or(c.OutputTTL, DefaultOutputTTL)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DefaultDrainTimeout)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval)
	c.SessionIdleTimeout = cmp.Or(c.SessionIdleTimeout, DefaultSessionIdleTimeout)
	c.SendTimeout = cmp.Or(c.SendTimeout, DefaultSendTimeout)
	c.SessionGrace = cmp.Or(c.SessionGrace, DefaultSessionGrace)
	c.ReplayEvents = cmp.Or(c.ReplayEvents, DefaultReplayEvents)
	c.ReplayBytes = cmp.Or(c.ReplayBytes, DefaultReplayBytes)
	c.MaxURIBytes = cmp.Or(c.MaxURIBytes, DefaultMaxURIBytes)
	c.MaxSubscriptions = cmp.Or(c.MaxSubscriptions, DefaultMaxSubscriptions)
	c.MaxSubscriptionBytes = cmp.Or(c.MaxSubscriptionBytes, DefaultMaxSubscriptionBytes)
	c.MaxSessions = cmp.Or(c.MaxSessions, DefaultMaxSessions)
	c.MaxListenURIs = cmp.Or(c.MaxListenURIs, DefaultMaxListenURIs)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, DefaultReadTimeout)
	c.MaxConnections = cmp.Or(c.MaxConnections, DefaultMaxConnections)
	c.MaxNames = cmp.Or(c.MaxNames, DefaultMaxNames)
	c.MaxPathBytes = cmp.Or(c.MaxPathBytes, DefaultMaxPathBytes)
	c.Version = cmp.Or(c.Version, "dev")
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate reports configuration errors (after Defaults).
func (c Config) Validate() error {
	var errs []error
	switch c.Transport {
	case TransportHTTP, TransportStdio, TransportMounted:
	default:
		errs = append(errs, fmt.Errorf("transport %q: want %q or %q", c.Transport, TransportHTTP, TransportStdio))
	}
	if c.Path == "" || c.Path[0] != '/' {
		errs = append(errs, fmt.Errorf("path %q must start with /", c.Path))
	}
	if c.MaxRequestBytes < 1024 {
		errs = append(errs, fmt.Errorf("max request bytes %d: want at least 1024", c.MaxRequestBytes))
	}
	for name, d := range map[string]time.Duration{
		"notebook ttl": c.NotebookTTL, "output ttl": c.OutputTTL, "drain timeout": c.DrainTimeout,
		"heartbeat interval": c.HeartbeatInterval, "session idle timeout": c.SessionIdleTimeout,
		"session grace": c.SessionGrace, "send timeout": c.SendTimeout,
		"idle timeout": c.IdleTimeout, "read timeout": c.ReadTimeout,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v must not be negative", name, d))
		}
	}
	for name, n := range map[string]int{
		"replay events": c.ReplayEvents, "replay bytes": c.ReplayBytes, "max uri bytes": c.MaxURIBytes,
		"max subscriptions": c.MaxSubscriptions, "max subscription bytes": c.MaxSubscriptionBytes,
		"max sessions": c.MaxSessions, "max listen uris": c.MaxListenURIs,
		"max connections": c.MaxConnections, "max names": c.MaxNames, "max path bytes": c.MaxPathBytes,
	} {
		if n < 1 {
			errs = append(errs, fmt.Errorf("%s %d must be at least 1", name, n))
		}
	}
	return errors.Join(errs...)
}
