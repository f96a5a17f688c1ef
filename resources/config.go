package resources

import (
	"cmp"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
)

// Defaults of Config: the daemon's configuration defaults are these.
const (
	DefaultNotebookTTL          = 5 * time.Second
	DefaultOutputTTL            = 60 * time.Second
	DefaultStopTimeout          = 10 * time.Second
	DefaultMaxURIBytes          = 2048
	DefaultMaxSubscriptions     = 4096
	DefaultMaxSubscriptionBytes = 256 << 10 // 4096 subscriptions of 64-byte URIs
	DefaultMaxListenURIs        = 4096
	DefaultMaxNames             = 1000
	DefaultMaxPathBytes         = 1024
	DefaultMaxReadBytes         = 256 << 20
	DefaultVersion              = "devel" // an unstamped build's (sidecarcmd reports it too)
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

// Config is the typed configuration of the MCP server: the surface alone (its
// transport has its own, sidecar/transport.Config; the listener and the endpoint's
// admission are the front's, sidecar/front). The zero value of a field means its
// default (see Defaults).
type Config struct {
	Limits                               // what one client can make the server hold
	StateFile  string                    // where use_notebook bindings persist; "" keeps them in memory
	Notebooks  map[string]string         // configured bindings: name → path relative to the Jupyter root
	Publisher  Seam                      // default "subscribers"
	Gate       Seam                      // default "all"
	Extensions map[string]map[string]any // name → options; compiled-in extensions are on unless `enabled: false`
	Effective  any                       // the daemon's effective configuration, secrets masked, shown to extensions (YAML-encodable)
	Hooks      map[string]map[string]any // nil enables DefaultHooks; an empty map enables none

	NotebookTTL time.Duration // cache hint for notebook and cell reads; default 5 s
	OutputTTL   time.Duration // cache hint for output reads; default 60 s
	StopTimeout time.Duration // how long the extensions have to stop once Run's context is done; default 10 s
	Version     string        // reported in serverInfo; default DefaultVersion

	Logger     *slog.Logger          // the server's and its plugins' logs; nil: slog.Default()
	Registerer prometheus.Registerer // the server's, publisher's and hooks' metrics (servers on one feed the same series); nil: none
}

// Limits bound what one client can make the surface hold.
type Limits struct {
	MaxURIBytes          int // longest URI a subscription, listen filter or read may name; default 2 KiB
	MaxSubscriptions     int // resources/subscribe URIs per 2025-11-25 session; default 4096
	MaxSubscriptionBytes int // bytes of the URIs one 2025-11-25 session subscribes to, summed; default 256 KiB
	MaxListenURIs        int // resource URIs one subscriptions/listen filter may name; default 4096
	MaxNames             int // names bound with use_notebook at most; default 1000
	MaxPathBytes         int // longest notebook path a name is bound to; default 1024
	// MaxReadBytes bounds the memory the reads in flight build at once (a read of a
	// notebook or a cell holds its JSON until the answer is written; over stdio also the
	// answer, in buffers of up to 3 times its size: readCharge): past it a read waits for others to end; a read
	// larger than it is refused (ErrReadTooLarge). Default 256 MiB; hub mode gives each
	// user her hub.max_memory_per_user.
	MaxReadBytes int64
}

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	if c.Hooks == nil {
		c.Hooks = DefaultHooks()
	}
	c.NotebookTTL = cmp.Or(c.NotebookTTL, DefaultNotebookTTL)
	c.OutputTTL = cmp.Or(c.OutputTTL, DefaultOutputTTL)
	c.StopTimeout = cmp.Or(c.StopTimeout, DefaultStopTimeout)
	c.MaxURIBytes = cmp.Or(c.MaxURIBytes, DefaultMaxURIBytes)
	c.MaxSubscriptions = cmp.Or(c.MaxSubscriptions, DefaultMaxSubscriptions)
	c.MaxSubscriptionBytes = cmp.Or(c.MaxSubscriptionBytes, DefaultMaxSubscriptionBytes)
	c.MaxListenURIs = cmp.Or(c.MaxListenURIs, DefaultMaxListenURIs)
	c.MaxNames = cmp.Or(c.MaxNames, DefaultMaxNames)
	c.MaxPathBytes = cmp.Or(c.MaxPathBytes, DefaultMaxPathBytes)
	c.MaxReadBytes = cmp.Or(c.MaxReadBytes, DefaultMaxReadBytes)
	c.Version = cmp.Or(c.Version, DefaultVersion)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate reports what is wrong with c, each a *keyerr.KeyError (keyerr.ErrInvalid)
// naming its field in snake case (sidecar/config renames them to the daemon's keys); a
// zero field is refused, so call it on a Config as the daemon maps it, or after
// Defaults.
func (c Config) Validate() error {
	var errs []error
	for _, d := range []struct {
		key string
		d   time.Duration
	}{{"notebook_ttl", c.NotebookTTL}, {"output_ttl", c.OutputTTL}, {"stop_timeout", c.StopTimeout}} {
		if d.d <= 0 {
			errs = append(errs, keyerr.Invalid(d.key, "must be > 0, got %s", d.d))
		}
	}
	for _, n := range []struct {
		key string
		n   int
	}{
		{"max_uri_bytes", c.MaxURIBytes}, {"max_subscriptions", c.MaxSubscriptions},
		{"max_subscription_bytes", c.MaxSubscriptionBytes}, {"max_listen_uris", c.MaxListenURIs},
		{"max_names", c.MaxNames}, {"max_path_bytes", c.MaxPathBytes},
	} {
		if n.n < 1 {
			errs = append(errs, keyerr.Invalid(n.key, "%d: want at least 1", n.n))
		}
	}
	if c.MaxReadBytes < 1 {
		errs = append(errs, keyerr.Invalid("max_read_bytes", "%d: want at least 1", c.MaxReadBytes))
	}
	return errors.Join(errs...)
}
