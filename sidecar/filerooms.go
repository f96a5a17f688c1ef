package sidecar

import (
	"time"

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
// server's own save, changes nothing.

// ApplyFile takes a notebook file the ondisk watcher read.
func (r *Rooms) ApplyFile(f ondisk.File) {
	rm := r.find(f.Path)
	if rm == nil {
		r.log.Debug("notebook file read", "path", f.Path, "mtime", f.ModTime, "served", "none: no room")
		return
	}
	rm.mu.Lock()
	var ch ynotebook.Changes
	var served string
	switch live := rm.nb.Snapshot(); {
	case ynotebook.Equivalent(f.Snapshot, live):
		// The file is what the store holds (the server saved it): the store is live.
		served = "store: the file is the same"
		if rm.file != nil {
			ch = ynotebook.DiffContent(rm.file.Snapshot, live)
			rm.file = nil
		}
	case !f.ModTime.After(rm.lastRow):
		// The store is newer than the file: it stays live.
		served = "store: the file is older than the newest row"
		if rm.file != nil {
			served = "file: older than the newest row, and the file served is newer"
		}
	case rm.file != nil && ynotebook.Equivalent(f.Snapshot, rm.file.Snapshot):
		served = "file: the same file"
		rm.file.ModTime = f.ModTime
	default:
		served = "file"
		ch = ynotebook.DiffContent(rm.served(), f.Snapshot)
		rm.file = &f
	}
	p, info := rm.path, rm.info
	rm.mu.Unlock()
	r.log.Debug("notebook file read", "path", f.Path, "mtime", f.ModTime, "served", served)
	if !ch.Empty() && p != "" {
		r.log.Info("notebook served from its file", "path", p, "room", info.Key, "mtime", f.ModTime)
		r.notify.Changed(p, ch, Origin{Room: info, At: f.ModTime.UTC(), File: true})
	}
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

// storeApplied settles rows committed at `at` just applied, whose changes to the document
// are ch, against the file being served; prev is what was served before. A row after the
// file's mtime makes the store live again: the change is then what differs from the file.
// rm.mu is held.
func (rm *room) storeApplied(ch ynotebook.Changes, prev *ynotebook.Snapshot, at time.Time) ynotebook.Changes {
	if at.After(rm.lastRow) {
		rm.lastRow = at
	}
	if rm.file == nil {
		return ch
	}
	if !at.After(rm.file.ModTime) {
		return ynotebook.Changes{} // rows older than the file: the file is still served
	}
	rm.file = nil
	return ynotebook.DiffContent(prev, rm.nb.Snapshot())
}
