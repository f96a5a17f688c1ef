// Package ondisk watches the .ipynb files of the notebooks the rooms know, so that a
// notebook rewritten while no room is open (jupyter-mcp-server without a room, git pull,
// nbconvert --inplace, a copy in the file browser) is seen: each changed file is parsed
// (ynotebook.Parse) and handed on; the sidecar decides whether it serves it. The
// directories of the files are watched with fsnotify, at most MaxWatchedDirs of them;
// the files of the others, or all when inotify is unavailable, are polled. Events of one
// file are coalesced; no file larger than MaxFileBytes is read.
package ondisk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/confine"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// Defaults of Config.
const (
	DefaultPollInterval   = 2 * time.Second
	DefaultMaxWatchedDirs = 256
	DefaultMaxFileBytes   = 32 << 20
	DefaultCoalesce       = 100 * time.Millisecond
	DefaultGoneAfter      = 2 * time.Second
)

// ErrTooLarge is wrapped by the error of a file larger than Config.MaxFileBytes.
var ErrTooLarge = errors.New("notebook file too large")

// Config configures a Watcher; zero fields take their defaults.
type Config struct {
	Root            string        // the Jupyter root directory the notebook paths are relative to
	PollInterval    time.Duration // how often polled files are checked and the path list is re-read
	MaxWatchedDirs  int           // most directories watched with fsnotify; the rest are polled
	MaxFileBytes    int64         // larger files are not read
	DisableFSNotify bool          // true: poll every file; default: fsnotify, on at most MaxWatchedDirs directories
	Coalesce        time.Duration // quiet time after a file's last event before it is read
	GoneAfter       time.Duration // how long a file stays missing before it is reported gone
	// Confine (hub mode) is the user's directory, Root: a path is resolved beneath it,
	// symbolic links followed only while they stay inside it, and a file is read only if
	// it is the user's (ystore/confine): a link to another user's notebook, symbolic or
	// hard, is not read, nor anything once the directory was replaced. Nil follows links
	// anywhere, as the Jupyter server does.
	Confine *confine.Dir
	// Logger receives the watcher's logs; nil: slog.Default().
	Logger *slog.Logger
}

// Validate reports what is wrong with the bounds the daemon sets on c (PollInterval,
// MaxWatchedDirs, MaxFileBytes), each a *keyerr.KeyError (keyerr.ErrInvalid) naming its
// field in snake case (sidecar/config renames them to the daemon's keys): a bound not
// above zero. New itself takes such a bound as its default.
func (c Config) Validate() error {
	var errs []error
	if c.PollInterval <= 0 {
		errs = append(errs, keyerr.Invalid("poll_interval", "must be > 0, got %s", c.PollInterval))
	}
	for _, n := range []struct {
		key string
		n   int64
	}{{"max_watched_dirs", int64(c.MaxWatchedDirs)}, {"max_file_bytes", c.MaxFileBytes}} {
		if n.n <= 0 {
			errs = append(errs, keyerr.Invalid(n.key, "must be > 0, got %d", n.n))
		}
	}
	return errors.Join(errs...)
}

// withDefaults is c with each field that is not positive set to its default.
func (c Config) withDefaults() Config {
	c.PollInterval = cmp.Or(max(c.PollInterval, 0), DefaultPollInterval)
	c.MaxWatchedDirs = cmp.Or(max(c.MaxWatchedDirs, 0), DefaultMaxWatchedDirs)
	c.MaxFileBytes = cmp.Or(max(c.MaxFileBytes, 0), DefaultMaxFileBytes)
	c.Coalesce = cmp.Or(max(c.Coalesce, 0), DefaultCoalesce)
	c.GoneAfter = cmp.Or(max(c.GoneAfter, 0), DefaultGoneAfter)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// File is a notebook file as read: its path relative to the root, its content, the
// memory its content holds, and its modification time; or, with Gone set (and no
// content), a file that does not exist.
type File struct {
	Path     string
	Snapshot *ynotebook.Snapshot
	Bytes    int64 // Snapshot.Footprint(): what holding the file costs (sidecar/rooms' bound)
	ModTime  time.Time
	Gone     bool
}

// conversions bounds the notebook files parsed at once in the process, all watchers
// (hub mode: all users) together: half the cores, at least one, so that files,
// whoever writes them, leave cores to everything else. A watcher parses one at a time.
var conversions = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// Notebooks are what a Watcher watches the files of.
type Notebooks interface {
	// WatchPaths lists the paths to watch, relative to the root; re-read every PollInterval.
	WatchPaths() []string
	// ApplyFile takes a file that is new to the watcher, changed since it was last read,
	// or gone; it is called from Run's goroutine with Run's context.
	ApplyFile(ctx context.Context, f File)
}

// Watcher reports notebook files that changed, and reads one on demand (Read, Exists).
// New builds it without I/O; Run watches.
type Watcher struct {
	cfg  Config
	log  *slog.Logger
	conv chan struct{} // held while this watcher parses a file: one at a time
}

// New returns a watcher of the notebook files under cfg.Root. No I/O.
func New(cfg Config) *Watcher {
	cfg = cfg.withDefaults()
	return &Watcher{cfg: cfg, log: cfg.Logger, conv: make(chan struct{}, 1)}
}

// stat is what tells a file changed without reading it.
type stat struct {
	mtime time.Time
	size  int64
}

// run is the state of one Run.
type run struct {
	*Watcher
	nbs     Notebooks
	ctx     context.Context
	rootDir string               // the root, absolute
	fsw     *fsnotify.Watcher    // nil: polling only
	known   map[string]stat      // path → as last read (zero: not readable)
	watched map[string]bool      // directories watched with fsnotify
	pending map[string]time.Time // path → when to check it
	missing map[string]time.Time // path → when it was first found missing, not yet reported gone
	refused map[string]bool      // paths whose last read failed and was logged at warn
}

// Run watches the files of nbs until ctx is done; it returns nil then.
func (w *Watcher) Run(ctx context.Context, nbs Notebooks) error {
	root := w.root()
	if abs, err := filepath.Abs(root); err == nil {
		root = abs // event names are absolute
	}
	r := &run{Watcher: w, nbs: nbs, ctx: ctx, rootDir: root, known: map[string]stat{}, watched: map[string]bool{}, pending: map[string]time.Time{}, missing: map[string]time.Time{}, refused: map[string]bool{}}
	var events chan fsnotify.Event
	var errs chan error
	if !w.cfg.DisableFSNotify {
		fsw, err := fsnotify.NewWatcher()
		if err != nil {
			w.log.Warn("notebook files are polled: fsnotify unavailable", "err", err, "interval", w.cfg.PollInterval)
		} else {
			r.fsw, events, errs = fsw, fsw.Events, fsw.Errors
			defer func() { _ = fsw.Close() }()
		}
	}
	tick := time.NewTicker(w.cfg.PollInterval)
	defer tick.Stop()
	coalesce := time.NewTimer(time.Hour)
	coalesce.Stop()
	r.sync()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			r.sync()
			if next, ok := r.flush(time.Now()); ok {
				coalesce.Reset(next)
			}
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if r.event(ev) {
				coalesce.Reset(w.cfg.Coalesce)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// An overflowed queue lost events: look at every file again.
			w.log.Warn("notebook file events lost; checking every file", "err", err)
			for p := range r.known {
				r.check(p)
			}
			if next, ok := r.flush(time.Now()); ok {
				coalesce.Reset(next)
			}
		case <-coalesce.C:
			if next, ok := r.flush(time.Now()); ok {
				coalesce.Reset(next)
			}
		}
	}
}

// sync reads the path list: new files are read, directories watched or unwatched, and the
// files outside watched directories polled.
func (r *run) sync() {
	want := map[string]bool{}
	dirs := map[string]bool{}
	for _, p := range r.nbs.WatchPaths() {
		want[p] = true
		dirs[filepath.Dir(r.abs(p))] = true
	}
	for p := range r.known {
		if !want[p] {
			delete(r.known, p)
			delete(r.pending, p)
			delete(r.missing, p)
		}
	}
	added := r.watchDirs(dirs)
	for p := range want {
		// Files in a directory watched from now on may have changed before its watch.
		d := filepath.Dir(r.abs(p))
		if _, seen := r.known[p]; !seen || !r.watched[d] || added[d] {
			r.check(p)
		}
	}
}

// watchDirs watches the first MaxWatchedDirs of dirs (sorted) and no other directory;
// it returns the directories it started to watch.
func (r *run) watchDirs(dirs map[string]bool) map[string]bool {
	if r.fsw == nil {
		return nil
	}
	added := map[string]bool{}
	for d := range r.watched {
		if !dirs[d] {
			_ = r.fsw.Remove(d)
			delete(r.watched, d)
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if r.watched[d] {
			continue
		}
		if len(r.watched) >= r.cfg.MaxWatchedDirs {
			r.log.Debug("notebook directory polled: watch cap reached", "dir", d, "max_watched_dirs", r.cfg.MaxWatchedDirs)
			continue
		}
		if err := r.fsw.Add(d); err != nil {
			r.log.Debug("notebook directory polled: watch failed", "dir", d, "err", err)
			continue
		}
		r.watched[d] = true
		added[d] = true
	}
	return added
}

// event notes a file event; it reports whether a known file is now pending.
func (r *run) event(ev fsnotify.Event) bool {
	if !ev.Has(fsnotify.Write) && !ev.Has(fsnotify.Create) && !ev.Has(fsnotify.Rename) && !ev.Has(fsnotify.Chmod) && !ev.Has(fsnotify.Remove) {
		return false
	}
	rel, err := filepath.Rel(r.root(), ev.Name)
	if err != nil {
		return false
	}
	p := filepath.ToSlash(rel)
	if _, ok := r.known[p]; !ok {
		return false
	}
	r.pending[p] = time.Now().Add(r.cfg.Coalesce)
	return true
}

// flush checks the pending files whose quiet time is over; it returns how long until the
// next is due, if any is left.
func (r *run) flush(now time.Time) (time.Duration, bool) {
	var due []string
	for p, at := range r.pending {
		if !at.After(now) {
			due = append(due, p)
		}
	}
	for _, p := range due {
		delete(r.pending, p)
		r.check(p) // may pend p again: a file missing for less than GoneAfter
	}
	var next time.Time
	for _, at := range r.pending {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return max(next.Sub(now), 0), !next.IsZero()
}

// check reads the file of p if it changed since it was last read, and reports it; a file
// read before that no longer exists is reported gone, once, when it has stayed missing
// for GoneAfter (a rename shows the old path missing until the room's path follows, and
// some editors delete a file before writing it again). One never seen is not: a sidecar
// that cannot see the notebooks' files serves the store alone.
func (r *run) check(p string) {
	old, seen := r.known[p]
	f, st, err := r.read(p, old, seen)
	r.known[p] = st
	if !errors.Is(err, fs.ErrNotExist) {
		delete(r.missing, p)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if seen && old != (stat{}) && old != gone {
			now := time.Now()
			since, ok := r.missing[p]
			if !ok {
				since, r.missing[p] = now, now
			}
			if now.Sub(since) < r.cfg.GoneAfter {
				r.known[p] = old // still the file last read, until GoneAfter is over
				r.pending[p] = since.Add(r.cfg.GoneAfter)
				return
			}
			delete(r.missing, p)
			r.nbs.ApplyFile(r.ctx, File{Path: p, Gone: true})
		}
		if seen && old != (stat{}) {
			r.known[p] = gone
		}
	case err != nil:
		// A save too large, cut short, not a notebook, or outside the user's directory
		// leaves what is served as it was, which an operator must hear: at warn once
		// until the file reads again, so that a file rewritten badly in a loop does not
		// flood the log; at debug for each later change.
		if seen && old != st || !seen {
			level := r.log.Debug
			if !r.refused[p] {
				level, r.refused[p] = r.log.Warn, true
			}
			level("notebook file not read", logkey.Path, p, "err", err, "served", "unchanged")
		}
	case !seen || old != st:
		delete(r.refused, p)
		r.nbs.ApplyFile(r.ctx, f)
	}
}

// gone is the stat of a file known not to exist.
var gone = stat{size: -1}

// Read reads and parses the notebook file at p (relative to the root) now.
func (w *Watcher) Read(p string) (File, error) {
	f, _, err := w.files(w.root()).read(p, w.cfg.MaxFileBytes, stat{}, false)
	return f, err
}

// Exists reports whether the file at p (relative to the root) exists now; one that
// confinement refuses does not.
func (w *Watcher) Exists(p string) bool {
	_, err := w.files(w.root()).stat(p)
	return !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, confine.ErrRefused)
}

// ModTime returns the modification time of the file at p (relative to the root) now.
func (w *Watcher) ModTime(p string) (time.Time, error) {
	fi, err := w.files(w.root()).stat(p)
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

// read stats p and, unless unchanged since last read (old, if seen), parses it.
func (r *run) read(p string, old stat, seen bool) (File, stat, error) {
	return r.files(r.root()).read(p, r.cfg.MaxFileBytes, old, seen)
}

// files are the notebook files under root, confined to the user's directory or not
// (Config.Confine), parsed one at a time (conv) within the process's conversions.
type files struct {
	root    string
	confine *confine.Dir
	conv    chan struct{}
}

func (w *Watcher) files(root string) files {
	return files{root: root, confine: w.cfg.Confine, conv: w.conv}
}

// parse parses data, the file at p, once it has its watcher's turn and one of the
// process's conversions.
func (d files) parse(p string, data []byte, maxBytes int64) (*ynotebook.Snapshot, error) {
	d.conv <- struct{}{}
	defer func() { <-d.conv }()
	conversions <- struct{}{}
	defer func() { <-conversions }()
	snap, err := ynotebook.Parse(data, ynotebook.Limits{MaxBytes: int(maxBytes)})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return snap, nil
}

// stat returns the file at p (relative to the root).
func (d files) stat(p string) (fs.FileInfo, error) {
	abs := filepath.Join(d.root, filepath.FromSlash(p))
	if d.confine != nil {
		return d.confine.Stat(abs)
	}
	return os.Stat(abs)
}

// open opens the regular file at p (relative to the root) for reading, without waiting
// on a named pipe; a confined one is checked on the open file to be the user's.
func (d files) open(p string) (*os.File, error) {
	abs := filepath.Join(d.root, filepath.FromSlash(p))
	if d.confine != nil {
		f, _, err := d.confine.OpenFile(abs)
		return f, err
	}
	return os.OpenFile(abs, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// read stats p and, unless its stat is old (if seen), parses it; a file of more than
// maxBytes is not read.
func (d files) read(p string, maxBytes int64, old stat, seen bool) (File, stat, error) {
	fi, err := d.stat(p)
	if err != nil {
		return File{}, stat{}, err
	}
	st := stat{mtime: fi.ModTime(), size: fi.Size()}
	if seen && old == st {
		return File{}, st, nil
	}
	if !fi.Mode().IsRegular() {
		return File{}, st, fmt.Errorf("%s: not a regular file", p)
	}
	if st.size > maxBytes {
		return File{}, st, fmt.Errorf("%w: %s has %d bytes, at most %d", ErrTooLarge, p, st.size, maxBytes)
	}
	fh, err := d.open(p)
	if err != nil {
		return File{}, st, err
	}
	defer func() { _ = fh.Close() }()
	if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
		return File{}, st, fmt.Errorf("%s: not a regular file", p) // replaced since the stat
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxBytes+1))
	if err != nil {
		return File{}, st, fmt.Errorf("read %s: %w", p, err)
	}
	_ = fh.Close() // parsed with no file open
	snap, err := d.parse(p, data, maxBytes)
	if err != nil {
		return File{}, st, err
	}
	return File{Path: p, Snapshot: snap, Bytes: snap.Footprint(), ModTime: st.mtime}, st, nil
}

func (w *Watcher) root() string {
	if w.cfg.Root == "" {
		return "."
	}
	return filepath.Clean(w.cfg.Root)
}

func (r *run) root() string { return r.rootDir }

func (r *run) abs(p string) string { return filepath.Join(r.root(), filepath.FromSlash(p)) }
