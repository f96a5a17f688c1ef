package publishers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
)

// ErrQueueFull is returned by Publish when a bounded queue drops the change.
var ErrQueueFull = errors.New("publisher queue full; change dropped")

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
	ch      chan publish.Event
	deliver func(ctx context.Context, ev publish.Event) error
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

func newQueue(name string, qo queueOptions, deps publish.Deps, deliver func(context.Context, publish.Event) error) (*queue, error) {
	if err := qo.check(); err != nil {
		return nil, err
	}
	r := promreg.On(deps.Registerer)
	q := &queue{
		name: name, ch: make(chan publish.Event, qo.Size), deliver: deliver, retries: qo.Retries, backoff: qo.Backoff, log: deps.Logger,
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
func (n *numbering) number(ev *publish.Event) bool {
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
func (q *queue) Publish(_ context.Context, ev publish.Event) error {
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

func (q *queue) send(ctx context.Context, ev publish.Event) {
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
