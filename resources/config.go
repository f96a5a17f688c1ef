package resources

import (
	"errors"
	"fmt"
	"time"
)

// Transports the server speaks.
const (
	TransportHTTP  = "http"
	TransportStdio = "stdio"
)

// Seam names an implementation registered in the binary and its options.
type Seam struct {
	Name    string
	Options map[string]any
}

// Config is the typed configuration of the MCP server. The zero value of a
// field means its default (see Defaults).
type Config struct {
	Transport       string            // "http" (default) or "stdio"
	Listen          string            // HTTP listen address; default 127.0.0.1:4040
	Path            string            // HTTP endpoint path; default /mcp
	Token           string            // resolved bearer token (config, file or environment)
	InsecureNoAuth  bool              // serve HTTP without a token; must be explicit
	AllowedOrigins  []string          // browser origins admitted besides loopback ones; "*" admits all
	Verifier        Seam              // token verifier; default "static" (constant-time compare with Token)
	MaxRequestBytes int64             // request body limit; default 4 MiB
	StateFile       string            // where use_notebook bindings persist; "" keeps them in memory
	Notebooks       map[string]string // configured bindings: name → path relative to the Jupyter root
	Publisher       Seam              // default "subscribers"
	Gate            Seam              // default "all"
	Extensions      map[string]map[string]any
	Hooks           map[string]map[string]any // nil enables {"metrics": {}}; an empty map enables none

	NotebookTTL        time.Duration // cache hint for notebook and cell reads; default 5 s
	OutputTTL          time.Duration // cache hint for output reads; default 60 s
	DrainTimeout       time.Duration // graceful shutdown deadline; default 5 s
	HeartbeatInterval  time.Duration // ping on idle 2025-11-25 GET streams; default 25 s
	SessionIdleTimeout time.Duration // 2025-11-25 sessions idle this long are closed; default 30 min
	SessionGrace       time.Duration // a 2025-11-25 session ends this long after its last GET stream closed; default 10 s
	SendTimeout        time.Duration // a session whose notification queue stays full this long loses its subscriptions; default 5 s
	Version            string        // reported in serverInfo; default "dev"
}

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	orDefault(&c.Transport, TransportHTTP)
	orDefault(&c.Listen, "127.0.0.1:4040")
	orDefault(&c.Path, "/mcp")
	orDefault(&c.MaxRequestBytes, 4<<20)
	if c.Hooks == nil {
		c.Hooks = map[string]map[string]any{"metrics": {}}
	}
	orDefault(&c.NotebookTTL, 5*time.Second)
	orDefault(&c.OutputTTL, 60*time.Second)
	orDefault(&c.DrainTimeout, 5*time.Second)
	orDefault(&c.HeartbeatInterval, 25*time.Second)
	orDefault(&c.SessionIdleTimeout, 30*time.Minute)
	orDefault(&c.SendTimeout, 5*time.Second)
	orDefault(&c.SessionGrace, 10*time.Second)
	orDefault(&c.Version, "dev")
	return c
}

func orDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// Validate reports configuration errors (after Defaults).
func (c Config) Validate() error {
	var errs []error
	switch c.Transport {
	case TransportHTTP, TransportStdio:
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
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v must not be negative", name, d))
		}
	}
	return errors.Join(errs...)
}
