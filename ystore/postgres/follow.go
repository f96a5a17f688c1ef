package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/internal/tailstatus"
)

// DefaultLoadConcurrency is how many owners a Follower loads at once when
// FollowerConfig.LoadConcurrency is zero.
const DefaultLoadConcurrency = 4

// FollowerConfig configures a Follower.
type FollowerConfig struct {
	// Store is the shared store; its Owner must be empty. The Follower's reads, wake-ups
	// and reconnects count on its Registerer (postgres_read_seconds, _wakeups_total,
	// _reconnects_total, _room_rebuilds_total, shared with the owners' Tailers on it);
	// its status series are the owners' Tailers' (Follower.Tailer).
	Store Config
	// LoadConcurrency bounds the owners loaded at once, each load on a short connection
	// of its own; default DefaultLoadConcurrency.
	LoadConcurrency int
}

// Follower follows the shared store once for every owner being served (hub mode): one
// connection listens and reads the rows of every room as they are committed, and hands
// each room's events to the Tailers of its owner (Follower.Tailer) that are running;
// the rooms of other owners are not decoded. An owner's Tailer loads that owner's rooms
// on a short connection of its own and then relays what the Follower hears, so the
// connections held are one plus the loads in progress, however many owners are active.
type Follower struct {
	tail  *Tailer
	loads chan struct{} // a token per load in progress
	ready chan struct{} // closed after the first read: the shared cursor exists
	once  sync.Once

	mu    sync.Mutex
	feeds map[string]map[*ownerTailer]struct{} // owner → running Tailers
}

// NewFollower validates cfg and returns a Follower; it does no I/O.
func NewFollower(cfg FollowerConfig) (*Follower, error) {
	if cfg.Store.Owner != "" {
		return nil, fmt.Errorf("a follower follows every owner's rooms, not only %q's: %w", cfg.Store.Owner, ErrConfig)
	}
	if cfg.LoadConcurrency < 0 {
		return nil, fmt.Errorf("load concurrency %d: %w", cfg.LoadConcurrency, ErrConfig)
	}
	cfg.LoadConcurrency = cmp.Or(cfg.LoadConcurrency, DefaultLoadConcurrency)
	t, err := newTailer(cfg.Store)
	if err != nil {
		return nil, err
	}
	f := &Follower{tail: t, loads: make(chan struct{}, cfg.LoadConcurrency), ready: make(chan struct{}),
		feeds: map[string]map[*ownerTailer]struct{}{}}
	t.follow = &following{read: func() { f.once.Do(func() { close(f.ready) }) }}
	return f, nil
}

// Run follows the store until ctx is done (it then returns nil); connection failures
// are retried as a Tailer's are, the cursor carrying over.
func (f *Follower) Run(ctx context.Context) error {
	return f.tail.Run(ctx, f.dispatch)
}

// Status reports the shared connection's reachability, last error and lag.
func (f *Follower) Status() ystore.Status { return f.tail.Status() }

// dispatch hands each event to the running Tailers of its room's owner; a removed room,
// whose owner is gone with it, to every running Tailer (one that never had it ignores it).
func (f *Follower) dispatch(_ context.Context, events []ystore.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range events {
		if e.Kind == ystore.EventRemoved {
			for _, feeds := range f.feeds {
				for o := range feeds {
					o.push(e)
				}
			}
			continue
		}
		for o := range f.feeds[e.Owner] {
			o.push(e)
		}
	}
	return nil
}

// Tailer returns the Tailer of cfg.Owner's rooms on this Follower: it loads them and
// then delivers what the Follower hears of them. cfg names the same store as the
// Follower's; its metrics are registered on cfg.Registerer, its status series counting
// the owner's Status. No I/O.
func (f *Follower) Tailer(cfg Config) (ystore.Tailer, error) {
	if cfg.Owner == "" {
		return nil, fmt.Errorf("an owner's tailer needs the owner: %w", ErrConfig)
	}
	load, err := newTailer(cfg)
	if err != nil {
		return nil, err
	}
	o := &ownerTailer{f: f, load: load, wake: make(chan struct{}, 1), first: make(chan struct{})}
	if o.untrack, err = tailstatus.Track(cfg.Registerer, subsystem, o.Status); err != nil {
		return nil, err
	}
	return o, nil
}

// ownerTailer is one owner's Tailer on a Follower.
type ownerTailer struct {
	f    *Follower
	load *Tailer // the owner's rooms: Load, the owner's status and metrics

	mu     sync.Mutex
	queue  []ystore.Event
	loaded bool            // the rooms were loaded: the Follower's reads count as this owner's
	rooms  map[string]bool // the rooms delivered and not removed: the owner's
	wake   chan struct{}

	first     chan struct{} // FirstRead
	firstOnce sync.Once

	untrack func() // the status series stop counting this owner's tailer
}

// Close takes the owner's tailer out of the status series (its rows stay counted); call
// it once Run has returned.
func (o *ownerTailer) Close() { o.untrack() }

// FirstRead is closed once the owner's rooms have been loaded and delivered, or their
// load failed, or the Follower's first read failed: what Status then says is the
// owner's first answer.
func (o *ownerTailer) FirstRead() <-chan struct{} { return o.first }

// read marks the first read finished.
func (o *ownerTailer) read() { o.firstOnce.Do(func() { close(o.first) }) }

var (
	_ ystore.Tailer   = (*ownerTailer)(nil)
	_ ystore.Reloader = (*ownerTailer)(nil)
)

// Reload asks the Follower to deliver room again, whole, as a Reset with its next read
// (woken now), which reads that room's rows only; the Reset reaches this owner's
// Tailers in commit order with the room's other events. A room this Tailer has not
// delivered (another owner's, or none) is ignored: an owner reloads only its own.
func (o *ownerTailer) Reload(room string) {
	o.mu.Lock()
	mine := o.rooms[room]
	o.mu.Unlock()
	if mine {
		o.f.tail.Reload(room)
	}
}

// push queues e; the Follower holds its lock.
func (o *ownerTailer) push(e ystore.Event) {
	o.mu.Lock()
	o.queue = append(o.queue, e)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take empties the queue.
func (o *ownerTailer) take() []ystore.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := o.queue
	o.queue = nil
	return q
}

var _ ystore.StreamLoader = (*ownerTailer)(nil)

// Load reads the owner's rooms once, as Reset events in room order.
func (o *ownerTailer) Load(ctx context.Context) ([]ystore.Event, error) {
	return loadWith(ctx, o.LoadStream)
}

// LoadStream reads the owner's rooms once, as Tailer.LoadStream does, once one of the
// Follower's LoadConcurrency loads is free.
func (o *ownerTailer) LoadStream(ctx context.Context, sink func(context.Context, []ystore.Event) error) error {
	select {
	case o.f.loads <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-o.f.loads }()
	return o.load.LoadStream(ctx, sink)
}

// Status is the owner's: the load's and the Follower's combined once the owner's rooms
// are loaded (unreachable while either is; read whenever the Follower reads), and
// before that the Follower's failure if it is failing, so that a caller waiting for the
// first read hears of it.
func (o *ownerTailer) Status() ystore.Status {
	st, shared := o.load.Status(), o.f.Status()
	o.mu.Lock()
	loaded := o.loaded
	o.mu.Unlock()
	if loaded || !shared.Reachable {
		st.Reachable = st.Reachable && shared.Reachable
		if shared.LastErrorAt.After(st.LastErrorAt) {
			st.LastError, st.LastErrorAt = shared.LastError, shared.LastErrorAt
		}
	}
	if loaded && shared.LastReadAt.After(st.LastReadAt) {
		st.LastReadAt = shared.LastReadAt
	}
	return st
}

// Run registers with the Follower, waits for its cursor, loads the owner's rooms (a
// Reset each) and then delivers what the Follower hears of them, until ctx is done (it
// then returns nil) or sink fails (an error wrapping ystore.ErrSink). Everything the
// Follower heard before a load began is in the load; what it hears during the load may
// be too, and is delivered again: Yjs updates apply idempotently.
func (o *ownerTailer) Run(ctx context.Context, sink func(context.Context, []ystore.Event) error) error {
	owner, limit := o.load.cfg.Owner, o.load.cfg.followLimit()
	o.f.mu.Lock()
	if o.f.feeds[owner] == nil {
		o.f.feeds[owner] = map[*ownerTailer]struct{}{}
	}
	o.f.feeds[owner][o] = struct{}{}
	o.f.mu.Unlock()
	defer func() {
		o.f.mu.Lock()
		delete(o.f.feeds[owner], o)
		if len(o.f.feeds[owner]) == 0 {
			delete(o.f.feeds, owner)
		}
		o.f.mu.Unlock()
	}()
	// Waiting for the Follower's cursor: its first read failing is the owner's first
	// answer too (Status reports it); the owner's rooms still load once it reads.
	followerRead := o.f.tail.FirstRead()
	for waiting := true; waiting; {
		select {
		case <-o.f.ready:
			waiting = false
		case <-followerRead:
			if !o.f.Status().Reachable {
				o.read()
			}
			followerRead = nil
		case <-ctx.Done():
			return nil
		}
	}
	o.mu.Lock()
	o.rooms = map[string]bool{} // those followed (bound.go)
	o.mu.Unlock()
	over := false
	for attempt := 0; ; attempt++ {
		o.take() // heard before the load's snapshot: in the load
		// The rooms are streamed to sink as the load reads them.
		err := o.LoadStream(ctx, func(ctx context.Context, events []ystore.Event) error {
			if err := ystore.Deliver(ctx, sink, events); err != nil {
				return err
			}
			o.delivered(events)
			return nil
		})
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ystore.ErrSink) {
			return err
		}
		if err == nil {
			o.mu.Lock()
			over = limit > 0 && len(o.rooms) >= limit
			o.loaded = true
			o.mu.Unlock()
			o.read()
			break
		}
		o.read()
		o.load.m.retries.Inc()
		if o.load.cfg.pause(ctx, attempt, "postgres y-store unreachable, retrying the owner's load", "err", err) != nil {
			return nil
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-o.wake:
		}
		events := o.follow(o.take(), &over)
		if len(events) == 0 {
			continue
		}
		o.load.status.Pending(events)
		if err := ystore.Deliver(ctx, sink, events); err != nil {
			return err
		}
		o.load.status.Read(events, o.delivered(events))
	}
}

// delivered tracks the rooms events leave delivered and returns how many there are.
func (o *ownerTailer) delivered(events []ystore.Event) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	applyRooms(o.rooms, events)
	return len(o.rooms)
}
