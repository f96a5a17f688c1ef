package transport

import (
	"runtime"
	"slices"
	"sync"
	"time"
)

// writers run the outboxes' batches on a few goroutines, one per core, rather than
// on a goroutine per outbox: a change told to a thousand subscribers then costs a
// thousand writes, not also a thousand goroutine wake-ups and parks and the thread
// hand-offs of a thousand runnable writers (about a tenth of the sidecar's CPU per
// edit at 1,000 streams, docs/BENCHMARKS.md). A write that blocks (a client that
// stopped reading) must not hold up the others: a worker in one write for longer than
// stuckAfter is no longer counted, and another is started in its place if outboxes
// wait; it ends once its write returns.
type writers struct {
	max        int           // workers taking from the queue at once
	stuckAfter time.Duration // a write this long no longer holds a worker's place

	mu      sync.Mutex
	queue   []*outbox // waiting for a worker, in order
	head    int       // queue[head:] waits
	counted []*worker // workers not in one write for longer than stuckAfter
	timer   *time.Timer
	timing  bool // the timer is armed
}

// worker is one goroutine of writers; since is when its write began, zero between
// writes.
type worker struct {
	since   time.Time
	dropped bool // written off as stuck: ends after its write
}

// defaultStuckAfter is how long a write may last before its worker is replaced:
// a write to a reading client takes microseconds.
const defaultStuckAfter = 2 * time.Millisecond

// newWriters returns writers with one worker per core, at least two.
func newWriters() *writers {
	return &writers{max: max(2, runtime.GOMAXPROCS(0)), stuckAfter: defaultStuckAfter}
}

// submit queues o for a worker (o.queued is set); it never blocks.
func (w *writers) submit(o *outbox) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.head > 0 && w.head >= len(w.queue)/2 { // what was taken is dropped, so the queue stays bounded by the outboxes
		n := copy(w.queue, w.queue[w.head:])
		clear(w.queue[n:])
		w.queue, w.head = w.queue[:n], 0
	}
	w.queue = append(w.queue, o)
	if len(w.counted) < w.max {
		w.startLocked()
	}
}

// startLocked starts a counted worker and, with it, the check for stuck writes.
func (w *writers) startLocked() {
	wk := &worker{}
	w.counted = append(w.counted, wk)
	if !w.timing {
		w.timing = true
		if w.timer == nil {
			w.timer = time.AfterFunc(w.stuckAfter, w.check)
		} else {
			w.timer.Reset(w.stuckAfter)
		}
	}
	go w.work(wk)
}

// next is the outbox wk writes next, nil when none waits or wk was written off, in
// which case wk ends.
func (w *writers) next(wk *worker) *outbox {
	w.mu.Lock()
	defer w.mu.Unlock()
	wk.since = time.Time{}
	if wk.dropped {
		return nil
	}
	if w.head == len(w.queue) {
		clear(w.queue)
		w.queue, w.head = w.queue[:0], 0
		w.counted = slices.DeleteFunc(w.counted, func(x *worker) bool { return x == wk })
		return nil
	}
	o := w.queue[w.head]
	w.queue[w.head] = nil
	w.head++
	wk.since = time.Now()
	return o
}

// work writes outboxes' batches until none waits.
func (w *writers) work(wk *worker) {
	for o := w.next(wk); o != nil; o = w.next(wk) {
		o.drain()
	}
}

// check writes off the counted workers stuck in one write and starts others in
// their place while outboxes wait; it runs every stuckAfter while workers run.
func (w *writers) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	w.counted = slices.DeleteFunc(w.counted, func(wk *worker) bool {
		wk.dropped = !wk.since.IsZero() && now.Sub(wk.since) >= w.stuckAfter
		return wk.dropped
	})
	for len(w.counted) < w.max && w.head < len(w.queue) {
		w.startLocked()
	}
	if w.timing = len(w.counted) > 0; w.timing {
		w.timer.Reset(w.stuckAfter)
	}
}
