// Package ystore defines the rows of a Y-store (the log of Yjs updates that
// jupyter-collaboration writes), the events a tailer delivers, the Tailer contract that
// every store backend implements, and the parsing of room keys. Backends are built from
// their own typed Config (ystore/sqlite, ystore/postgres); there is no registry by name.
package ystore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrSink is wrapped, together with the sink's own error, by the error a Tailer's Run
// returns when its sink failed.
var ErrSink = errors.New("y-store sink failed")

// Deliver hands events to sink, wrapping its error in ErrSink.
func Deliver(ctx context.Context, sink func(context.Context, []Event) error, events []Event) error {
	if err := sink(ctx, events); err != nil {
		return fmt.Errorf("%w: %w", ErrSink, err)
	}
	return nil
}

// Row is one stored Yjs update (or checkpoint) of one room.
type Row struct {
	// Room is the store's room key (the pycrdt-store path column), see ParseRoom.
	Room string
	// ID orders rows of one read in commit order (SQLite rowid, Postgres id).
	ID int64
	// Update is a Yjs v1 update.
	Update []byte
	// Timestamp is the writer's commit time in seconds since the Unix epoch.
	Timestamp float64
}

// EventKind tells a sink what to do with an Event's rows.
type EventKind int

const (
	// EventUpdates carries rows to apply on top of the room's current document.
	EventUpdates EventKind = iota
	// EventReset replaces the room's document by one built from the rows alone.
	EventReset
	// EventRemoved tells that the room no longer exists in the store; Rows is empty.
	EventRemoved
)

// String names the kind for logs.
func (k EventKind) String() string {
	switch k {
	case EventUpdates:
		return "updates"
	case EventReset:
		return "reset"
	case EventRemoved:
		return "removed"
	default:
		return "unknown"
	}
}

// Event is what a tailer delivers about one room.
type Event struct {
	Kind EventKind
	Room string
	Rows []Row
	// Owner is the user who owns the room, where the store records owners and the
	// tailer reports them (the Postgres store's Follower); otherwise empty.
	Owner string
	// Stream, when not nil, stands for Rows (then empty) in a Reset from a tailer that
	// streams its loads (sqlite.Config.StreamLoads, the Postgres tailer's loads, any
	// StreamLoader's LoadStream): it hands the room's rows, in load
	// order, to yield a bounded chunk at a time, reading them afresh at each call, and
	// returns yield's error as is. Call it only while the sink call that received the
	// event runs; Each reads either form.
	Stream func(ctx context.Context, yield func([]Row) error) error
	// Scan, when not nil, reads the rows of this streamed Reset together with those of
	// every other Reset of its delivery that shares it, in one pass over the store: what
	// a sink that builds all of these rooms at once (a cold load) may read instead of
	// each one's Stream, which still reads its room alone.
	Scan *Scan
}

// Scan reads the rows of several rooms in one pass over a store, in the store's order
// rather than room after room: a store whose rooms' rows are interleaved (concurrent
// sessions) is read once instead of once a room.
type Scan struct {
	// Rooms is how many rooms the pass reads (the Resets sharing it): a sink that takes
	// fewer of them reads less through their Streams.
	Rooms int
	// Each hands yield the rows of the scan's rooms a bounded chunk at a time, the rooms'
	// rows interleaved but each room's in its load order (Row.Room tells which room). A
	// room whose rows turn out not to be stored in their load order is restarted: Each
	// calls restart with its key, the rows handed for it before are void, and hands its
	// rows again later, from its first, in load order. Call it only while the sink call
	// that received the events runs; it returns yield's or restart's error as is.
	Each func(ctx context.Context, yield func([]Row) error, restart func(room string) error) error
}

// Each hands the event's rows to yield: Stream's chunks, or Rows at once (nothing when
// there are none).
func (e Event) Each(ctx context.Context, yield func([]Row) error) error {
	if e.Stream != nil {
		return e.Stream(ctx, yield)
	}
	if len(e.Rows) == 0 {
		return nil
	}
	return yield(e.Rows)
}

// LoadProgress is how far a read of the whole store (the load at start, a re-read after
// the store was replaced or rewritten) has come.
type LoadProgress struct {
	// Active is true while the read runs.
	Active bool
	// Rows of Total rows were delivered to the sink and applied (or copied) by it.
	Rows, Total int64
	// Rooms is the number of rooms the read delivers.
	Rooms int
	// Started is when the read began.
	Started time.Time
}

// DefaultLagThreshold is how far behind (Status.Lag) a tailer may be while its reader
// is still ready: the daemon's /readyz fails past it (store.lag_threshold).
const DefaultLagThreshold = 5 * time.Second

// Status reports a tailer's health.
type Status struct {
	// Reachable is true while the store can be read.
	Reachable bool
	// Absent is true while the store does not exist yet and never did since the tailer
	// started (a jupyter-collaboration server writes its SQLite file only once a
	// notebook is opened): nothing to serve and nothing wrong. A store that was read
	// and then disappears is not Absent but unreachable.
	Absent bool
	// LastError is the most recent read error, empty after a successful read.
	LastError string
	// LastErrorAt is when LastError happened.
	LastErrorAt time.Time
	// Lag is the age of the oldest row read from the store and not yet applied: 0 when
	// the tailer has applied everything it read, however old those rows are. A reader
	// whose Lag exceeds DefaultLagThreshold (unless configured otherwise) is behind.
	Lag time.Duration
	// LastRowAt is the commit time of the newest delivered row.
	LastRowAt time.Time
	// LastReadAt is when the store was last read successfully.
	LastReadAt time.Time
	// RowsTailed counts rows delivered since the tailer started.
	RowsTailed uint64
	// Rooms is the number of rooms known in the store.
	Rooms int
	// MaxReadTx is the longest read transaction held on the store so far.
	MaxReadTx time.Duration
	// Load is the progress of a read of the whole store under way (Active), or of the
	// last one.
	Load LoadProgress
}

// Tailer follows a Y-store.
type Tailer interface {
	// Run delivers, in commit order, first a Reset per existing room (checkpoint + rows,
	// the way Jupyter loads a room), then Updates as rows commit; Reset again whenever a
	// room's history is replaced in a way that is not a superset (file renamed/recreated),
	// and Removed for a room that disappears. It returns nil when ctx is done, and an
	// error wrapping ErrSink and the sink's error when sink fails.
	Run(ctx context.Context, sink func(context.Context, []Event) error) error
	// Status reports reachability, the last error and the lag.
	Status() Status
	// FirstRead is closed once the first read of the store has finished, whether it
	// succeeded (its events applied by the sink, or returned by Load) or failed: what
	// a caller waits on for the store to be loaded.
	FirstRead() <-chan struct{}
	// Load reads every room once, as Reset events in room order (for inspect and cold
	// start); it does not need Run.
	Load(ctx context.Context) ([]Event, error)
	// Close takes the tailer out of the status series its Registerer serves (its rows
	// stay counted); call it once Run has returned.
	Close()
}

// StreamLoader is a Tailer that can read every room once without holding their rows:
// inspect reads a store of any size through it.
type StreamLoader interface {
	// LoadStream reads every room once and hands sink, in one call, a Reset per room in
	// room order whose rows it reads through Event.Stream while the call runs; it returns
	// sink's error as is, or the error of a read that failed (a room's stream included).
	LoadStream(ctx context.Context, sink func(context.Context, []Event) error) error
}

// Reloader is a Tailer that delivers a room again on request: the way to rebuild a
// room's document from the store rather than apply further onto it.
type Reloader interface {
	// Reload asks Run to read room again and deliver it whole as a Reset, in commit
	// order with its other events, soon; it does not wait. A room not in the store is
	// ignored.
	Reload(room string)
}
