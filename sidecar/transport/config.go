package transport

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/front"
)

// The transports the daemon serves (server.transport).
const (
	KindHTTP  = "http"  // Streamable HTTP (HTTP)
	KindStdio = "stdio" // newline-delimited JSON-RPC on stdin and stdout (Stdio)
)

// Defaults of Config: the daemon's configuration defaults are these.
const (
	DefaultKind               = KindHTTP
	DefaultPath               = "/mcp"
	DefaultMaxRequestBytes    = 4 << 20
	DefaultDrainTimeout       = front.DefaultDrainTimeout // the sessions end while the front drains
	DefaultHeartbeatInterval  = 25 * time.Second
	DefaultSessionIdleTimeout = 30 * time.Minute
	DefaultSessionGrace       = 10 * time.Second
	DefaultSendTimeout        = 5 * time.Second
	DefaultMaxSessions        = 1024 // an idle 2025-11-25 session holds about 13 kB: 1024 hold about 13 MB
	DefaultReplayEvents       = 1000
	DefaultReplayBytes        = 1 << 20
)

// MinRequestBytes is the smallest MaxRequestBytes: an initialize must fit.
const MinRequestBytes = 1024

// Config is the typed configuration of a transport. The zero value of a field means
// its default (DefaultConfig).
type Config struct {
	Path               string        // the HTTP endpoint's path; default /mcp
	MaxRequestBytes    int64         // request body (HTTP) or line (stdio) limit; default 4 MiB
	DrainTimeout       time.Duration // how long the sessions have to end once Serve's context is done; default 10 s
	HeartbeatInterval  time.Duration // ping on idle 2025-11-25 GET streams; default 25 s
	SessionIdleTimeout time.Duration // 2025-11-25 sessions idle this long are closed; default 30 min
	SessionGrace       time.Duration // a 2025-11-25 session ends this long after its last GET stream closed; default 10 s
	SendTimeout        time.Duration // a session or listen stream whose notification queue stays full this long is ended; default 5 s
	MaxSessions        int           // live 2025-11-25 sessions at most; an initialize beyond is refused (503); default 1024
	ReplayEvents       int           // per 2025-11-25 session, the last events kept for a stream resumed with Last-Event-ID; default 1000
	ReplayBytes        int           // and at most this many bytes of them; default 1 MiB

	Logger     *slog.Logger          // nil: slog.Default()
	Registerer prometheus.Registerer // the transport's metrics (transports on one feed the same series); nil: none
}

// DefaultConfig is the configuration with every default.
func DefaultConfig() Config {
	return Config{
		Path: DefaultPath, MaxRequestBytes: DefaultMaxRequestBytes, DrainTimeout: DefaultDrainTimeout,
		HeartbeatInterval: DefaultHeartbeatInterval, SessionIdleTimeout: DefaultSessionIdleTimeout,
		SessionGrace: DefaultSessionGrace, SendTimeout: DefaultSendTimeout, MaxSessions: DefaultMaxSessions,
		ReplayEvents: DefaultReplayEvents, ReplayBytes: DefaultReplayBytes,
	}
}

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	d := DefaultConfig()
	c.Path = cmp.Or(c.Path, d.Path)
	c.MaxRequestBytes = cmp.Or(c.MaxRequestBytes, d.MaxRequestBytes)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, d.DrainTimeout)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, d.HeartbeatInterval)
	c.SessionIdleTimeout = cmp.Or(c.SessionIdleTimeout, d.SessionIdleTimeout)
	c.SessionGrace = cmp.Or(c.SessionGrace, d.SessionGrace)
	c.SendTimeout = cmp.Or(c.SendTimeout, d.SendTimeout)
	c.MaxSessions = cmp.Or(c.MaxSessions, d.MaxSessions)
	c.ReplayEvents = cmp.Or(c.ReplayEvents, d.ReplayEvents)
	c.ReplayBytes = cmp.Or(c.ReplayBytes, d.ReplayBytes)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate reports what is wrong with c, each a *keyerr.KeyError (keyerr.ErrInvalid)
// naming its field in snake case (sidecar/config renames them to the daemon's keys); a
// zero field is refused, so call it on a Config as the daemon maps it, or after
// Defaults.
func (c Config) Validate() error {
	var errs []error
	if !strings.HasPrefix(c.Path, "/") {
		errs = append(errs, keyerr.Invalid("path", "must start with /, got %q", c.Path))
	}
	if c.MaxRequestBytes < MinRequestBytes {
		errs = append(errs, keyerr.Invalid("max_request_bytes", "must be at least %d, got %d", MinRequestBytes, c.MaxRequestBytes))
	}
	for _, d := range []struct {
		key string
		d   time.Duration
	}{
		{"drain_timeout", c.DrainTimeout}, {"session_idle_timeout", c.SessionIdleTimeout},
		{"heartbeat_interval", c.HeartbeatInterval}, {"session_grace", c.SessionGrace}, {"send_timeout", c.SendTimeout},
	} {
		if d.d <= 0 {
			errs = append(errs, keyerr.Invalid(d.key, "must be > 0, got %s", d.d))
		}
	}
	for _, n := range []struct {
		key string
		n   int
	}{
		{"max_sessions", c.MaxSessions}, {"replay_events", c.ReplayEvents}, {"replay_bytes", c.ReplayBytes},
	} {
		if n.n < 1 {
			errs = append(errs, keyerr.Invalid(n.key, "%d: want at least 1", n.n))
		}
	}
	return errors.Join(errs...)
}

// ValidateKind refuses a transport other than KindHTTP and KindStdio, as key "kind".
func ValidateKind(kind string) error {
	if kind != KindHTTP && kind != KindStdio {
		return keyerr.Invalid("kind", "must be one of %s, %s, got %q", KindHTTP, KindStdio, kind)
	}
	return nil
}

// checked is c with its defaults, or why it is invalid; its logs carry the component
// of the MCP server they serve.
func (c Config) checked() (Config, error) {
	c = c.Defaults()
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("invalid transport config: %w", err)
	}
	c.Logger = c.Logger.With("component", "mcp")
	return c, nil
}
