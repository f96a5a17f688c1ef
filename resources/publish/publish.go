// Package publish is where change events go: the event type and the publisher
// registry.
//
// Every debounced change of a notebook in the store becomes an Event (path, file
// id, room, commit time, what changed, and the URIs under every name bound in
// the sidecar). The default publisher, "subscribers", is this server's own MCP
// subscribers (the resources package hands them in as Deps.Local): it tells them
// the event's URIs and ignores events without any. Built in besides are
// "webhook" (POST the event's JSON to a URL), "pgnotify" (Postgres NOTIFY on
// a channel) and "sse" (a resumable Server-Sent Events stream any number of
// consumers read), for deployments where subscribers live elsewhere; they send every
// event (scope "all", the default) or only those with URIs (scope "bound"). A
// configured publisher replaces the default rather than adding to it.
package publish

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/registry"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
)

// Publisher delivers change events.
type Publisher interface {
	// Publish hands over one event. It must not block on I/O; an error means
	// the event was not accepted (for example a full queue).
	Publish(ctx context.Context, ev Event) error
	// Run owns the publisher's goroutines and connections until ctx is done.
	Run(ctx context.Context) error
	// Health is nil while the publisher delivers, and the last delivery error
	// while every attempt since its last success has failed: nobody is being
	// told (the sidecar's /readyz reports it).
	Health() error
}

// Subscribers are this server's own MCP subscribers, told the URIs of changed
// resources.
type Subscribers interface {
	// Publish tells every subscriber of any of uris; it never blocks.
	Publish(ctx context.Context, uris []string) error
	// Run owns the subscribers' goroutines until ctx is done.
	Run(ctx context.Context) error
}

// Deps are what the server hands a publisher factory.
type Deps struct {
	Local      Subscribers // this server's own subscribers
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
	name = cmp.Or(name, Default)
	deps.Logger = cmp.Or(deps.Logger, slog.Default())
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
	Register(Default, func(raw map[string]any, deps Deps) (Publisher, error) {
		if err := option.Decode(raw, &struct{}{}); err != nil {
			return nil, err
		}
		if deps.Local == nil {
			return nil, errors.New("no local subscribers to publish to")
		}
		return subscribers{deps.Local}, nil
	})
	Register("webhook", newWebhook)
	Register("pgnotify", newPGNotify)
	Register("sse", newSSE)
}

// subscribers is the default publisher: the server's own subscribers hear the
// URIs under bound names; an event without any concerns none of them.
type subscribers struct{ local Subscribers }

func (s subscribers) Publish(ctx context.Context, ev Event) error {
	if len(ev.URIs) == 0 {
		return nil
	}
	return s.local.Publish(ctx, ev.URIs)
}

func (s subscribers) Run(ctx context.Context) error { return s.local.Run(ctx) }

// Health is nil: the server's own subscribers are told in memory; a session
// that cannot take notifications is ended on its own.
func (subscribers) Health() error { return nil }

// The scopes of a queued publisher: every notebook's events, or only those of
// notebooks bound to a name in the sidecar (events with URIs).
const (
	ScopeAll   = "all"
	ScopeBound = "bound"
)

// queue is a bounded queue of events delivered in order by one goroutine with
// retries and exponential backoff; it drops and counts when full or out of
// retries. It numbers each path's events (Event.Seq) as they are accepted, so a
// dropped event leaves a gap that a receiver can see.
type queue struct {
	name    string
	ch      chan Event
	deliver func(ctx context.Context, ev Event) error
	retries int
	backoff time.Duration
	log     *slog.Logger

	mu sync.Mutex
	numbering
	failing error // the last delivery error while no attempt has succeeded since
	running bool  // Run has not returned
	counted bool  // the publisher's 1 is in the healthy gauge

	delivered, dropped, failed prometheus.Counter
	healthy                    prometheus.Gauge // shared by the publishers of this name on one Registerer
}

// queueOptions are the options every queued publisher accepts.
type queueOptions struct {
	Scope   string        `option:"scope"`
	Size    int           `option:"queue_size"`
	Retries int           `option:"max_retries"`
	Backoff time.Duration `option:"backoff"`
}

// defaultQueue is a queued publisher's options where its configuration sets none.
var defaultQueue = queueOptions{Scope: ScopeAll, Size: 1024, Retries: 5, Backoff: 100 * time.Millisecond}

// check refuses a scope or a bound out of range.
func (q queueOptions) check() error {
	if err := checkScope(q.Scope); err != nil {
		return err
	}
	if q.Size < 1 || q.Retries < 0 || q.Backoff <= 0 {
		return errors.New("queue_size must be ≥ 1, max_retries ≥ 0 and backoff > 0")
	}
	return nil
}

func newQueue(name string, qo queueOptions, deps Deps, deliver func(context.Context, Event) error) (*queue, error) {
	if err := qo.check(); err != nil {
		return nil, err
	}
	r := promreg.On(deps.Registerer)
	q := &queue{
		name: name, ch: make(chan Event, qo.Size), deliver: deliver, retries: qo.Retries, backoff: qo.Backoff, log: deps.Logger,
		delivered: promreg.Register(r, publisherCounter(name, "delivered_total", "Events the publisher delivered.")),
		dropped:   promreg.Register(r, publisherCounter(name, "dropped_total", "Events dropped because the publisher queue was full.")),
		failed:    promreg.Register(r, publisherCounter(name, "failed_total", "Events dropped after the publisher ran out of retries.")),
		healthy: promreg.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: promreg.Namespace, Subsystem: "publisher", Name: "healthy", ConstLabels: prometheus.Labels{"publisher": name},
			Help: "1 while the publisher delivers, 0 while every attempt since its last success has failed (in hub mode, the users' publishers delivering)."})),
	}
	q.numbering = newNumbering(r, name, qo.Scope)
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return q, nil
}

// numbering is what every publisher does to an event first: it skips one outside its
// scope, counting it, and numbers the others per notebook path. Its owner locks it.
type numbering struct {
	scope   string
	skipped prometheus.Counter
	seq     map[string]uint64 // last number given per path
}

func newNumbering(r *promreg.Registrar, publisher, scope string) numbering {
	return numbering{scope: scope, seq: map[string]uint64{},
		skipped: promreg.Register(r, publisherCounter(publisher, "skipped_total", "Events outside the publisher's scope (scope: bound, no name bound)."))}
}

// checkScope refuses a scope that is neither ScopeAll nor ScopeBound.
func checkScope(scope string) error {
	if scope != ScopeAll && scope != ScopeBound {
		return fmt.Errorf("option \"scope\" must be %q or %q, got %q", ScopeAll, ScopeBound, scope)
	}
	return nil
}

// number gives ev the next number of its path, or counts it skipped and reports false
// when it is outside the scope.
func (n *numbering) number(ev *Event) bool {
	if n.scope == ScopeBound && len(ev.URIs) == 0 {
		n.skipped.Inc()
		return false
	}
	n.seq[ev.Path]++
	ev.Seq = n.seq[ev.Path]
	return true
}

// publisherCounter is the counter publisher_<name> of the publisher named publisher.
func publisherCounter(publisher, name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "publisher", Name: name, ConstLabels: prometheus.Labels{"publisher": publisher},
		Help: help})
}

// countLocked keeps the publisher's share of the healthy gauge: 1 while it runs and
// delivers, else 0; q.mu is held.
func (q *queue) countLocked() {
	healthy := q.running && q.failing == nil
	switch {
	case healthy && !q.counted:
		q.healthy.Inc()
	case !healthy && q.counted:
		q.healthy.Dec()
	}
	q.counted = healthy
}

// Publish numbers ev and enqueues it, or drops it with ErrQueueFull; an event
// outside the scope is skipped.
func (q *queue) Publish(_ context.Context, ev Event) error {
	// Numbered and enqueued under one lock, so numbers follow the queue's order.
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.number(&ev) {
		return nil
	}
	select {
	case q.ch <- ev:
		return nil
	default:
		q.dropped.Inc()
		return ErrQueueFull
	}
}

// Run delivers queued changes until ctx is done.
func (q *queue) Run(ctx context.Context) error {
	q.setRunning(true)
	defer q.setRunning(false)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-q.ch:
			q.send(ctx, ev)
		}
	}
}

func (q *queue) setRunning(running bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.running = running
	q.countLocked()
}

// Health is the last delivery error while no attempt has succeeded since.
func (q *queue) Health() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.failing != nil {
		return fmt.Errorf("publisher %s: %w", q.name, q.failing)
	}
	return nil
}

func (q *queue) send(ctx context.Context, ev Event) {
	wait := q.backoff
	for attempt := 0; ; attempt++ {
		err := q.deliver(ctx, ev)
		q.mu.Lock()
		q.failing = err
		q.countLocked()
		q.mu.Unlock()
		if err == nil {
			q.delivered.Inc()
			return
		}
		if attempt >= q.retries || ctx.Err() != nil {
			q.failed.Inc()
			q.log.Error("publisher gave up on an event", "publisher", q.name, logkey.Path, ev.Path, "seq", ev.Seq, "attempts", attempt+1, "err", err)
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
