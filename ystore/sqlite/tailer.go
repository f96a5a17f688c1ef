// Package sqlite tails the SQLite Y-store that jupyter-collaboration writes through
// pycrdt-store's SQLiteYStore: tables yupdates(path, yupdate, metadata, timestamp) and
// ycheckpoints(path, checkpoint, timestamp), one row per update, one transaction each,
// rollback journal.
//
// The tailer opens the file read-only, never changes its journal mode, never writes,
// and reads in short transactions of at most Config.ChunkRows rows, retried (outside any
// transaction) while the writer holds its lock: a reader holding a lock makes Jupyter
// lose writes. It wakes on file events for the store and its journal, and polls
// PRAGMA data_version as a fallback.
//
// What the writer can do, and what the tailer delivers:
//   - append rows: Updates, in rowid (commit) order;
//   - squash or clean up a room (rows replaced by one merged row), or delete rows: noticed
//     when the first row of a room appended to is gone, when a commit appends nothing,
//     or when rowids at or below the cursor were reused (the fingerprint of the row at
//     the cursor); every room whose history summary changed is then re-read and
//     delivered, the way Jupyter loads it, as Reset, so that it is rebuilt from the
//     rows it has left (a deleted undecodable row no longer degrades it);
//   - write checkpoints: a checkpoint holds only state from rows, and is written in the
//     same transaction as a row, so it is read when a room is loaded or re-read;
//   - rename the file aside and create a new one (schema mismatch), or delete and
//     recreate it: the file's identity changes (the open connection holds the old inode,
//     so its number cannot be reused), every room of the new file is delivered as Reset
//     and, before them, every room gone as Removed; the same when PRAGMA user_version
//     changes in place;
//   - nothing, while a room is asked for again (Reload: the sidecar rebuilds a room whose
//     document differed from the server's saved file): the file is read whole, as after
//     a history rewrite, and that room delivered as Reset with the rooms whose rows changed;
//   - not have written the file yet (a server writes it once a notebook is opened):
//     Status reports it Absent, no error, until it is read;
//   - delete the file: Status reports it unreachable, nothing is delivered, the last
//     state stays served until the file returns;
//   - put something other than a regular file at the path (a named pipe, a socket, a
//     device, a directory): the same, with the reason (ErrNotRegular); it is never
//     opened, and a regular file at the path is read as a replacement. SQLite's own
//     opens cannot block on a named pipe either (ystore/internal/sqlitevfs), so that one
//     swapped in after the check fails the read rather than wedging the tailer;
//   - truncate or corrupt the file, or write over it in place (outside SQLite's locking,
//     noticed by its size and modification time changing while PRAGMA data_version does
//     not, and its newest row, read again, failing or differing from the one last
//     delivered: a WAL checkpoint changes the file but not its rows): a read that fails, or a store without the yupdates table, is reported by
//     Status as unreachable and delivers nothing, so the last state stays served. The
//     connection is dropped and the file re-opened and read whole at every wake-up and
//     poll until a read succeeds; then the rooms whose rows changed are delivered as
//     Reset, and those gone as Removed.
//
// A read of the whole file after the first waits, after the last one, four times as
// long as that one took: whatever the writer does, whole reads take at most a fifth of
// the time, and only this store's rooms wait.
//
// Status reports the store reachable only after a read that succeeded.
package sqlite

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/internal/reloads"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/internal/sqlitevfs"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/internal/tailstatus"
)

// ErrNoStore is returned by Load when the store file does not exist.
var ErrNoStore = errors.New("y-store file does not exist")

// ErrNotRegular is returned by reads of a store path that names something other than a
// regular file: a named pipe, a socket, a device or a directory, which is never opened.
var ErrNotRegular = errors.New("y-store path is not a regular file")

// ErrRunning is returned by Run when the tailer is already running.
var ErrRunning = errors.New("tailer already running")

// Tailer follows one SQLite Y-store file. It implements ystore.Tailer.
type Tailer struct {
	cfg     Config
	log     *slog.Logger
	m       *metrics
	status  *tailstatus.Recorder
	untrack func() // the status series stop counting this tailer
	running atomic.Bool

	// reloads are the rooms asked for again (Reload), delivered by Run's next cycle.
	reloads *reloads.Requests

	// Owned by Run.
	st     *store
	synced bool        // a file was read before: the next file replaces it
	ident  os.FileInfo // the file of the last successful read
	seen   stamp       // its size and modification time after that read
	dv     int64       // PRAGMA data_version at the last read
	uv     int64       // PRAGMA user_version (the schema version) of the open file
	cursor int64
	fp     fingerprint
	rooms  map[string]summary // the rooms followed (bound.go)
	over   bool               // rooms were left out since the last read of the whole store

	lastResync time.Time     // when the last full read ended
	resyncTook time.Duration // how long it took
}

// stamp is what a write to the file changes besides its contents.
type stamp struct {
	size int64
	mod  time.Time
}

func stampOf(fi os.FileInfo) stamp { return stamp{fi.Size(), fi.ModTime()} }

var _ ystore.Tailer = (*Tailer)(nil)

// New returns a Tailer for cfg.Path, its metrics registered on cfg.Registerer; it does
// no I/O.
func New(cfg Config) (*Tailer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	t := &Tailer{cfg: cfg, log: cfg.Logger.With("store", cfg.Path), m: m, status: tailstatus.New(), rooms: map[string]summary{},
		reloads: reloads.New()}
	if t.untrack, err = tailstatus.Track(cfg.Registerer, subsystem, t.Status); err != nil {
		return nil, err
	}
	return t, nil
}

// Close takes the tailer out of the status series (its rows stay counted); call it once
// Run has returned.
func (t *Tailer) Close() { t.untrack() }

// Status reports whether the file is readable, the last error, the lag and counters.
func (t *Tailer) Status() ystore.Status {
	return t.status.Status()
}

// FirstRead is closed once the first read of the store has finished, succeeded or failed.
func (t *Tailer) FirstRead() <-chan struct{} { return t.status.FirstRead() }

var _ ystore.Reloader = (*Tailer)(nil)

// Reload asks Run to deliver room again, whole, as a Reset. The store is read whole for
// it, as after a history rewrite.
func (t *Tailer) Reload(room string) { t.reloads.Ask(room) }

// Load reads every room once, as Reset events in room order, with its own connection.
func (t *Tailer) Load(ctx context.Context) ([]ystore.Event, error) {
	var events []ystore.Event
	err := t.load(ctx, func(st *store, p *plan) error {
		events = make([]ystore.Event, 0, len(p.rooms))
		for _, room := range p.sortedRooms() {
			rows, err := t.roomRows(ctx, st, p, room)
			if err != nil {
				return err
			}
			events = append(events, ystore.Event{Kind: ystore.EventReset, Room: room, Rows: rows})
		}
		return nil
	})
	return events, err
}

var _ ystore.StreamLoader = (*Tailer)(nil)

// LoadStream reads every room once, as Reset events in room order whose rows sink reads
// through Event.Stream, a chunk per read transaction, with its own connection.
func (t *Tailer) LoadStream(ctx context.Context, sink func(context.Context, []ystore.Event) error) error {
	return t.load(ctx, func(st *store, p *plan) error {
		events, fails := t.streamed(st, p, p.sortedRooms(), nil)
		if err := sink(ctx, events); err != nil {
			return cmp.Or(errors.Join(fails...), err)
		}
		return errors.Join(fails...)
	})
}

// load reads the plan of the whole store with its own connection, and hands both to read.
func (t *Tailer) load(ctx context.Context, read func(*store, *plan) error) error {
	st, err := t.open(ctx)
	if err != nil {
		return fmt.Errorf("load %s: %w", t.cfg.Path, err)
	}
	defer st.close()
	p, err := st.readPlan(ctx, t.cfg.ChunkRows, t.cfg.followLimit(), nil)
	if err == nil {
		t.skippedAt("load", p)
		err = read(st, p)
	}
	if err != nil {
		return fmt.Errorf("load %s: %w", t.cfg.Path, err)
	}
	return nil
}

// stream is the Event.Stream of room's load of plan p on st: it hands yield the room's
// rows a chunk per read transaction, decompressed, read a chunk ahead of yield on a
// goroutine of their own (ystore.ReadAhead: at most one chunk of a row past
// chunkBytes at once), each passed to taken once yield has
// taken it (nil: none), and records in failed the error of its last call when a read
// failed (nil when it read everything, or stopped at yield's error): what a sink's error
// may stand for, the store's failure rather than the sink's.
func (t *Tailer) stream(st *store, p *plan, room string, failed *error, taken func([]ystore.Row)) func(context.Context, func([]ystore.Row) error) error {
	return func(ctx context.Context, yield func([]ystore.Row) error) error {
		read := func(ctx context.Context, send func([]ystore.Row) error) error {
			return st.eachRow(ctx, room, p.top, t.cfg.ChunkRows, func(chunk []ystore.Row) error {
				return send(t.decompress(chunk))
			})
		}
		return ystore.ReadAhead(ctx, 2*chunkBytes, read, counted(yield, taken), failed)
	}
}

// counted is yield, each chunk it took then passed to taken (nil: none).
func counted(yield func([]ystore.Row) error, taken func([]ystore.Row)) func([]ystore.Row) error {
	return func(chunk []ystore.Row) error {
		if err := yield(chunk); err != nil {
			return err
		}
		if taken != nil {
			taken(chunk)
		}
		return nil
	}
}

// roomRows reads room's load of plan p whole, decompressed.
func (t *Tailer) roomRows(ctx context.Context, st *store, p *plan, room string) ([]ystore.Row, error) {
	rows := make([]ystore.Row, 0, p.rooms[room].rows)
	err := st.eachRow(ctx, room, p.top, t.cfg.ChunkRows, func(chunk []ystore.Row) error {
		rows = append(rows, t.decompress(chunk)...)
		return nil
	})
	return rows, err
}

// open opens the store file, retrying a rename that races with the open.
func (t *Tailer) open(ctx context.Context) (*store, error) {
	for {
		st, err := openStore(ctx, t.file(), t.cfg.MaxBusyWait, t.observeTx, t.m.busy.Inc)
		if !errors.Is(err, errReplacedWhileOpening) {
			return st, err
		}
	}
}

// file is the store file as configured.
func (t *Tailer) file() storeFile { return storeFile{path: t.cfg.Path, dir: t.cfg.Confine} }

// statStore returns the file at f: ErrNoStore when there is none, an error wrapping
// ErrNotRegular when it is something else than a regular file (after symbolic
// links), which must not be opened: opening a named pipe blocks.
func statStore(f storeFile) (os.FileInfo, error) {
	fi, err := f.stat()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, ErrNoStore
	case err != nil:
		return nil, fmt.Errorf("stat store: %w", err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is %s", ErrNotRegular, f.path, kindOf(fi.Mode()))
	}
	return fi, nil
}

// kindOf names the kind of file of a mode that is not a regular file's.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	}
	return "a file of mode " + m.Type().String()
}

func (t *Tailer) observeTx(wall, cpu time.Duration) {
	t.m.readTx.Observe(wall.Seconds())
	t.m.readTxCPU.Observe(cpu.Seconds())
	t.status.ReadTx(wall)
}

// Run delivers the store's rooms and then its changes to sink until ctx is done (it then
// returns nil) or sink fails (it returns an error wrapping ystore.ErrSink). Read errors
// are logged, reported by Status, and retried at the next wake-up.
func (t *Tailer) Run(ctx context.Context, sink func(context.Context, []ystore.Event) error) error {
	if !t.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer t.running.Store(false)
	if sqlitevfs.HookErr != nil {
		t.log.Warn("SQLite's open is not guarded against a named pipe at the store path", "err", sqlitevfs.HookErr)
	}
	var x *Watcher
	switch {
	case t.cfg.DisableFSNotify:
	case t.cfg.Watcher != nil:
		x = t.cfg.Watcher
	default:
		x = NewWatcher(WatcherConfig{Logger: t.log})
		defer x.Close()
	}
	w := newWaker(x, t.cfg.Path)
	defer w.close()
	defer t.closeStore()
	tick := time.NewTicker(t.cfg.PollInterval)
	defer tick.Stop()
	for {
		if err := t.cycle(ctx, sink); err != nil {
			if errors.Is(err, ystore.ErrSink) {
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
			t.failed(err)
			// The connection may hold a stale view of a file changed under it: the next
			// wake-up or poll opens the file afresh and reads it whole.
			t.closeStore()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
		case <-t.reloads.Wake():
		case <-tick.C:
			w.watch()
		}
	}
}

// failed records a read that failed: a store that never existed since the start is
// awaited (the server writes none until a notebook is opened: nothing wrong), anything
// else is a fault, logged when it differs from the last one.
func (t *Tailer) failed(err error) {
	if errors.Is(err, ErrNoStore) && !t.synced {
		if !t.status.Status().Absent {
			t.log.Info("waiting for the y-store: none yet (written once a notebook is opened)")
		}
		t.status.Absent()
		return
	}
	if err.Error() != t.status.Status().LastError {
		t.log.Warn("reading y-store", "err", err)
	}
	t.status.Fail(err)
}

// cycle brings the delivered state up to date with the file.
func (t *Tailer) cycle(ctx context.Context, sink func(context.Context, []ystore.Event) error) error {
	fi, err := statStore(t.file())
	if err != nil {
		if t.st != nil {
			if errors.Is(err, ErrNotRegular) {
				t.log.Warn("y-store path no longer names a regular file; serving the last state until one returns", "err", err)
			} else {
				t.log.Warn("y-store file disappeared; serving the last state until it returns", "err", err)
			}
			t.closeStore()
		}
		return err
	}
	if t.st == nil || !os.SameFile(t.st.ident, fi) {
		return t.reopen(ctx, sink)
	}
	dv, uv, err := t.st.versions(ctx)
	if err != nil {
		return err
	}
	reload := t.reloads.Asked()
	switch {
	case dv == t.dv && stampOf(fi) == t.seen && !reload:
		t.status.Read(nil, len(t.rooms))
		return nil
	case dv == t.dv && stampOf(fi) != t.seen:
		// SQLite writes the file without a commit too: a WAL checkpoint, the pages of a
		// commit in flight (whose data version the next round reads). The newest row is
		// read again: the same row at the same data version is the same store.
		if same, err := t.sameTop(ctx); err != nil || !same {
			t.log.Warn("y-store file written outside SQLite (restored, truncated or corrupted in place); reading it afresh")
			t.closeStore()
			return t.reopen(ctx, sink)
		}
		return t.settle(ctx)
	case uv != t.uv:
		t.log.Warn("y-store schema version changed in place; reloading every room", "from", t.uv, "to", uv)
		dv, err = t.resync(ctx, reasonReplaced, sink, nil)
	case reload:
		dv, err = t.resync(ctx, reasonReload, sink, t.reloads.Take())
	default:
		dv, err = t.tail(ctx, sink)
	}
	if err != nil {
		return err
	}
	t.dv, t.uv = dv, uv
	return t.settle(ctx)
}

// sameTop reports whether the store's newest row is still the one last delivered, at
// the data version last read.
func (t *Tailer) sameTop(ctx context.Context) (bool, error) {
	id, fp, dv, err := t.st.top(ctx)
	return err == nil && id == t.cursor && fp == t.fp && dv == t.dv, err
}

// settle follows a successful read: it hands the connection's page cache back (a hub
// holds many stores open between their changes) and records the file's size and
// modification time, whose later change without a commit is a write outside SQLite.
func (t *Tailer) settle(ctx context.Context) error {
	t.st.shrink(ctx)
	fi, err := t.file().stat()
	if err != nil {
		return fmt.Errorf("stat store: %w", err)
	}
	t.seen = stampOf(fi)
	return nil
}

// reopen opens the file now at the path and delivers it whole: Reset for its rooms, and
// Removed for the rooms of a previous file that it lacks. The same file opened again
// (after a failed read or a write outside SQLite) delivers only the rooms whose rows
// changed.
func (t *Tailer) reopen(ctx context.Context, sink func(context.Context, []ystore.Event) error) error {
	if t.st != nil {
		t.log.Warn("y-store file replaced; reloading every room")
	}
	t.closeStore()
	st, err := t.open(ctx)
	if err != nil {
		return err
	}
	t.st = st
	_, uv, err := st.versions(ctx)
	if err != nil {
		return err
	}
	reason := reasonStart
	switch {
	case t.synced && os.SameFile(t.ident, st.ident):
		// Its version is not compared: a restore in place can be read while the file
		// is still empty.
		reason = reasonReopened
	case t.synced:
		reason = reasonReplaced
	}
	dv, err := t.resync(ctx, reason, sink, nil)
	if err != nil {
		return err
	}
	t.synced, t.ident, t.dv, t.uv = true, st.ident, dv, uv
	return t.settle(ctx)
}

func (t *Tailer) closeStore() {
	if t.st != nil {
		if err := t.st.close(); err != nil {
			t.log.Warn("closing y-store connection", "err", err)
		}
		t.st = nil
	}
}

// tail delivers the rows committed after the cursor, a chunk per read transaction, and
// returns the data version of its last read. It falls back to a resync when rows were
// deleted: the row at the cursor was replaced, a commit appended nothing, or the first
// row of a room it appended to is gone (a squash or a cleanup).
func (t *Tailer) tail(ctx context.Context, sink func(context.Context, []ystore.Event) error) (int64, error) {
	for appended := false; ; appended = true {
		rows, more, ok, dv, err := t.st.rowsAfter(ctx, t.cursor, -1, t.cfg.ChunkRows, true, t.fp)
		if err != nil {
			return 0, err
		}
		if !ok {
			t.log.Info("y-store history rewritten below the cursor; re-reading changed rooms", "cursor", t.cursor)
			return t.resync(ctx, reasonHistory, sink, nil)
		}
		if len(rows) == 0 && !appended {
			t.log.Info("y-store commit appended no row (rows deleted, or another table written); re-reading changed rooms", "cursor", t.cursor)
			return t.resync(ctx, reasonHistory, sink, nil)
		}
		if len(rows) == 0 {
			return dv, nil
		}
		last := rows[len(rows)-1]
		// A row stamped NULL is no room's (rowStamp): loads never read it.
		rows = slices.DeleteFunc(rows, func(r ystore.Row) bool { return math.IsNaN(r.Timestamp) })
		kept := t.follow(rows)
		events := runs(t.decompress(kept))
		t.status.Pending(events)
		if len(events) > 0 {
			if err := ystore.Deliver(ctx, sink, events); err != nil {
				return 0, err
			}
		}
		for _, r := range kept {
			s := t.rooms[r.Room]
			s.add(r)
			t.rooms[r.Room] = s
		}
		t.cursor = last.ID
		t.fp = fingerprint{room: last.Room, timestamp: math.Float64bits(last.Timestamp), size: int64(len(last.Update))}
		t.status.Read(events, len(t.rooms))
		room, err := t.rewritten(ctx, events)
		if err != nil {
			return 0, err
		}
		if room != "" {
			t.log.Info("y-store room history rewritten (squashed or cleaned up); re-reading changed rooms", logkey.Room, room)
			return t.resync(ctx, reasonHistory, sink, nil)
		}
		if !more {
			return dv, nil
		}
	}
}

// rewritten returns a room of events whose first stored row is no longer the one the
// tailer has seen first, or "" when there is none.
func (t *Tailer) rewritten(ctx context.Context, events []ystore.Event) (string, error) {
	rooms := make([]string, 0, len(events))
	for _, e := range events {
		if !slices.Contains(rooms, e.Room) {
			rooms = append(rooms, e.Room)
		}
	}
	first, err := t.st.firstRows(ctx, rooms)
	if err != nil {
		return "", err
	}
	for _, room := range rooms {
		if !first[room].same(t.rooms[room].first) {
			return room, nil
		}
	}
	return "", nil
}

// runs splits rows (in commit order) into Updates events of consecutive rows of one room.
func runs(rows []ystore.Row) []ystore.Event {
	var events []ystore.Event
	for i, r := range rows {
		if i == 0 || r.Room != rows[i-1].Room {
			events = append(events, ystore.Event{Kind: ystore.EventUpdates, Room: r.Room})
		}
		e := &events[len(events)-1]
		e.Rows = append(e.Rows, r)
	}
	return events
}

// resyncSpacing: a full read waits, after the last one ended, this many times as long
// as that one took, so that a store whose history keeps being rewritten (a hub user can
// rewrite her own in a loop) costs at most a fifth of a core, and only its own rooms
// wait: a tailer follows one store.
const resyncSpacing = 4

// spaceResync waits until a full read may start (resyncSpacing), or ctx is done.
func (t *Tailer) spaceResync(ctx context.Context) error {
	wait := time.Until(t.lastResync.Add(resyncSpacing * t.resyncTook))
	if t.lastResync.IsZero() || wait <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// resync reads the whole file and delivers it, and returns the data version it was read
// at: at start and after a replacement as Reset for every room; after a history rewrite
// or after the same file was opened again, as Reset for the rooms whose rows changed, so
// that each is rebuilt from the rows it now has (a row gone no longer degrades it). Rooms
// no longer stored are delivered as Removed. To deliver the rooms asked for again
// (reload), as Reset for those and for the rooms whose rows changed.
func (t *Tailer) resync(ctx context.Context, reason string, sink func(context.Context, []ystore.Event) error, reload map[string]bool) (int64, error) {
	if err := t.spaceResync(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	defer func() {
		t.lastResync, t.resyncTook = time.Now(), time.Since(start)
		t.m.resyncSeconds.Add(t.resyncTook.Seconds())
	}()
	t.m.resyncs.WithLabelValues(reason).Inc()
	p, err := t.st.readPlan(ctx, t.cfg.ChunkRows, t.cfg.followLimit(), t.rooms)
	if err != nil {
		return 0, err
	}
	t.skippedAt(reason, p)
	var removed []ystore.Event
	for room := range t.rooms {
		if _, ok := p.rooms[room]; !ok {
			removed = append(removed, ystore.Event{Kind: ystore.EventRemoved, Room: room})
		}
	}
	// Past its bound, a room removed frees a place in the sink too, which may have
	// refused a room followed: every room followed is delivered again (bound.go).
	refill := t.over && len(removed) > 0
	var rooms []string
	var total int64
	for _, room := range p.sortedRooms() {
		rp := p.rooms[room]
		if reason == reasonHistory || reason == reasonReopened || reason == reasonReload {
			if prev, ok := t.rooms[room]; ok && prev == rp.sum && !reload[room] && !refill {
				continue
			}
		}
		rooms = append(rooms, room)
		total += rp.rows
	}
	prog := t.startLoad(reason, len(rooms), total)
	var events []ystore.Event
	var fails []error
	// The rooms gone first: a sink bounded by its rooms has their places for the others.
	if t.cfg.StreamLoads {
		events, fails = t.streamed(t.st, p, rooms, func(chunk []ystore.Row) {
			t.status.Streamed(chunk)
			prog.add(len(chunk))
		})
		events = append(removed, events...)
	} else {
		events, err = t.batched(ctx, p, rooms, prog, sink, removed)
	}
	if err != nil {
		return 0, err
	}
	if len(events) > 0 {
		err := ystore.Deliver(ctx, sink, events)
		if failed := errors.Join(fails...); failed != nil {
			// The sink failed, or not, because the store could not be read: a read
			// error, retried at the next wake-up, not the sink's.
			return 0, failed
		}
		if err != nil {
			return 0, err
		}
	}
	t.rooms = make(map[string]summary, len(p.rooms))
	for room, rp := range p.rooms {
		t.rooms[room] = rp.sum
	}
	t.cursor, t.fp, t.over = p.top, p.fp, p.over
	t.log.Info("y-store read", "reason", reason, "rooms", len(p.rooms), "reset", len(rooms), "removed", len(removed), "rows", total,
		"rows_skipped", p.skipped,
		"took", time.Since(prog.p.Started).Round(time.Millisecond).String())
	t.status.Read(events, len(t.rooms))
	return p.dv, nil
}

// streamed returns a Reset per room of rooms (of plan p, on st) whose rows the sink reads
// through Event.Stream, each chunk passed to taken once the sink has taken it (nil:
// none), and where each room's stream records the error of a read that failed
// (tailer.stream). When rooms are every room of the store (the plan's, none left out),
// the events share a Scan that reads them all in one pass (scan.go), whose failure is
// recorded last.
func (t *Tailer) streamed(st *store, p *plan, rooms []string, taken func([]ystore.Row)) ([]ystore.Event, []error) {
	events := make([]ystore.Event, 0, len(rooms))
	fails := make([]error, len(rooms)+1)
	var sc *ystore.Scan
	if len(rooms) == len(p.rooms) && !p.over {
		sc = t.scan(st, p, rooms, &fails[len(rooms)], taken)
	}
	for i, room := range rooms {
		events = append(events, ystore.Event{Kind: ystore.EventReset, Room: room, Stream: t.stream(st, p, room, &fails[i], taken), Scan: sc})
	}
	return events, fails
}

// batched reads rooms whole and delivers them in calls of about loadBatchRows rows, after
// the events first, each counted once the sink has applied it; it returns the events of
// the last call, not delivered yet.
func (t *Tailer) batched(ctx context.Context, p *plan, rooms []string, prog *loadProgress, sink func(context.Context, []ystore.Event) error, first []ystore.Event) ([]ystore.Event, error) {
	events := first
	n := 0
	for i, room := range rooms {
		rows, err := t.roomRows(ctx, t.st, p, room)
		if err != nil {
			return nil, err
		}
		events = append(events, ystore.Event{Kind: ystore.EventReset, Room: room, Rows: rows})
		if n += len(rows); n >= loadBatchRows && i < len(rooms)-1 {
			if err := ystore.Deliver(ctx, sink, events); err != nil {
				return nil, err
			}
			for _, e := range events {
				t.status.Streamed(e.Rows)
			}
			prog.add(n)
			events, n = nil, 0
		}
	}
	return events, nil
}

// decompress returns rows with their updates decompressed by Config.Decompress. A row
// that does not decompress is logged, counted, and delivered as stored, so that the
// sink's decoder rejects it and marks its room degraded.
func (t *Tailer) decompress(rows []ystore.Row) []ystore.Row {
	if t.cfg.Decompress == nil {
		return rows
	}
	out := make([]ystore.Row, len(rows))
	for i, r := range rows {
		out[i] = r
		u, err := t.cfg.Decompress(r.Update)
		if err != nil {
			t.m.decompressErrors.Inc()
			t.log.Warn("row does not decompress", logkey.Room, r.Room, "row", r.ID, "err", err)
			continue
		}
		out[i].Update = u
	}
	return out
}
