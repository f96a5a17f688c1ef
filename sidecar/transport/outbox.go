package transport

import (
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

// This file holds the hand-off rules of change notifications, which mcp-go cannot
// keep itself: the surface hands each subscriber's notifications to its outbox (a
// resources.Sink), and a worker of the transport's writers (writers.go) writes them to
// the client, a batch at a time.
//   - Repeated changes of a URI coalesce while they wait, so what waits is bounded by
//     the subscriber's subscriptions.
//   - A 2025-11-25 session's notifications go out on its GET stream only, never while
//     one of its POSTs is in flight (an mcp-go workaround, PR #969: the SDK's per-POST forwarder
//     could take one as the POST ended and drop it); a POST waits for the batch being
//     written to end first.
//   - A listen stream writes nothing before the SDK has written its acknowledgement.
//   - A GET stream that supersedes one a write is stuck on cuts the old one (its
//     write fails) rather than wait for it (streamOut.attach).
//   - A client that stops taking notifications (its batch stuck in a write while
//     more wait for SendTimeout) is given up on: what waits is dropped, counted, and
//     its session or stream ended, so the client learns it (404, or a listen request
//     that ends) instead of waiting on a stream that no longer delivers.

// outbox is one subscriber's delivery: a 2025-11-25 session's or a listen stream's.
type outbox struct {
	era     string
	pool    *writers                        // the workers that write its batches, one batch at a time
	write   func(batch []resources.Message) // writes a batch to the client; one worker at a time
	end     func()                          // ends the session or stream given up on
	m       *deliveryMetrics
	log     *slog.Logger
	timeout time.Duration // SendTimeout

	mu       sync.Mutex
	pending  []resources.Message // waiting, one per URI
	index    map[string]struct{} // the URIs in pending, once they are too many to scan
	batch    []resources.Message // being written; reused
	held     bool                // listen stream before its acknowledgement
	gated    bool                // HTTP 2025-11-25: only while a GET stream is open and no POST in flight
	streams  int                 // open GET streams (gated)
	posts    int                 // POSTs in flight (gated)
	queued   bool                // waits in the pool's queue
	writing  bool                // a worker is writing batch
	inflight sync.WaitGroup      // the batch being written, for stopWait
	written  chan struct{}       // closed when the batch being written is done; nil: nobody waits
	stalled  time.Time           // since when notifications wait for the batch being written; zero when none is
	timer    *time.Timer         // checks a stall after timeout
	stopped  bool                // ended or given up on: takes nothing more
}

// newOutbox returns an outbox whose batches pool writes with write.
func newOutbox(era string, pool *writers, write func([]resources.Message), end func(), m *deliveryMetrics, log *slog.Logger, timeout time.Duration) *outbox {
	return &outbox{era: era, pool: pool, write: write, end: end, m: m, log: log, timeout: timeout}
}

// Notify queues m unless a notification of its URI already waits; it never blocks.
func (o *outbox) Notify(m resources.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return
	}
	if o.index != nil {
		if _, ok := o.index[m.Note.URI]; ok {
			return
		}
		o.index[m.Note.URI] = struct{}{}
	} else {
		for _, p := range o.pending {
			if p.Note.URI == m.Note.URI {
				return
			}
		}
		if len(o.pending) == scanPending {
			o.index = make(map[string]struct{}, 2*scanPending)
			for _, p := range o.pending {
				o.index[p.Note.URI] = struct{}{}
			}
			o.index[m.Note.URI] = struct{}{}
		}
	}
	o.pending = append(o.pending, m)
	o.kickLocked()
}

// scanPending is how many waiting notifications are scanned for a URI before an index
// of them is kept: a client that subscribed thousands of URIs and stopped reading costs
// a lookup per change, not a scan.
const scanPending = 16

// open reports whether the rules let what waits be written; o.mu is held.
func (o *outbox) open() bool {
	return !o.held && (!o.gated || o.streams > 0 && o.posts == 0)
}

// kickLocked queues the outbox for a worker if what waits may be written, and starts
// counting a stall if a worker is busy with its batch; o.mu is held.
func (o *outbox) kickLocked() {
	if o.stopped || len(o.pending) == 0 || !o.open() {
		return
	}
	if !o.writing {
		if !o.queued {
			o.queued = true
			o.pool.submit(o)
		}
		return
	}
	if o.stalled.IsZero() {
		o.stalled = time.Now()
		if o.timer == nil {
			o.timer = time.AfterFunc(o.timeout, o.checkStall)
		} else {
			o.timer.Reset(o.timeout)
		}
	}
}

// checkStall gives up on a client whose writer has not taken what waits for the send
// timeout.
func (o *outbox) checkStall() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped || !o.writing || o.stalled.IsZero() {
		return
	}
	if waited := time.Since(o.stalled); waited < o.timeout {
		o.timer.Reset(o.timeout - waited)
		return
	}
	o.m.dropped.WithLabelValues(o.era).Add(float64(len(o.pending)))
	o.m.ended.WithLabelValues(o.era).Inc()
	o.log.Warn("client not taking notifications; ending it", "era", o.era, "dropped", len(o.pending), "blocked", time.Since(o.stalled))
	o.stopped, o.pending, o.index = true, nil, nil
	if o.end != nil {
		go o.end()
	}
}

// drain writes what waits, as one batch; a worker of the pool calls it for the
// queued outbox.
func (o *outbox) drain() {
	o.mu.Lock()
	o.queued = false
	if o.stopped || len(o.pending) == 0 || !o.open() {
		o.mu.Unlock()
		return
	}
	o.batch, o.pending, o.index = o.pending, o.batch[:0], nil
	o.writing, o.stalled = true, time.Time{}
	o.inflight.Add(1)
	batch := o.batch
	o.mu.Unlock()

	o.write(batch)
	o.m.sent[o.era].Add(float64(len(batch)))

	o.mu.Lock()
	clear(batch) // the notes are not kept alive by a reused slice
	o.writing, o.stalled = false, time.Time{}
	if o.written != nil {
		close(o.written)
		o.written = nil
	}
	o.kickLocked()
	o.mu.Unlock()
	o.inflight.Done()
}

// stop refuses what comes after; a batch being written is not waited for.
func (o *outbox) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopped, o.pending, o.index = true, nil, nil
	if o.timer != nil {
		o.timer.Stop()
	}
}

// stopWait stops the outbox and returns once the batch being written, if any, is:
// nothing is written after it returns.
func (o *outbox) stopWait() {
	o.stop()
	o.inflight.Wait()
}

// release lets a held listen stream write what waits and what comes next.
func (o *outbox) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held {
		o.held = false
		o.kickLocked()
	}
}

// streamOpened and streamClosed count a 2025-11-25 session's open GET streams.
func (o *outbox) streamOpened() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.streams++
	o.kickLocked()
}

func (o *outbox) streamClosed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.streams--
}

// postStarted marks a POST of the session in flight, which holds the notifications
// back, and waits (at most maxWait) for a batch being written to be done.
func (o *outbox) postStarted(maxWait time.Duration) {
	o.mu.Lock()
	o.posts++
	if !o.writing {
		o.mu.Unlock()
		return
	}
	if o.written == nil {
		o.written = make(chan struct{})
	}
	written := o.written
	o.mu.Unlock()
	t := time.NewTimer(maxWait)
	defer t.Stop()
	select {
	case <-written:
	case <-t.C:
	}
}

// postEnded marks the POST done and lets what waited for it go.
func (o *outbox) postEnded() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.posts--
	o.kickLocked()
}

// streaming and posting report whether a GET stream of the session is open, and
// whether a POST of it is in flight.
func (o *outbox) streaming() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams > 0
}

func (o *outbox) posting() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.posts > 0
}

// outboxes are the outboxes of the live 2025-11-25 sessions.
type outboxes struct {
	mu   sync.Mutex
	open map[string]*sessionOut
}

// sessionOut is a 2025-11-25 session's outbox and the stream writer it writes with.
type sessionOut struct {
	*outbox
	out *streamOut
}

// start registers the session's outbox, replacing (stopping) one of the same id.
func (os *outboxes) start(session string, s *sessionOut) {
	os.mu.Lock()
	old := os.open[session]
	os.open[session] = s
	os.mu.Unlock()
	if old != nil {
		old.stop()
	}
}

// get is the session's outbox, nil if it has none.
func (os *outboxes) get(session string) *sessionOut {
	os.mu.Lock()
	defer os.mu.Unlock()
	return os.open[session]
}

// end stops the session's outbox.
func (os *outboxes) end(session string) {
	os.mu.Lock()
	s := os.open[session]
	delete(os.open, session)
	os.mu.Unlock()
	if s != nil {
		s.stop()
	}
}

// streamOut writes notifications to a long-lived SSE stream: a 2025-11-25 session's
// newest GET stream, or a listen stream. The bytes serialised once for every
// subscriber are framed as SSE events, a batch written and flushed in one go, with no
// allocation once its buffer has grown. A session's notification is recorded for
// replay first (its event id), also while no stream is attached, so that a stream
// resuming with Last-Event-ID receives what it missed.
type streamOut struct {
	session string       // 2025-11-25 session id; "" for a listen stream (no ids, no replay)
	replay  *replayStore // the session's replay buffer

	writingTo atomic.Pointer[streamWriter] // the stream a batch is being written to, if any

	mu  sync.Mutex
	cur *streamWriter // the stream written to; nil: none
	buf []byte
}

// write records a batch (a session's) and writes it to the attached stream; a stream
// whose write fails is detached (the SDK ends its request).
func (so *streamOut) write(batch []resources.Message) {
	so.mu.Lock()
	defer so.mu.Unlock()
	b := so.buf[:0]
	for _, m := range batch {
		if so.session != "" {
			msg, shared := m.Shared()
			if !shared {
				msg = m.AppendJSON(nil)
			}
			b = strconv.AppendUint(append(b, "id: "...), so.replay.storeNote(so.session, msg), 10)
			b = append(b, '\n')
		}
		b = append(m.AppendJSON(append(b, "event: message\ndata: "...)), "\n\n"...)
	}
	so.buf = b
	if so.cur == nil {
		return
	}
	so.writingTo.Store(so.cur)
	if so.cur.writeEvent(b) != nil {
		so.cur = nil
	}
	so.writingTo.Store(nil)
}

// attach makes sw the stream written to, after writing it the session's
// notifications recorded after the event id resume ("": none), in order: none is
// written twice or missed, as write records and writes under the same lock. A stream
// sw supersedes that is being written to is cut first: the write may be stuck on a
// client that stopped reading it, and sw would wait for it until the session is given up on.
func (so *streamOut) attach(sw *streamWriter, resume string) {
	if old := so.writingTo.Load(); old != nil && old != sw && old.cut != nil {
		old.cut()
	}
	so.mu.Lock()
	defer so.mu.Unlock()
	so.cur = sw
	if resume == "" {
		return
	}
	var b []byte
	for _, e := range so.replay.notesAfter(so.session, resume) {
		b = strconv.AppendUint(append(b[:0], "id: "...), e.seq, 10)
		b = append(append(append(b, "\nevent: message\ndata: "...), e.msg...), "\n\n"...)
		if sw.writeEvent(b) != nil {
			so.cur = nil
			return
		}
	}
}

// detach stops writing to sw, once a write in progress is done; sw's request
// may end then.
func (so *streamOut) detach(sw *streamWriter) {
	so.mu.Lock()
	defer so.mu.Unlock()
	if so.cur == sw {
		so.cur = nil
	}
}
