package sqlite

import (
	"cmp"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// Watcher turns file events on stores, their journals and their WAL files into wake-ups
// for the tailers that follow them. It watches the stores' directories, so that a store
// created or renamed later is seen too. One Watcher may serve the tailers of many stores
// (Config.Watcher, hub mode): the kernel bounds the inotify instances of a user
// (fs.inotify.max_user_instances, 128 by default), not their watches. Its methods are
// safe for concurrent use; it starts watching when the first tailer registers.
type Watcher struct {
	log *slog.Logger

	mu      sync.Mutex
	w       *fsnotify.Watcher    // nil until the first registration, and if it cannot be made
	failed  bool                 // the watcher could not be made: every tailer polls
	dirs    map[string]*dirWatch // a directory → its registrations
	byName  map[string][]*waker  // a store file (or journal, WAL) → the tailers woken by it
	closing bool                 // Close was called
	wg      sync.WaitGroup       // the event loop
}

// dirWatch is one watched directory.
type dirWatch struct {
	wakers  int  // registrations
	watched bool // the watch is in place (false after the directory went away)
}

// WatcherConfig configures a Watcher.
type WatcherConfig struct {
	// Logger receives the watcher's logs; slog.Default() if nil.
	Logger *slog.Logger
}

// NewWatcher returns a Watcher; it does no I/O.
func NewWatcher(cfg WatcherConfig) *Watcher {
	return &Watcher{log: cmp.Or(cfg.Logger, slog.Default()), dirs: map[string]*dirWatch{}, byName: map[string][]*waker{}}
}

// Close stops watching; the tailers still registered poll from then on.
func (x *Watcher) Close() error {
	x.mu.Lock()
	x.closing = true
	w := x.w
	x.mu.Unlock()
	if w == nil {
		return nil
	}
	err := w.Close()
	x.wg.Wait()
	return err
}

// waker is one tailer's registration: its store's files and the channel they wake.
type waker struct {
	x     *Watcher // nil: file events are off, the tailer polls
	dir   string
	names []string
	wake  chan struct{}
}

// newWaker registers path's files with x; with x nil the waker never wakes (polling
// remains).
func newWaker(x *Watcher, path string) *waker {
	path = filepath.Clean(path)
	k := &waker{x: x, dir: filepath.Dir(path), wake: make(chan struct{}, 1)}
	if x == nil {
		return k
	}
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		k.names = append(k.names, path+suffix)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, n := range k.names {
		x.byName[n] = append(x.byName[n], k)
	}
	d := x.dirs[k.dir]
	if d == nil {
		d = &dirWatch{}
		x.dirs[k.dir] = d
	}
	d.wakers++
	x.watchLocked(k.dir, d)
	return k
}

// watch adds the directory watch if it is not in place (the directory may appear later).
func (k *waker) watch() {
	if k.x == nil {
		return
	}
	k.x.mu.Lock()
	defer k.x.mu.Unlock()
	if d := k.x.dirs[k.dir]; d != nil {
		k.x.watchLocked(k.dir, d)
	}
}

// close unregisters k; the directory is no longer watched once nobody needs it.
func (k *waker) close() {
	x := k.x
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, n := range k.names {
		ws := x.byName[n]
		for i, o := range ws {
			if o == k {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(x.byName, n)
		} else {
			x.byName[n] = ws
		}
	}
	d := x.dirs[k.dir]
	if d.wakers--; d.wakers > 0 {
		return
	}
	delete(x.dirs, k.dir)
	if d.watched && x.w != nil && !x.closing {
		if err := x.w.Remove(k.dir); err != nil {
			x.log.Debug("unwatching a store directory", "dir", k.dir, "err", err)
		}
	}
}

// watchLocked makes the fsnotify watcher on first use and adds dir's watch; x.mu is held.
func (x *Watcher) watchLocked(dir string, d *dirWatch) {
	if d.watched || x.failed || x.closing {
		return
	}
	if x.w == nil {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			x.failed = true
			x.log.Warn("file events unavailable; polling only", "err", err)
			return
		}
		x.w = w
		x.wg.Add(1)
		go x.loop(w)
	}
	if err := x.w.Add(dir); err != nil {
		x.log.Debug("cannot watch the store directory yet", "dir", dir, "err", err)
		return
	}
	d.watched = true
}

func (x *Watcher) loop(w *fsnotify.Watcher) {
	defer x.wg.Done()
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			x.event(ev)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			x.log.Warn("file events", "err", err)
		}
	}
}

// event wakes the tailers of the file ev names, and notes a watched directory that
// went away (it is watched again at its tailers' next poll). A rollback journal created
// or written means a writer is inside its transaction, holding the RESERVED lock: a read
// now sees nothing new and makes the writer's COMMIT wait for its SHARED lock (and sleep
// in SQLite's busy handler), so only the journal's removal, the commit of the default
// journal mode, wakes; every mode's commit also writes the store file itself.
func (x *Watcher) event(ev fsnotify.Event) {
	name := filepath.Clean(ev.Name)
	x.mu.Lock()
	defer x.mu.Unlock()
	if d := x.dirs[name]; d != nil && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) {
		d.watched = false
	}
	if strings.HasSuffix(name, "-journal") && !ev.Has(fsnotify.Remove) && !ev.Has(fsnotify.Rename) {
		return
	}
	for _, k := range x.byName[name] {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
}
