// Package rooms keeps one live notebook per notebook room of a Y-store and serves them
// by path: a Set is the library.Library of the MCP server; its Writer is the sink of a
// ystore.Tailer and the Notebooks of an ondisk.Watcher, and tells a Notifier every change
// it applies (with its Origin) and every rename. A room's path comes from its key, the
// file id resolver, or the document's state.path; its notebook is served from its .ipynb
// file instead when the file is newer and different (filerooms.go), when the document
// differed from the server's saved file, and while its updates wait for one missing from
// the store (oracle.go; Writer.Run finds those).
package rooms

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/heap"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/library"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/names"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/versions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/ondisk"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// Config is what a Set is built from; nil fields are none.
type Config struct {
	// Logger receives the rooms' logs; nil: slog.Default().
	Logger *slog.Logger
	// Resolver maps file ids to paths; nil: paths come from the room key or the
	// document's state.
	Resolver fileid.Resolver
	// Files reads the notebooks' .ipynb files now (an ondisk.Watcher); nil: no file is
	// read, and a room that leaves the store is forgotten.
	Files Files
	// Metrics counts the rows applied and the rooms held; nil: nothing is counted.
	Metrics Metrics
	// GapAfter is how long a room's updates may wait for a missing one (a write the
	// store lost) before the room is degraded and served from its file; 0: DefaultGapAfter.
	GapAfter time.Duration
	// Reload asks the store to deliver a room again, whole (a Reset: ystore.Reloader),
	// to rebuild a document that differed from the server's saved file; nil: none, such
	// a document goes on from itself once the store's content moves on.
	Reload func(room string)
	// Versions bounds the versions of its notebook each room keeps (resources/versions);
	// zero fields: the defaults.
	Versions versions.Config
	// Scope is part of every version's identity beside the room: the hub user in hub
	// mode, so that another user's version is unknown here; "" outside it.
	Scope string
	// MaxRooms bounds the rooms held, notebooks and others, MaxBytes the rows' bytes
	// their documents are made of, and MaxMemory the memory those documents take
	// (bound.go); 0: no bound. Hub mode gives each user's store DefaultMaxRooms,
	// DefaultMaxBytes and DefaultMaxMemory unless configured.
	MaxRooms  int
	MaxBytes  int64
	MaxMemory int64
}

// Files reads notebook files now; ondisk.Watcher is one.
type Files interface {
	// Read reads and parses the notebook file at path.
	Read(path string) (ondisk.File, error)
	// Exists reports whether the file at path exists.
	Exists(path string) bool
	// ModTime returns the modification time of the file at path now.
	ModTime(path string) (time.Time, error)
}

// Notifier is told what happens to the notebooks, by the goroutine that applied it.
type Notifier interface {
	// Changed is called after every applied change, with the notebook's path and where
	// the change comes from.
	Changed(path string, ch ynotebook.Changes, o Origin)
	// Moved is called when a notebook's path changes (its file was renamed), with the
	// room that moved.
	Moved(oldPath, newPath string, o Origin)
}

// Metrics observes what the rooms do.
type Metrics interface {
	// ObserveApply observes one apply begun at start, of rows the newest of which was
	// committed at committed (seconds since the epoch; 0 when unknown).
	ObserveApply(start time.Time, committed float64)
	// RowsApplied counts rows applied to live documents.
	RowsApplied(n int)
	// DecodeErrors counts rows skipped because they did not decode.
	DecodeErrors(n int)
	// SetRooms sets the number of notebook rooms held.
	SetRooms(n int)
	// SetDegraded sets the number of rooms degraded: by an undecodable row, a document
	// that differed from its saved file, or updates missing from the store.
	SetDegraded(n int)
	// Diverged counts a document found different from the server's saved file.
	Diverged()
	// Gap counts a room found waiting for updates missing from the store.
	Gap()
	// VersionsKept adds n (negative: takes away) to the versions the rooms keep.
	VersionsKept(n int)
	// Refused counts a room refused past a bound (BoundRooms, BoundBytes, BoundMemory).
	Refused(bound string)
}

// Set keeps one live notebook per notebook room of the store and serves them by path
// (a library.SourcedLibrary). Its Writer changes it.
type Set struct {
	log      *slog.Logger
	resolver fileid.Resolver
	metrics  Metrics
	// files reads a notebook's .ipynb now; nil without the watcher. A room that leaves
	// the store stays served from its file, if there is one.
	files Files
	// gapAfter and reload: Config's (oracle.go).
	gapAfter time.Duration
	reload   func(room string)
	// versions and scope: Config's.
	versions versions.Config
	scope    string

	// mu guards the maps; a room's own lock, when both are held, is taken after it.
	mu     sync.RWMutex
	rooms  map[string]*room              // notebook rooms by key
	byPath map[string]map[*room]struct{} // loaded rooms with a path, by path
	others map[string]int                // rows seen per room that is not a notebook
	bounds                               // what the rooms hold against MaxRooms and MaxBytes
}

type room struct {
	info ystore.Room
	// last is its Info as last read (status).
	last atomic.Pointer[Info]

	mu      sync.Mutex
	nb      *ynotebook.Notebook
	path    string
	rows    int
	badRows int
	// bytes is the rows' bytes its document is made of (Set.mu guards it: bound.go).
	bytes int64
	// filesMemory is what its files hold, as counted in the Set's memory (Set.mu guards
	// it: filerooms.go).
	filesMemory int64
	updated     time.Time
	lastRow     time.Time // commit time of the newest row applied
	// file is the notebook's .ipynb while it is served instead of the document: newer
	// than lastRow and different, or the room left the store (filerooms.go); nil while
	// the store is live.
	file *ondisk.File
	// detached: the room is no longer in the store (pycrdt-store started a new file);
	// its file is served.
	detached bool
	// gone: the file at path does not exist (the notebook was deleted): not served.
	gone bool
	// refusedPath is the last path found for the room that climbs out of the root.
	refusedPath string
	// What the server's saved file says of the document (oracle.go).
	oracle
	// hist is the versions of what the room served (versions.go); nil until one is.
	hist *versions.History
}

// Info describes one room for inspect and health.
type Info struct {
	Key      string
	Kind     string
	FileID   string
	Path     string
	Rows     int
	BadRows  int
	Diverged bool  // the document differed from the server's saved file: the file is served
	Gaps     []Gap // updates missing from the store that later ones wait for: the file is served
	// GapClients counts the clients whose updates are missing (Gaps lists the first 16).
	GapClients int
	// Failed is why the document refuses every row (yjs.Doc.Failed): the file is served.
	Failed   string
	Degraded bool
}

// New returns an empty set of rooms. No I/O.
func New(cfg Config) *Set {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	return &Set{
		log:      cfg.Logger,
		resolver: cfg.Resolver,
		files:    cfg.Files,
		metrics:  cfg.Metrics,
		gapAfter: cmp.Or(max(cfg.GapAfter, 0), DefaultGapAfter),
		reload:   cfg.Reload,
		versions: cfg.Versions.Defaults(),
		scope:    cfg.Scope,
		rooms:    make(map[string]*room),
		byPath:   make(map[string]map[*room]struct{}),
		others:   make(map[string]int),
		bounds: bounds{maxRooms: max(cfg.MaxRooms, 0), maxBytes: max(cfg.MaxBytes, 0), maxMemory: max(cfg.MaxMemory, 0),
			refused: make(map[string]string)},
	}
}

// Writer applies what the store and the notebook files say to a Set, telling its
// Notifier; it serves what its Set serves.
type Writer struct {
	*Set
	notify Notifier
}

// Writer returns the writer of s that tells n; nil n tells nobody (inspect).
func (s *Set) Writer(n Notifier) *Writer {
	if n == nil {
		n = nobody{}
	}
	return &Writer{Set: s, notify: n}
}

// nobody is the Notifier of a Writer that tells nobody.
type nobody struct{}

func (nobody) Changed(string, ynotebook.Changes, Origin) {}
func (nobody) Moved(string, string, Origin)              {}

// noMetrics counts nothing.
type noMetrics struct{}

func (noMetrics) ObserveApply(time.Time, float64) {}
func (noMetrics) RowsApplied(int)                 {}
func (noMetrics) DecodeErrors(int)                {}
func (noMetrics) SetRooms(int)                    {}
func (noMetrics) SetDegraded(int)                 {}
func (noMetrics) Diverged()                       {}
func (noMetrics) Gap()                            {}
func (noMetrics) VersionsKept(int)                {}
func (noMetrics) Refused(string)                  {}

// Sink applies a tailer's events; it never fails on a bad row, only on ctx or on a
// streamed Reset whose rows could not be read (ystore.Event.Stream's error: the room is
// left as it was).
func (r *Writer) Sink(ctx context.Context, events []ystore.Event) error {
	defer func() { r.metrics.SetRooms(r.count()) }()
	alone := 0 // events[:alone] are read one by one
	for i := 0; i < len(events); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if n, all := scanGroup(events[i:]); i >= alone && n > 0 {
			if !all || !r.cold(events[i:i+n]) {
				alone = i + n
			} else {
				if err := r.resetScan(ctx, events[i:i+n]); err != nil {
					return err
				}
				i += n - 1
				continue
			}
		}
		ev := events[i]
		info, ok := ystore.ParseRoom(ev.Room)
		if !ok || info.Kind != ystore.KindNotebook {
			if err := r.trackOther(ctx, ev); err != nil {
				return err
			}
			continue
		}
		switch ev.Kind {
		case ystore.EventReset:
			if err := r.reset(ctx, info, ev); err != nil {
				return err
			}
		case ystore.EventUpdates:
			r.update(ctx, info, ev.Rows)
		case ystore.EventRemoved:
			r.remove(info)
		}
	}
	return nil
}

// trackOther counts the rows of a room that is not a notebook's (a streamed Reset's are
// read to be counted).
func (r *Set) trackOther(ctx context.Context, ev ystore.Event) error {
	if ev.Kind == ystore.EventRemoved {
		r.mu.Lock()
		delete(r.others, ev.Room)
		delete(r.refused, ev.Room)
		r.mu.Unlock()
		return nil
	}
	if !r.takeOther(ev.Room, ev.Kind == ystore.EventReset) {
		return nil
	}
	n := 0
	if err := ev.Each(ctx, func(rows []ystore.Row) error { n += len(rows); return nil }); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Kind == ystore.EventReset {
		r.others[ev.Room] = n
	} else {
		r.others[ev.Room] += n
	}
	return nil
}

// reset replaces a room's document by one built from the event's rows alone, read as they
// stream in (ystore.Event.Each); when they cannot be read, the room is left as it was and
// the error returned. A room past the Set's bounds is refused, and dropped if held
// (bound.go).
func (r *Writer) reset(ctx context.Context, info ystore.Room, ev ystore.Event) error {
	budget, ok := r.admit(info.Key, 0)
	if !ok {
		return nil
	}
	r.mu.RLock()
	rm := r.rooms[info.Key]
	r.mu.RUnlock()
	m := r.meter(rm) // the load may take what the document it replaces holds
	ld := r.newRoomLoad(info, &budget, m)
	err := ev.Each(ctx, func(rows []ystore.Row) error { return ld.add(ctx, rows) })
	if bound := overBound(err); bound != "" {
		ld.abandon()
		if rm != nil {
			r.drop(rm, "room dropped: it passes the store's bound")
		}
		r.refuse(info.Key, bound)
		return nil
	}
	if err != nil {
		ld.abandon()
		return fmt.Errorf("load room %s: %w", info.Key, err)
	}
	r.install(ctx, info, m, ld.done())
	return nil
}

// install makes the document l built for the room info (charged to m) the room's, in
// place of the one it held, and tells what changed.
func (r *Writer) install(ctx context.Context, info ystore.Room, m *roomMeter, l loaded) {
	nb := l.nb
	var ch ynotebook.Changes
	if l.bad < l.rows {
		ch = addedAll(nb.Snapshot())
	}
	r.mu.Lock()
	rm, existed := r.rooms[info.Key]
	if !existed {
		rm = &room{info: info}
		r.rooms[info.Key] = rm
	}
	r.bytes += l.bytes - rm.bytes
	rm.bytes = l.bytes
	r.mu.Unlock()

	rm.mu.Lock()
	if rm.nb != nil {
		rm.nb.Doc().SetMeter(nil) // replaced: what it held is given back
	}
	m.settle()
	prev := rm.served()
	wasDegraded := rm.degraded()
	same := false
	if rm.nb != nil {
		// The old document is gone as a whole: whatever it held has changed too, unless
		// the rebuilt one is the same (a room re-read after a squash or a restore).
		if old := rm.nb.Snapshot(); sameNotebook(old, nb.Snapshot()) {
			ch, same = ynotebook.Changes{}, true
		} else {
			ch.Merge(removedAll(old))
		}
	}
	rm.nb, rm.rows, rm.badRows = nb, l.rows, l.bad
	rm.detached = false
	rm.updated = time.Now()
	o := originAt(info, l.newest)
	var content time.Time
	if !same {
		content = o.At // what the document shows is as of its newest row
	}
	ch, _ = r.storeApplied(rm, ch, prev, o.At, content, true)
	r.observe(rm)
	degraded := rm.degraded() != wasDegraded
	rm.mu.Unlock()

	p := r.resolvePath(ctx, rm)
	if degraded { // counted again only then: a load of many rooms is not quadratic
		r.metrics.SetDegraded(r.degradedCount())
	}
	r.log.Debug("room loaded", logkey.Room, info.Key, logkey.Path, p, "rows", l.rows, "bad_rows", l.bad)
	if l.bytes >= heap.Large {
		heap.Release() // the rows as read and the copies made while decoding
	}
	if !ch.Empty() && p != "" {
		r.notify.Changed(p, ch, o)
	}
	r.consult(rm)
}

// update applies rows on top of a room's document; a room refused is left out, and one
// whose rows grow past the Set's bytes bound is dropped and refused (bound.go).
func (r *Writer) update(ctx context.Context, info ystore.Room, rows []ystore.Row) {
	var n int64
	for _, row := range rows {
		n += int64(len(row.Update))
	}
	rm, over := r.hold(info, n)
	if over != nil {
		r.drop(over, "room dropped: its rows grew past the store's bound")
		r.refuse(info.Key, BoundBytes)
		return
	}
	if rm == nil {
		return
	}

	var ch ynotebook.Changes
	rm.mu.Lock()
	if rm.nb == nil || rm.detached {
		// A detached room's document is of the store it left: the rows are of a new one.
		if rm.nb != nil {
			rm.nb.Doc().SetMeter(nil)
		}
		rm.nb, rm.detached, rm.oracle = r.newNotebook(), false, oracle{}
	}
	prev := rm.served()
	rm.rows += len(rows)
	badBefore, wasDegraded := rm.badRows, rm.degraded()
	var content time.Time // commit time of the newest row that changed what the document shows
	for i, row := range rows {
		c, err := r.applyRow(rm.nb, info, row, rm.badRows)
		if errors.Is(err, yjs.ErrBudget) {
			rm.mu.Unlock()
			r.drop(rm, "room dropped: its document grew past the store's memory bound")
			r.refuse(info.Key, BoundMemory)
			return
		}
		if err != nil {
			rm.badRows++
			continue
		}
		if !c.Empty() {
			content = later(content, originOf(info, []ystore.Row{row}).At)
			if i < len(rows)-1 {
				r.observe(rm) // every state a replica may serve gets its version kept
			}
		}
		ch.Merge(c)
	}
	rm.updated = time.Now()
	o := originOf(info, rows)
	ch, reload := r.storeApplied(rm, ch, prev, o.At, content, false)
	r.observe(rm)
	p, degraded := rm.path, rm.badRows > badBefore || rm.degraded() != wasDegraded
	rm.mu.Unlock()

	// The path is resolved once here; renames are followed by RefreshPaths, so an
	// update, the hot path, does no file id lookup.
	if p == "" {
		p = r.resolvePath(ctx, rm)
	}
	if degraded {
		r.metrics.SetDegraded(r.degradedCount())
	}
	if !ch.Empty() && p != "" {
		r.notify.Changed(p, ch, o)
	}
	if reload {
		r.log.Info("room's content moved on from its saved file; rebuilding it from the store", logkey.Room, info.Key, logkey.Path, p)
		r.reload(info.Key)
	}
	r.consult(rm)
}

// loaded is a room's document built by a roomLoad, with its rows, the bad ones among
// them, their bytes and the commit time of the newest (seconds since the epoch; -Inf
// without rows).
type loaded struct {
	nb        *ynotebook.Notebook
	rows, bad int
	bytes     int64
	newest    float64
}

// roomLoad builds a room's document from its rows as they stream in, one at a time
// (ynotebook.Loading: no change sets, one read at the end), logging and counting the rows
// that do not decode; the document is charged to its meter.
type roomLoad struct {
	set    *Set
	info   ystore.Room
	budget *int64 // the bytes its rows may still take (negative: no bound), maybe shared
	ld     *ynotebook.Loading
	l      loaded
	start  time.Time
}

// newRoomLoad starts the load of room info, its rows' bytes taken from *budget
// (negative: none) and its document charged to m.
func (r *Set) newRoomLoad(info ystore.Room, budget *int64, m *roomMeter) *roomLoad {
	return &roomLoad{set: r, info: info, budget: budget, ld: ynotebook.NewLoading(m.meter()),
		l: loaded{newest: math.Inf(-1)}, start: time.Now()}
}

// add applies rows, the room's next in load order, checking ctx before each, so that a
// load stops between any two rows. Its error is ctx's, errOverBytes once a row's bytes
// would pass the budget, before that row is decoded, or one wrapping yjs.ErrBudget once
// the document would pass the memory its meter has left.
func (x *roomLoad) add(ctx context.Context, rows []ystore.Row) error {
	for _, row := range rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int64(len(row.Update))
		if *x.budget >= 0 {
			if n > *x.budget {
				return errOverBytes
			}
			*x.budget -= n
		}
		x.l.bytes += n
		x.l.newest = max(x.l.newest, row.Timestamp)
		err := x.ld.Add(row.Update)
		if errors.Is(err, yjs.ErrBudget) {
			return fmt.Errorf("row %d: %w", row.ID, err)
		}
		if err != nil {
			x.set.logSkipped(x.info, row, x.l.bad, err)
			x.l.bad++
		}
		x.l.rows++
	}
	return nil
}

// done ends the load and returns the document, counted in the Set's metrics.
func (x *roomLoad) done() loaded {
	if x.l.bad > badLogged {
		x.set.log.Warn("undecodable rows skipped", logkey.Room, x.info.Key, "rows", x.l.bad, "logged", badLogged)
	}
	x.l.nb = x.ld.Done()
	if x.l.rows > 0 {
		x.set.metrics.ObserveApply(x.start, x.l.newest)
	}
	x.set.metrics.DecodeErrors(x.l.bad)
	x.set.metrics.RowsApplied(x.l.rows - x.l.bad)
	return x.l
}

// abandon ends a load that failed: what its document held is given back, and the bytes
// its rows took to the budget.
func (x *roomLoad) abandon() {
	x.ld.Abandon()
	if *x.budget >= 0 {
		*x.budget += x.l.bytes
	}
	x.l = loaded{newest: math.Inf(-1)}
}

// badLogged is how many of a room's bad rows are logged at Warn, by a load or as they
// come: a document that failed (yjs.Doc's failed) refuses every later row, and a crafted
// store may hold millions; the rest are logged at Debug, and all counted.
const badLogged = 8

// logSkipped logs a row skipped because it did not decode or its document failed; bad is
// how many rows of the room were skipped before it.
func (r *Set) logSkipped(info ystore.Room, row ystore.Row, bad int, err error) {
	level := r.log.Warn
	if bad >= badLogged {
		level = r.log.Debug
	}
	level("undecodable row skipped", logkey.Room, info.Key, "row", row.ID, "bytes", len(row.Update), "err", err)
}

// applyRow applies one row, logging and counting a row that does not decode; bad is how
// many of the room's rows were bad before it (past badLogged, it is logged at Debug).
func (r *Set) applyRow(nb *ynotebook.Notebook, info ystore.Room, row ystore.Row, bad int) (ynotebook.Changes, error) {
	start := time.Now()
	ch, err := nb.Apply(row.Update)
	r.metrics.ObserveApply(start, row.Timestamp)
	if err != nil {
		r.metrics.DecodeErrors(1)
		r.logSkipped(info, row, bad, err)
		return ynotebook.Changes{}, fmt.Errorf("room %s row %d: %w", info.Key, row.ID, err)
	}
	r.metrics.RowsApplied(1)
	return ch, nil
}

// remove takes a room out of the store: its notebook stays served from its file if that
// exists (filerooms.go), and is gone otherwise.
func (r *Writer) remove(info ystore.Room) {
	r.unrefuse(info.Key)
	r.mu.RLock()
	rm, ok := r.rooms[info.Key]
	r.mu.RUnlock()
	if !ok {
		return
	}
	if r.detach(rm) {
		return
	}
	r.drop(rm, "room removed from the store")
}

// drop forgets a room, telling the subscribers of its notebook it is gone.
func (r *Writer) drop(rm *room, why string) {
	info := rm.info
	r.mu.Lock()
	if r.rooms[info.Key] != rm {
		r.mu.Unlock()
		return
	}
	delete(r.rooms, info.Key)
	r.bytes -= rm.bytes
	r.memory.Add(-rm.filesMemory)
	rm.bytes, rm.filesMemory = 0, 0
	rm.mu.Lock()
	if rm.nb != nil {
		rm.nb.Doc().SetMeter(nil)
	}
	p := rm.path
	snap := rm.served() // taken under rm.mu: a read may take one at the same time
	r.forget(rm)
	rm.mu.Unlock()
	r.reindex(rm, p, "")
	r.mu.Unlock()
	r.metrics.SetDegraded(r.degradedCount())
	r.log.Info(why, logkey.Room, info.Key, logkey.Path, p)
	if p != "" && snap != nil {
		ch := removedAll(snap)
		ch.Metadata = true
		r.notify.Changed(p, ch, originOf(info, nil))
	}
}

// sameNotebook reports whether a and b serve the same nbformat JSON.
func sameNotebook(a, b *ynotebook.Snapshot) bool {
	ja, errA := a.JSON()
	jb, errB := b.JSON()
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// removedAll reports every cell of s as removed.
// addedAll is the change of a notebook that appears whole: its metadata and every cell.
func addedAll(s *ynotebook.Snapshot) ynotebook.Changes {
	ch := ynotebook.Changes{Metadata: true}
	for _, c := range s.All() {
		ch.Added = append(ch.Added, c.ID)
	}
	return ch
}

func removedAll(s *ynotebook.Snapshot) ynotebook.Changes {
	ch := ynotebook.Changes{Metadata: true}
	for _, c := range s.All() {
		ch.Removed = append(ch.Removed, c.ID)
	}
	return ch
}

// resolvePath finds a room's notebook path: the key's own path, the file id database,
// then the document's state.path. It records and returns the path, and reports a
// notebook whose path changed as moved, and one whose file id and file are both gone as
// gone. A failed lookup keeps the known path.
func (r *Writer) resolvePath(ctx context.Context, rm *room) string {
	p := rm.info.Path
	idGone := false
	if p == "" && rm.info.FileID != "" && r.resolver != nil {
		got, err := r.resolver.Path(ctx, rm.info.FileID)
		switch {
		case err == nil:
			p = got
		case errors.Is(err, fileid.ErrNotFound):
			idGone = true
		case !errors.Is(err, fileid.ErrNotFound):
			level := slog.LevelWarn
			if errors.Is(err, fileid.ErrUnreadable) {
				level = slog.LevelDebug // the resolver warned once for every room (its Fault)
			}
			r.log.Log(ctx, level, "file id lookup failed", logkey.Room, rm.info.Key, "file_id", rm.info.FileID, "err", err)
			rm.mu.Lock()
			defer rm.mu.Unlock()
			return rm.path
		}
	}
	r.mu.Lock()
	rm.mu.Lock()
	if p == "" && rm.nb != nil {
		p = rm.nb.State().Path
	}
	raw, refused := p, ""
	p, rooted := names.RootedPath(raw)
	if !rooted && rm.refusedPath != raw {
		rm.refusedPath, refused = raw, raw // told once a path, not at every resolve
	}
	old, loaded := rm.path, rm.nb != nil
	rm.path = p
	if p != old {
		rm.gone = false // the file at the new path is read again (WatchPaths)
	}
	rm.mu.Unlock()
	if r.rooms[rm.info.Key] == rm && loaded { // not removed meanwhile, and servable
		r.reindex(rm, old, p)
	}
	r.mu.Unlock()
	if refused != "" {
		r.log.Warn("notebook path climbs out of the root directory; the room is not served", logkey.Room, rm.info.Key, logkey.Path, refused)
	}
	if old != "" && p != "" && p != old {
		r.log.Info("notebook path changed", logkey.Room, rm.info.Key, "from", old, "to", p)
		r.notify.Moved(old, p, Origin{Room: rm.info})
	}
	if idGone && p != "" && r.files != nil && !r.files.Exists(p) {
		// Deleted through Jupyter: its file id and its file are gone, maybe before the
		// file watcher ever read the file.
		r.markGone(rm, p)
	}
	return p
}

// reindex moves rm from path old to path p ("" for none) in the path index; r.mu is held.
func (r *Set) reindex(rm *room, old, p string) {
	if set := r.byPath[old]; set != nil && old != p {
		delete(set, rm)
		if len(set) == 0 {
			delete(r.byPath, old)
		}
	}
	if p == "" {
		return
	}
	if r.byPath[p] == nil {
		r.byPath[p] = make(map[*room]struct{}, 1)
	}
	r.byPath[p][rm] = struct{}{}
}

// RefreshPaths re-resolves every room's path, so renames are followed.
func (r *Writer) RefreshPaths(ctx context.Context) {
	for _, rm := range r.snapshotRooms() {
		r.resolvePath(ctx, rm)
	}
}

// snapshotRooms lists the notebook rooms now.
func (r *Set) snapshotRooms() []*room {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Collect(maps.Values(r.rooms))
}

func (r *Set) count() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.rooms)
}

func (r *Set) degradedCount() int {
	n := 0
	for _, rm := range r.snapshotRooms() {
		if rm.status().Degraded {
			n++
		}
	}
	return n
}

// status returns rm's Info: read now when its lock is free, else as last read. A room's
// lock is held through notebook-sized work (applying rows, hashing a version), and what
// asks for the status (/readyz, /metrics, the hub's users gauge) must not wait for it:
// one user's busy room held /metrics for minutes (red team of issue 39, pass 6, F7).
func (rm *room) status() Info {
	if !rm.mu.TryLock() {
		if in := rm.last.Load(); in != nil {
			return *in
		}
		return Info{Key: rm.info.Key, Kind: rm.info.Kind.String(), FileID: rm.info.FileID}
	}
	in := Info{
		Key: rm.info.Key, Kind: rm.info.Kind.String(), FileID: rm.info.FileID,
		Path: rm.path, Rows: rm.rows, BadRows: rm.badRows, Diverged: rm.diverged != nil,
		Gaps: gapsOf(rm.gaps), GapClients: rm.gapClients, Degraded: rm.degraded(),
	}
	if rm.failed() {
		in.Failed = rm.nb.Doc().Failed().Error()
	}
	rm.last.Store(&in)
	rm.mu.Unlock()
	return in
}

// degraded reports whether rm skipped an undecodable row, differed from its saved file,
// or waits for updates missing from the store; rm.mu is held.
func (rm *room) degraded() bool { return rm.badRows > 0 || rm.diverged != nil || rm.gaps != nil }

// Degraded lists the keys of degraded rooms (an undecodable row skipped, a document that
// differed from its saved file, updates missing from the store), sorted.
func (r *Set) Degraded() []string {
	var out []string
	for _, ri := range r.Infos() {
		if ri.Degraded {
			out = append(out, ri.Key)
		}
	}
	return out
}

// Infos describes every room, notebooks and others, sorted by key; a room busy now as it
// was last described (room.status).
func (r *Set) Infos() []Info {
	var out []Info
	for _, rm := range r.snapshotRooms() {
		out = append(out, rm.status())
	}
	r.mu.RLock()
	for key, n := range r.others {
		info, _ := ystore.ParseRoom(key)
		out = append(out, Info{Key: key, Kind: info.Kind.String(), FileID: info.FileID, Path: info.Path, Rows: n})
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// find returns the most recently updated served notebook room at path.
func (r *Set) find(p string) *room { return r.findAt(p, false) }

// findAt returns the most recently updated notebook room at path, through the path index
// (only the rooms at path are locked), including those whose file is gone if gone is set.
func (r *Set) findAt(p string, gone bool) *room {
	p = names.NormalizePath(p)
	r.mu.RLock()
	at := slices.Collect(maps.Keys(r.byPath[p]))
	r.mu.RUnlock()
	var best *room
	var bestAt time.Time
	for _, rm := range at {
		rm.mu.Lock()
		match, updated := rm.path == p && (gone || !rm.gone), rm.updated
		rm.mu.Unlock()
		if match && (best == nil || updated.After(bestAt)) {
			best, bestAt = rm, updated
		}
	}
	return best
}

// Notebook returns the notebook at path as a read sees it now: the live document, or
// its file while that is served instead (filerooms.go).
func (r *Set) Notebook(p string) (*ynotebook.Snapshot, error) {
	snap, _, err := r.SourcedNotebook(p)
	return snap, err
}

// SourcedNotebook is Notebook with where the snapshot comes from (library.SourcedLibrary).
func (r *Set) SourcedNotebook(p string) (*ynotebook.Snapshot, library.Source, error) {
	s, err := r.Served(p)
	return s.Snapshot, s.Source, err
}

// Paths lists the paths of the notebooks served, sorted and unique.
func (r *Set) Paths() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for p, set := range r.byPath {
		for rm := range set {
			rm.mu.Lock()
			gone := rm.gone
			rm.mu.Unlock()
			if !gone {
				out = append(out, p)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// WatchPaths lists the paths whose files the ondisk watcher reads: every path of a room,
// served or gone, sorted and unique.
func (r *Set) WatchPaths() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.byPath))
}
