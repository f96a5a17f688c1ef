// Package debounce coalesces bursts of changes per key: a burst is flushed once it has
// been quiet for a while, and never later than a ceiling after its first change, so a
// document edited without pause still announces itself at a steady rate. Both count
// from when a change happened (its commit time) when it is known and recent, so the
// time it took to read the change is not added to the quiet period.
package debounce

import (
	"context"
	"sync"
	"time"
)

// The sidecar's defaults for a notebook's changes (notifications.debounce and
// notifications.max_delay): the quiet period and the ceiling.
const (
	DefaultQuiet   = 250 * time.Millisecond
	DefaultCeiling = 2 * time.Second
)

// Debouncer collects values per key and flushes each burst once, in order of firing.
type Debouncer[K comparable, V any] struct {
	quiet, ceiling time.Duration
	merge          func(old, add V) V
	flush          func(K, V)

	mu      sync.Mutex
	pending map[K]*burst[V]
	fired   chan firing[K, V]
	done    chan struct{} // closed when Run returns
	stopped sync.Once
}

// firing is a burst to flush; direct, one Add of a debouncer without a quiet period,
// handed over without a timer.
type firing[K comparable, V any] struct {
	key    K
	b      *burst[V]
	direct bool
}

type burst[V any] struct {
	value       V
	first, last time.Time // when the burst's first and latest changes happened
	timer       *time.Timer
}

// New returns a debouncer that flushes a key quiet after its last Add and at most ceiling
// after the first Add of the burst. A quiet of zero flushes every Add on its own.
// merge folds a new value into the pending one; flush receives the merged burst.
func New[K comparable, V any](quiet, ceiling time.Duration, merge func(old, add V) V, flush func(K, V)) *Debouncer[K, V] {
	if ceiling < quiet {
		ceiling = quiet
	}
	return &Debouncer[K, V]{
		quiet:   quiet,
		ceiling: ceiling,
		merge:   merge,
		flush:   flush,
		pending: make(map[K]*burst[V]),
		fired:   make(chan firing[K, V], 64),
		done:    make(chan struct{}),
	}
}

// Add records v for key, a change that happened at, and (re)arms the key's timer: the
// burst is flushed quiet after its latest change and at most ceiling after its first.
// An at that is zero, later than now or a quiet period or more before now (a late read,
// a writer's clock apart) counts as now.
//
// Without a quiet period every Add is flushed on its own, in the order of the Adds: it
// goes to Run at once, with no timer, no pending burst and no lock (once Run has
// returned, it is dropped).
func (d *Debouncer[K, V]) Add(key K, v V, at time.Time) {
	if d.quiet <= 0 {
		select {
		case d.fired <- firing[K, V]{key: key, b: &burst[V]{value: v}, direct: true}:
		case <-d.done:
		}
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if at.IsZero() || at.After(now) || now.Sub(at) >= d.quiet {
		at = now
	}
	b, ok := d.pending[key]
	if !ok {
		b = &burst[V]{value: v, first: at, last: at}
		d.pending[key] = b
		b.timer = time.AfterFunc(d.quiet-now.Sub(at), func() { d.fire(key, b) })
		return
	}
	b.value = d.merge(b.value, v)
	if at.After(b.last) {
		b.last = at
	}
	wait := d.quiet - now.Sub(b.last)
	if deadline := b.first.Add(d.ceiling); now.Add(wait).After(deadline) {
		wait = deadline.Sub(now)
	}
	// A timer that already fired is waiting in fire for the lock: Reset then re-arms a
	// second, harmless firing that finds the burst gone.
	b.timer.Reset(wait)
}

// Pending reports how many keys have an unflushed burst.
func (d *Debouncer[K, V]) Pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pending)
}

func (d *Debouncer[K, V]) fire(key K, b *burst[V]) {
	d.mu.Lock()
	cur, ok := d.pending[key]
	if !ok || cur != b {
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	select {
	case d.fired <- firing[K, V]{key: key, b: b}:
	case <-d.done:
	}
}

// Run delivers flushed bursts until ctx is done. Flushes run one at a time, on Run's
// goroutine, so a slow flush delays the others rather than reordering them.
func (d *Debouncer[K, V]) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			d.stop()
			return nil
		case f := <-d.fired:
			if f.direct {
				d.flush(f.key, f.b.value)
				continue
			}
			d.mu.Lock()
			ok := d.pending[f.key] == f.b
			if ok {
				delete(d.pending, f.key)
				f.b.timer.Stop()
			}
			d.mu.Unlock()
			if ok {
				d.flush(f.key, f.b.value)
			}
		}
	}
}

func (d *Debouncer[K, V]) stop() {
	d.stopped.Do(func() { close(d.done) })
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, b := range d.pending {
		b.timer.Stop()
		delete(d.pending, k)
	}
}
