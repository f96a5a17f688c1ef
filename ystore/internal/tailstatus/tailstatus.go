// Package tailstatus keeps a tailer's ystore.Status and the status series of every
// tailer, the one bookkeeping every store backend shares, so that all of them report to
// /readyz and /metrics the same way.
package tailstatus

import (
	"sync"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// Recorder is a tailer's status; it is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	s       ystore.Status
	pending time.Time     // the commit of the oldest row read and not yet applied; zero: none
	first   chan struct{} // closed by the first Read or Fail
	once    sync.Once
}

// New returns a Recorder of an unread, unreachable store.
func New() *Recorder {
	return &Recorder{first: make(chan struct{})}
}

// FirstRead is closed once the first read is recorded, whether it succeeded (Read) or
// failed (Fail).
func (r *Recorder) FirstRead() <-chan struct{} { return r.first }

// read marks the first read recorded.
func (r *Recorder) read() { r.once.Do(func() { close(r.first) }) }

// Status returns the current status; its Lag is the age, now, of the oldest row read
// and not yet applied (0 when none is).
func (r *Recorder) Status() ystore.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setLag(time.Now())
	return r.s
}

// setLag sets the lag as of now.
func (r *Recorder) setLag(now time.Time) {
	r.s.Lag = 0
	if !r.pending.IsZero() {
		r.s.Lag = max(now.Sub(r.pending), 0)
	}
}

// Pending records the events of a tailed read, before the sink applies them: until the
// next Read, Lag is the age of the oldest of their Updates rows. A load or a re-read
// delivers old rows, whose age is not lag: it is not recorded as pending.
func (r *Recorder) Pending(events []ystore.Event) {
	var oldest float64
	for _, e := range events {
		if e.Kind != ystore.EventUpdates {
			continue
		}
		for _, row := range e.Rows {
			if row.Timestamp > 0 && (oldest == 0 || row.Timestamp < oldest) {
				oldest = row.Timestamp
			}
		}
	}
	if oldest == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if at := unixTime(oldest); r.pending.IsZero() || at.Before(r.pending) {
		r.pending = at
	}
	r.setLag(time.Now())
}

// Fail records a read that failed: the store is unreachable until the next Read, and a
// read of the whole store under way has ended.
func (r *Recorder) Fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Reachable = false
	r.s.Absent = false
	r.s.LastError = err.Error()
	r.s.LastErrorAt = time.Now()
	r.s.Load.Active = false
	r.read()
}

// Absent records a read that found no store, which has not existed since the tailer
// started: not reachable, no error (Status.Absent) until the next Read or Fail.
func (r *Recorder) Absent() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Reachable = false
	r.s.Absent = true
	r.s.LastError = ""
	r.read()
}

// Read records a read that succeeded and whose events the sink applied, with the number
// of rooms the store now has: nothing read is pending any more, so Lag is 0 until the
// next Pending. The age of a row once applied is not lag, however old the row. A read of
// the whole store under way (Load) ends with it.
func (r *Recorder) Read(events []ystore.Event, rooms int) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range events {
		r.delivered(e.Rows)
	}
	r.s.Reachable = true
	r.s.Absent = false
	r.s.LastError = ""
	r.s.LastReadAt = now
	r.s.Rooms = rooms
	r.s.Load.Active = false
	r.pending = time.Time{}
	r.setLag(now)
	r.read()
}

// Streamed records rows a sink took from a streamed Reset (ystore.Event.Stream), which
// Read cannot count: they are in no event's Rows.
func (r *Recorder) Streamed(rows []ystore.Row) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delivered(rows)
}

// delivered counts rows as tailed and moves LastRowAt to the newest; r.mu is held.
func (r *Recorder) delivered(rows []ystore.Row) {
	var newest float64
	for _, row := range rows {
		newest = max(newest, row.Timestamp)
	}
	r.s.RowsTailed += uint64(len(rows))
	if at := unixTime(newest); newest > 0 && at.After(r.s.LastRowAt) {
		r.s.LastRowAt = at
	}
}

// Load records how far a read of the whole store has come (Status.Load); Read or Fail
// ends it.
func (r *Recorder) Load(p ystore.LoadProgress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Load = p
}

// ReadTx records the duration of one read transaction (Status.MaxReadTx).
func (r *Recorder) ReadTx(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.MaxReadTx = max(r.s.MaxReadTx, d)
}

// unixTime converts a row timestamp (seconds since the epoch) to a time.
func unixTime(sec float64) time.Time {
	return time.UnixMicro(int64(sec * 1e6))
}
