package rooms

import (
	"context"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/ondisk"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// The file on disk is part of the truth. The store is the live truth while a room
// writes; the .ipynb is the truth where no room is open (jupyter-mcp-server without a
// room, git pull, nbconvert --inplace rewrite it, and the store learns of it only when a
// room reopens and loads the file). So a room serves its notebook's file instead of its
// document when the file is different (ynotebook.Equivalent) and its mtime is after the
// commit time of the room's newest row; subscribers hear the difference (ynotebook.DiffContent)
// with the origin marked as the file. The next row committed after the file's mtime makes
// the store live again; subscribers hear only what that changes in what is served (the
// room reopened and loaded the file: nothing). A file equal to the document, such as the
// server's own save, changes nothing. A room that leaves the store (pycrdt-store moved
// the store aside and started a new file) stays served from its file; a notebook whose
// file is gone (deleted) is not served, and its subscribers hear it removed.

// ApplyFile takes a notebook file the ondisk watcher read, or found gone.
func (r *Writer) ApplyFile(ctx context.Context, f ondisk.File) {
	rm := r.findAt(f.Path, true)
	if rm == nil {
		r.log.Debug("notebook file read", logkey.Path, f.Path, "mtime", f.ModTime, "served", "none: no room")
		return
	}
	if f.Gone {
		r.fileGone(ctx, rm, f.Path)
		return
	}
	rm.mu.Lock()
	var ch ynotebook.Changes
	var served string
	wasDegraded := rm.degraded()
	switch {
	case rm.detached:
		// The store no longer has the room: the file is all there is.
		served = "file: the room is not in the store"
		ch = ynotebook.DiffContent(rm.served(), f.Snapshot)
		rm.file = &f
	case ynotebook.Equivalent(f.Snapshot, rm.nb.Snapshot()):
		// The file is what the store holds (the server saved it): the store is live.
		served = "store: the file is the same"
		rm.saved, rm.diverged, rm.reloading = nil, nil, false
		if rm.file != nil && rm.gaps == nil {
			ch = ynotebook.DiffContent(rm.file.Snapshot, rm.nb.Snapshot())
			rm.file = nil
		}
	case rm.gaps != nil || rm.diverged != nil:
		// Updates are missing, or the document differed from the saved file: the
		// newest save is served (oracle.go).
		served = "file: the room is degraded"
		if rm.file == nil || f.ModTime.After(rm.file.ModTime) {
			ch = ynotebook.DiffContent(rm.served(), f.Snapshot)
			rm.file = &f
		}
	case !f.ModTime.After(rm.lastRow):
		// The store is newer than the file: it stays live. With no content row after
		// the file, it is the server's save, compared once the store reached it (consult).
		served = "store: the file is older than the newest row"
		if rm.file != nil {
			served = "file: older than the newest row, and the file served is newer"
		} else if !rm.lastContent.After(f.ModTime) {
			rm.saved = &f
		}
	case rm.file != nil && ynotebook.Equivalent(f.Snapshot, rm.file.Snapshot):
		served = "file: the same file"
		rm.file.ModTime = f.ModTime
	default:
		served = "file"
		ch = ynotebook.DiffContent(rm.served(), f.Snapshot)
		rm.file = &f
		rm.saved = rm.file // the server's save before its rows, or a file written out of band
	}
	degradedNow := rm.degraded() != wasDegraded
	if rm.gone {
		// The file is back (re-created, or restored): the notebook appears whole.
		rm.gone = false
		served += ", the file is back"
		ch = addedAll(rm.served())
	}
	p, info := rm.path, rm.info
	rm.mu.Unlock()
	r.log.Debug("notebook file read", logkey.Path, f.Path, "mtime", f.ModTime, "served", served)
	if degradedNow {
		r.metrics.SetDegraded(r.degradedCount())
	}
	if !ch.Empty() && p != "" {
		r.log.Info("notebook served from its file", logkey.Path, p, logkey.Room, info.Key, "mtime", f.ModTime)
		r.notify.Changed(p, ch, Origin{Room: info, At: f.ModTime.UTC(), File: true})
	}
	r.consult(rm)
}

// fileGone takes the news that the file of rm at path p does not exist: unless the
// notebook moved (a rename shows as the old path gone), it is not served any more, and
// a room no longer in the store is forgotten.
func (r *Writer) fileGone(ctx context.Context, rm *room, p string) {
	if r.resolvePath(ctx, rm) != p {
		return
	}
	r.markGone(rm, p)
}

// markGone stops serving rm, whose file at p does not exist; a room no longer in the
// store is forgotten.
func (r *Writer) markGone(rm *room, p string) {
	rm.mu.Lock()
	if rm.path != p || rm.gone {
		rm.mu.Unlock()
		return
	}
	if rm.detached {
		rm.mu.Unlock()
		r.drop(rm, "notebook file gone; room not in the store: forgotten")
		return
	}
	snap, info := rm.served(), rm.info
	rm.gone, rm.file = true, nil
	rm.saved, rm.diverged, rm.reloading = nil, nil, false
	rm.mu.Unlock()
	r.log.Info("notebook file gone: not served", logkey.Room, info.Key, logkey.Path, p)
	if snap != nil {
		ch := removedAll(snap)
		r.notify.Changed(p, ch, Origin{Room: info, At: time.Now().UTC(), File: true})
	}
}

// detach keeps a room that left the store served from its file, if the file can be read
// now; it reports whether it did.
func (r *Writer) detach(rm *room) bool {
	rm.mu.Lock()
	p := rm.path
	rm.mu.Unlock()
	if r.files == nil || p == "" {
		return false
	}
	f, err := r.files.Read(p)
	if err != nil {
		r.log.Debug("notebook file not read", logkey.Path, p, "err", err)
		return false
	}
	rm.mu.Lock()
	prev := rm.served()
	rm.detached, rm.file, rm.gone = true, &f, false
	rm.rows, rm.badRows, rm.oracle = 0, 0, oracle{}
	ch := ynotebook.DiffContent(prev, f.Snapshot)
	info := rm.info
	rm.mu.Unlock()
	r.metrics.SetDegraded(r.degradedCount())
	r.log.Info("room left the store; notebook served from its file", logkey.Room, info.Key, logkey.Path, p, "mtime", f.ModTime)
	if !ch.Empty() {
		r.notify.Changed(p, ch, Origin{Room: info, At: f.ModTime.UTC(), File: true})
	}
	return true
}

// served is the snapshot a read of rm gets now; rm.mu is held.
func (rm *room) served() *ynotebook.Snapshot {
	if rm.file != nil {
		return rm.file.Snapshot
	}
	if rm.nb == nil {
		return nil
	}
	return rm.nb.Snapshot()
}
