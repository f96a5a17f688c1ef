// Package tailstatus keeps a tailer's ystore.Status and its status metrics, the one
// bookkeeping every store backend shares, so that all of them report to /readyz the same
// way.
package tailstatus

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// Metrics are a backend's collectors the Recorder keeps up to date.
type Metrics struct {
	// Reachable is 1 while the store can be read.
	Reachable prometheus.Gauge
	// Lag is Status.Lag in seconds.
	Lag prometheus.Gauge
	// Rows counts the rows delivered.
	Rows prometheus.Counter
}

// Recorder is a tailer's status; it is safe for concurrent use.
type Recorder struct {
	m Metrics

	mu sync.Mutex
	s  ystore.Status
}

// New returns a Recorder of an unread, unreachable store.
func New(m Metrics) *Recorder {
	return &Recorder{m: m}
}

// Status returns the current status.
func (r *Recorder) Status() ystore.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.s
}

// Fail records a read that failed: the store is unreachable until the next Read.
func (r *Recorder) Fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Reachable = false
	r.s.LastError = err.Error()
	r.s.LastErrorAt = time.Now()
	r.m.Reachable.Set(0)
}

// Read records a read that succeeded and whose events reached the sink, with the number
// of rooms the store now has. tailed tells that the events' Updates rows were delivered
// as they committed, so that their age is lag; a load or a re-read delivers old rows,
// whose age is not. Lag is that of the newest tailed update, kept until the next one.
func (r *Recorder) Read(events []ystore.Event, tailed bool, rooms int) {
	now := time.Now()
	var n int
	var newest, newestTailed float64
	for _, e := range events {
		n += len(e.Rows)
		for _, row := range e.Rows {
			newest = max(newest, row.Timestamp)
			if tailed && e.Kind == ystore.EventUpdates {
				newestTailed = max(newestTailed, row.Timestamp)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Reachable = true
	r.s.LastError = ""
	r.s.LastReadAt = now
	r.s.Rooms = rooms
	r.s.RowsTailed += uint64(n)
	if at := unixTime(newest); newest > 0 && at.After(r.s.LastRowAt) {
		r.s.LastRowAt = at
	}
	if newestTailed > 0 {
		r.s.Lag = max(now.Sub(unixTime(newestTailed)), 0)
	}
	r.m.Reachable.Set(1)
	r.m.Lag.Set(r.s.Lag.Seconds())
	r.m.Rows.Add(float64(n))
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
