package sqlite

import (
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// loadBatchRows bounds, roughly, the rows a read of the whole store hands the sink in one
// call when it does not stream its loads: a room is never split, and each call's rows are
// counted in the load's progress once the sink has applied them.
const loadBatchRows = 50_000

// progressEvery is how often a read of the whole store logs how far it has come.
const progressEvery = 5 * time.Second

// loadProgress is how far one read of the whole store has come, told to the status
// (Status.Load, /readyz) at every chunk and to the log every progressEvery.
type loadProgress struct {
	t      *Tailer
	reason string
	p      ystore.LoadProgress
	logged time.Time
}

// startLoad begins the progress of a read of rooms rooms and total rows.
func (t *Tailer) startLoad(reason string, rooms int, total int64) *loadProgress {
	now := time.Now()
	l := &loadProgress{t: t, reason: reason, logged: now,
		p: ystore.LoadProgress{Active: true, Total: total, Rooms: rooms, Started: now}}
	t.status.Load(l.p)
	if total > 0 {
		t.log.Info("reading y-store", "reason", reason, "rooms", rooms, "rows", total)
	}
	return l
}

// add counts n more rows taken by the sink.
func (l *loadProgress) add(n int) {
	l.p.Rows = min(l.p.Rows+int64(n), l.p.Total)
	l.t.status.Load(l.p)
	now := time.Now()
	if now.Sub(l.logged) < progressEvery {
		return
	}
	l.logged = now
	took := now.Sub(l.p.Started)
	l.t.log.Info("reading y-store", "reason", l.reason, "rows_done", l.p.Rows, "rows", l.p.Total,
		"rows_per_second", int64(float64(l.p.Rows)/took.Seconds()), "rooms", l.p.Rooms,
		"elapsed", took.Round(time.Second).String())
}
