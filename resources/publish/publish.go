// Package publish is where change URIs go: the publisher registry.
//
// The default publisher, "subscribers", is this server's own MCP subscribers
// (the resources package hands it in as Deps.Local). Built in besides are
// "webhook" (POST JSON {"uris": [...]} to a URL) and "pgnotify" (Postgres
// NOTIFY on a channel), for deployments where subscribers live elsewhere. A
// configured publisher replaces the default rather than adding to it.
package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/registry"
)

// Publisher delivers the URIs of changed resources.
type Publisher interface {
	// Publish hands over one change's URIs. It must not block on I/O; an
	// error means the change was not accepted (for example a full queue).
	Publish(ctx context.Context, uris []string) error
	// Run owns the publisher's goroutines and connections until ctx is done.
	Run(ctx context.Context) error
}

// Deps are what the server hands a publisher factory.
type Deps struct {
	Local      Publisher // this server's own subscribers
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: register no collectors
}

// Factory builds a publisher from its options.
type Factory func(options map[string]any, deps Deps) (Publisher, error)

// Default is the publisher used when the configuration names none.
const Default = "subscribers"

// ErrQueueFull is returned by Publish when a bounded queue drops the change.
var ErrQueueFull = errors.New("publisher queue full; change dropped")

var factories = registry.New[Factory]("publisher")

// Register makes a publisher available by name. It panics on a duplicate name.
func Register(name string, f Factory) { factories.Register(name, f) }

// Names returns the registered publisher names, sorted.
func Names() []string { return factories.Names() }

// New builds the publisher registered as name ("" means Default).
func New(name string, options map[string]any, deps Deps) (Publisher, error) {
	if name == "" {
		name = Default
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	f, err := factories.Lookup(name)
	if err != nil {
		return nil, err
	}
	p, err := f(options, deps)
	if err != nil {
		return nil, fmt.Errorf("build publisher %q: %w", name, err)
	}
	return p, nil
}

func init() {
	Register(Default, func(_ map[string]any, deps Deps) (Publisher, error) {
		if deps.Local == nil {
			return nil, errors.New("no local subscribers to publish to")
		}
		return deps.Local, nil
	})
	Register("webhook", newWebhook)
	Register("pgnotify", newPGNotify)
}

// queue is a bounded queue of changes delivered by one goroutine with retries
// and exponential backoff; it drops and counts when full or out of retries.
type queue struct {
	name    string
	ch      chan []string
	deliver func(ctx context.Context, uris []string) error
	retries int
	backoff time.Duration
	log     *slog.Logger

	delivered, dropped, failed prometheus.Counter
}

// queueOptions are the options every queued publisher accepts.
type queueOptions struct {
	size    int
	retries int
	backoff time.Duration
}

func readQueueOptions(o options) (queueOptions, error) {
	q := queueOptions{size: 1024, retries: 5, backoff: 100 * time.Millisecond}
	var err error
	if q.size, err = o.int("queue_size", q.size); err != nil {
		return q, err
	}
	if q.retries, err = o.int("max_retries", q.retries); err != nil {
		return q, err
	}
	if q.backoff, err = o.duration("backoff", q.backoff); err != nil {
		return q, err
	}
	if q.size < 1 || q.retries < 0 || q.backoff <= 0 {
		return q, errors.New("queue_size must be ≥ 1, max_retries ≥ 0 and backoff > 0")
	}
	return q, nil
}

func newQueue(name string, qo queueOptions, deps Deps, deliver func(context.Context, []string) error) (*queue, error) {
	counter := func(n, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "jupyter_mcp_sidecar", Subsystem: "publisher", Name: n, Help: help,
			ConstLabels: prometheus.Labels{"publisher": name},
		})
	}
	q := &queue{
		name: name, ch: make(chan []string, qo.size), deliver: deliver,
		retries: qo.retries, backoff: qo.backoff, log: deps.Logger,
		delivered: counter("delivered_total", "Changes the publisher delivered."),
		dropped:   counter("dropped_total", "Changes dropped because the publisher queue was full."),
		failed:    counter("failed_total", "Changes dropped after the publisher ran out of retries."),
	}
	if err := promreg.Register(deps.Registerer, q.delivered, q.dropped, q.failed); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return q, nil
}

// Publish enqueues uris, or drops them with ErrQueueFull.
func (q *queue) Publish(_ context.Context, uris []string) error {
	select {
	case q.ch <- slices.Clone(uris):
		return nil
	default:
		q.dropped.Inc()
		return ErrQueueFull
	}
}

// Run delivers queued changes until ctx is done.
func (q *queue) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case uris := <-q.ch:
			q.send(ctx, uris)
		}
	}
}

func (q *queue) send(ctx context.Context, uris []string) {
	wait := q.backoff
	for attempt := 0; ; attempt++ {
		err := q.deliver(ctx, uris)
		if err == nil {
			q.delivered.Inc()
			return
		}
		if attempt >= q.retries || ctx.Err() != nil {
			q.failed.Inc()
			q.log.Error("publisher gave up on a change", "publisher", q.name, "uris", uris, "attempts", attempt+1, "err", err)
			return
		}
		q.log.Warn("publisher delivery failed; retrying", "publisher", q.name, "attempt", attempt+1, "backoff", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			q.failed.Inc()
			return
		case <-t.C:
		}
		wait *= 2
	}
}

// options reads typed values out of a configuration options map.
type options map[string]any

func (o options) string(key string, required bool) (string, error) {
	v, ok := o[key]
	if !ok {
		if required {
			return "", fmt.Errorf("option %q is required", key)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok || (required && s == "") {
		return "", fmt.Errorf("option %q must be a non-empty string, got %T", key, v)
	}
	return s, nil
}

func (o options) int(key string, def int) (int, error) {
	v, ok := o[key]
	if !ok {
		return def, nil
	}
	switch n := v.(type) {
	case int:
		return n, nil
	case int64:
		return int(n), nil
	case float64:
		if n == float64(int(n)) {
			return int(n), nil
		}
	}
	return 0, fmt.Errorf("option %q must be an integer, got %v", key, v)
}

func (o options) duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := o[key]
	if !ok {
		return def, nil
	}
	switch d := v.(type) {
	case time.Duration:
		return d, nil
	case string:
		parsed, err := time.ParseDuration(d)
		if err != nil {
			return 0, fmt.Errorf("option %q: %w", key, err)
		}
		return parsed, nil
	}
	return 0, fmt.Errorf("option %q must be a duration string like \"250ms\", got %T", key, v)
}
