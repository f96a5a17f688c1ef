package sqlite

import (
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/fsnotify/fsnotify"
)

// waker turns file events on the store, its journal and its WAL files into wake-ups. It
// watches the directory, so that a store created or renamed later is seen too.
type waker struct {
	log   *slog.Logger
	dir   string
	names map[string]bool
	wake  chan struct{}

	w       *fsnotify.Watcher
	watched atomic.Bool // false until the directory watch is in place, and after it is removed
	wg      sync.WaitGroup
}

// newWaker starts watching path's directory; with enabled false, or if the watcher cannot
// be made, it never wakes (polling remains).
func newWaker(path string, enabled bool, log *slog.Logger) *waker {
	path = filepath.Clean(path)
	k := &waker{log: log, dir: filepath.Dir(path), wake: make(chan struct{}, 1), names: map[string]bool{}}
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		k.names[path+suffix] = true
	}
	if !enabled {
		return k
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Warn("file events unavailable; polling only", "err", err)
		return k
	}
	k.w = w
	k.watch()
	k.wg.Add(1)
	go k.loop()
	return k
}

// watch adds the directory watch if it is not in place (the directory may appear later).
func (k *waker) watch() {
	if k.w == nil || k.watched.Load() {
		return
	}
	if err := k.w.Add(k.dir); err != nil {
		k.log.Debug("cannot watch the store directory yet", "dir", k.dir, "err", err)
		return
	}
	k.watched.Store(true)
}

func (k *waker) loop() {
	defer k.wg.Done()
	for {
		select {
		case ev, ok := <-k.w.Events:
			if !ok {
				return
			}
			name := filepath.Clean(ev.Name)
			if name == k.dir && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) {
				k.watched.Store(false) // the directory went away; watch again at the next poll
			}
			if k.names[name] {
				select {
				case k.wake <- struct{}{}:
				default:
				}
			}
		case err, ok := <-k.w.Errors:
			if !ok {
				return
			}
			k.log.Warn("file events", "err", err)
		}
	}
}

func (k *waker) close() {
	if k.w != nil {
		k.w.Close()
		k.wg.Wait()
	}
}
