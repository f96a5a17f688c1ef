package rooms

import (
	"fmt"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/library"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/versions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// Every state a room serves is observed (resources/versions): after each row that
// changed the document, after a load, and at every read (which covers what a file
// served, a divergence or a gap put in front of the document). So the version a read or
// a notification carries is kept, and a replica following the same store keeps the same
// versions: a client that moves to it finds the version it was told.

// observe returns the version of what rm serves now and keeps it; "" when rm serves
// nothing. rm.mu is held.
func (r *Set) observe(rm *room) string {
	snap := rm.served()
	if snap == nil {
		return ""
	}
	if rm.hist == nil {
		rm.hist = versions.NewHistory(r.scope, rm.info.Key, r.versions, nil)
		rm.hist.SetMeter(r.versionsMeter()) // what they keep counts in the memory bound
	}
	before := rm.hist.Len()
	v := rm.hist.Observe(snap)
	if d := rm.hist.Len() - before; d != 0 {
		r.metrics.VersionsKept(d)
	}
	return v
}

// forget drops rm's versions (the room is gone); rm.mu is held.
func (r *Set) forget(rm *room) {
	if rm.hist != nil {
		r.metrics.VersionsKept(-rm.hist.Len())
		rm.hist.Release()
		rm.hist = nil
	}
}

// Served returns the notebook at path as a read sees it now, with its version
// (library.VersionedLibrary): the live document, or its file while that is served
// instead (filerooms.go).
func (r *Set) Served(p string) (library.Served, error) {
	rm := r.find(p)
	if rm == nil {
		if r.findAt(p, true) != nil {
			return library.Served{}, fmt.Errorf("notebook %q: its file was deleted: %w", p, library.ErrNotFound)
		}
		return library.Served{}, r.notHeld(p)
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	s := library.Served{Snapshot: rm.served(), Version: r.observe(rm)}
	if rm.file != nil {
		s.Source = library.Source{File: true, ModTime: rm.file.ModTime}
	}
	return s, nil
}

// Kept returns the snapshot the notebook at path had at version, while its room keeps
// it (library.VersionedLibrary).
func (r *Set) Kept(p, version string) (*ynotebook.Snapshot, bool) {
	rm := r.find(p)
	if rm == nil {
		return nil, false
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if rm.hist == nil {
		return nil, false
	}
	before := rm.hist.Len()
	snap, ok := rm.hist.Kept(version)
	if d := rm.hist.Len() - before; d != 0 {
		r.metrics.VersionsKept(d)
	}
	return snap, ok
}

var _ library.VersionedLibrary = (*Set)(nil)
