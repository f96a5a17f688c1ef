// Package hooks observes every tool call and resource read: before and after,
// with the duration and the error. Hooks are registered by name in init() and
// enabled by the configuration; built in are "audit" (slog) and "metrics"
// (Prometheus). A hook's failure or panic never fails the call it observes.
package hooks

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/registry"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
)

// Kind says what a Call is.
type Kind string

// The kinds of observed calls.
const (
	KindTool     Kind = "tool"
	KindResource Kind = "resource"
)

// Call describes one observed call.
type Call struct {
	Kind     Kind   // tool or resource
	Name     string // tool name, or resource URI
	Template string // resource URI template ("" for tools); bounded, fit for labels
	Session  string // client session id, "" when the transport has none
}

// Hook observes calls. Implementations must be safe for concurrent use.
type Hook interface {
	// Before runs before the call.
	Before(ctx context.Context, c Call)
	// After runs after the call with its duration and error.
	After(ctx context.Context, c Call, d time.Duration, err error)
}

// Deps are what the server hands a hook factory.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: register no collectors
}

// Factory builds a hook from its options.
type Factory func(options map[string]any, deps Deps) (Hook, error)

var factories = registry.New[Factory]("hook")

// Register makes a hook available by name. It panics on a duplicate name.
func Register(name string, f Factory) { factories.Register(name, f) }

// Names returns the registered hook names, sorted.
func Names() []string { return factories.Names() }

// Chain runs the enabled hooks in name order around a call.
type Chain struct {
	names []string
	hooks []Hook
	log   *slog.Logger
}

// Build builds the hooks named in enabled (name → options), in name order.
// An unknown name or a factory error is returned naming the hook.
func Build(enabled map[string]map[string]any, deps Deps) (*Chain, error) {
	c := &Chain{log: cmp.Or(deps.Logger, slog.Default())}
	for _, n := range slices.Sorted(maps.Keys(enabled)) {
		f, err := factories.Lookup(n)
		if err != nil {
			return nil, err
		}
		h, err := f(enabled[n], deps)
		if err != nil {
			return nil, fmt.Errorf("build hook %q: %w", n, err)
		}
		c.names = append(c.names, n)
		c.hooks = append(c.hooks, h)
	}
	return c, nil
}

// Observe runs fn between the hooks' Before and After. fn's error is returned
// unchanged; hook panics are recovered and logged.
func (c *Chain) Observe(ctx context.Context, call Call, fn func(context.Context) error) error {
	for i, h := range c.hooks {
		c.safely(c.names[i], call, func() { h.Before(ctx, call) })
	}
	start := time.Now()
	err := fn(ctx)
	d := time.Since(start)
	for i, h := range c.hooks {
		c.safely(c.names[i], call, func() { h.After(ctx, call, d, err) })
	}
	return err
}

func (c *Chain) safely(name string, call Call, f func()) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("hook panicked; call unaffected", "hook", name, "kind", call.Kind, "name", call.Name, "panic", r)
		}
	}()
	f()
}

func init() {
	Register("audit", newAudit)
	Register("metrics", newMetrics)
}

// audit logs every call with slog.
type audit struct {
	log   *slog.Logger
	level slog.Level
}

func newAudit(options map[string]any, deps Deps) (Hook, error) {
	a := audit{log: cmp.Or(deps.Logger, slog.Default()), level: slog.LevelInfo}
	var o struct {
		Level string `option:"level"`
	}
	if err := option.Decode(options, &o); err != nil {
		return nil, err
	}
	if o.Level != "" {
		if err := a.level.UnmarshalText([]byte(o.Level)); err != nil {
			return nil, fmt.Errorf(`option "level": %w`, err)
		}
	}
	return a, nil
}

func (a audit) Before(context.Context, Call) {}

func (a audit) After(ctx context.Context, c Call, d time.Duration, err error) {
	attrs := []any{"kind", string(c.Kind), "name", c.Name, "session", c.Session, "duration", d}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	a.log.Log(ctx, a.level, "mcp call", attrs...)
}

// metrics counts calls and errors and observes durations, labelled by kind and
// by tool name or URI template (bounded label values).
type metrics struct {
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(options map[string]any, deps Deps) (Hook, error) {
	if err := option.Decode(options, &struct{}{}); err != nil {
		return nil, err
	}
	r := promreg.On(deps.Registerer)
	m := metrics{
		calls: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "calls_total",
			Help: "Tool calls and resource reads served."}, []string{"kind", "name"})),
		errors: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "call_errors_total",
			Help: "Tool calls and resource reads that returned an error."}, []string{"kind", "name"})),
		duration: promreg.Register(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "call_duration_seconds",
			Help: "Duration of tool calls and resource reads.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"kind", "name"})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return m, nil
}

func (m metrics) Before(context.Context, Call) {}

func (m metrics) After(_ context.Context, c Call, d time.Duration, err error) {
	label := c.Name
	if c.Kind == KindResource {
		label = c.Template
	}
	m.calls.WithLabelValues(string(c.Kind), label).Inc()
	if err != nil {
		m.errors.WithLabelValues(string(c.Kind), label).Inc()
	}
	m.duration.WithLabelValues(string(c.Kind), label).Observe(d.Seconds())
}
