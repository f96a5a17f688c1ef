package rooms

import (
	"context"
	"fmt"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/ondisk"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// The server's save is an oracle. jupyter-collaboration saves a notebook
// (document_save_delay after its last change) and then writes a row that touches only the
// document's state (dirty false, the file's hash): the file holds what the server's
// document held when the store reached that row. So when a file differs from the room's
// document, no row after the file's mtime changed what the document shows, and a row
// after it says the notebook is saved (state.dirty false), the document is wrong: the
// divergence is counted, logged with its first difference, the room degraded, and the
// file served (marked as the file's, subscribers told) until the store's content moves
// on; the room is then rebuilt from the store (Config.Reload), not applied onto further.
// A content row after the file's mtime means the store is ahead of the file: nothing is
// compared. The file is written before its state row, and may be read before or after
// the tailer delivers that row: the comparison waits for both, and for the file on disk
// to be still the one read (a newer save is compared when the watcher hands it over).
//
// A gap is updates that wait for a missing one (a write the store lost: pycrdt-store
// drops one it cannot commit within 5 s, docs/COMPATIBILITY.md). Once a room's document
// has waited Config.GapAfter, the room is degraded with the clients and clock ranges
// missing, counted, logged, and served from its file until the missing updates arrive.

// DefaultGapAfter is Config.GapAfter's default: a few of the writer's commit intervals,
// so that updates arriving out of order within a burst are no gap.
const DefaultGapAfter = 3 * time.Second

// maxLoggedValue bounds each side of a difference in the log, in bytes.
const maxLoggedValue = 256

// oracle is what a room knows of its saved file and of its missing updates; rm.mu guards it.
type oracle struct {
	// lastContent is the commit time of the newest row that changed what the document
	// shows (a rebuilt document's: its newest row).
	lastContent time.Time
	// saved is the newest file read that differs from the document, kept while no
	// content row is after its mtime: the server's save, once the store reaches its
	// state row, is compared then (consult).
	saved *ondisk.File
	// diverged is the saved file the document was found to differ from: it is served
	// until the store's content moves on, and the room rebuilt then (reloading: asked).
	diverged  *ondisk.File
	reloading bool
	// pendingSince is when the document began to wait for missing updates (zero: it
	// does not); gaps is what it waits for, once that lasted GapAfter (the file is then
	// served), read again when rows arrived since (gapRows: rm.rows when it was read):
	// the first gapsListed clients' gaps, of gapClients.
	pendingSince time.Time
	gaps         []yjs.Gap
	gapClients   int
	gapRows      int
	// failedSeen says the document's failure (yjs.Doc.Failed) was logged and its file
	// read: from then on each newer save is served (applyFile).
	failedSeen bool
}

// failed reports whether rm's document refuses every row (yjs.Doc.Failed): the store
// no longer tells what the room holds, the server's saves do. rm.mu is held.
func (rm *room) failed() bool { return rm.nb != nil && rm.nb.Doc().Failed() != nil }

// gapsListed bounds the gaps a room lists (in /readyz and its log line): a store's
// writer can leave updates of any number of clients missing.
const gapsListed = 16

// Gap is a range of one client's clocks missing from a room's store that later updates
// wait for: From (the first clock the document lacks) up to To, exclusive.
type Gap struct {
	Client uint64 `json:"client"`
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
}

func (g Gap) String() string { return fmt.Sprintf("client %d clocks %d-%d", g.Client, g.From, g.To-1) }

// gapsOf converts the document's gaps; nil for none.
func gapsOf(gs []yjs.Gap) []Gap {
	if gs == nil {
		return nil
	}
	out := make([]Gap, len(gs))
	for i, g := range gs {
		out[i] = Gap{Client: g.Client, From: g.From, To: g.To}
	}
	return out
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// storeApplied settles rows just applied to rm's document, the newest committed at at,
// whose changes to the document are ch: content is the commit time of the newest of them
// that changed what the document shows (zero: none), rebuilt that the document was
// rebuilt from the store (a Reset), prev what was served before. It returns the change to
// announce, and whether to ask the store for the room again (Config.Reload). rm.mu is held.
func (r *Set) storeApplied(rm *room, ch ynotebook.Changes, prev *ynotebook.Snapshot, at, content time.Time, rebuilt bool) (ynotebook.Changes, bool) {
	rm.lastRow = later(rm.lastRow, at)
	rm.lastContent = later(rm.lastContent, content)
	if rm.saved != nil && rm.lastContent.After(rm.saved.ModTime) {
		rm.saved = nil // the store is past that file
	}
	gapClosed := false
	if rm.nb.Doc().HasPending() {
		if rm.pendingSince.IsZero() {
			rm.pendingSince = time.Now()
		}
	} else {
		rm.pendingSince, gapClosed = time.Time{}, rm.gaps != nil
		if gapClosed {
			r.log.Info("updates missing from the store arrived; the room is whole again", logkey.Room, rm.info.Key, logkey.Path, rm.path)
		}
		rm.gaps, rm.gapClients, rm.gapRows = nil, 0, 0
	}
	reload := false
	switch {
	case rm.file == nil:
		return ch, false
	case rm.gaps != nil || rm.failed():
		// the file is served while updates are missing, or for good once the document
		// refuses every row
		return ynotebook.Changes{}, false
	case rm.diverged != nil && rebuilt:
		r.log.Info("room rebuilt from the store after it differed from its saved file", logkey.Room, rm.info.Key, logkey.Path, rm.path)
		rm.diverged, rm.reloading = nil, false
	case rm.diverged != nil:
		if !rm.lastContent.After(rm.diverged.ModTime) || rm.nb.Doc().HasPending() || rm.reloading {
			// The file is served until the store's content moves on, and while updates
			// are missing (a rebuild would miss them too), or the rebuild is on its way.
			return ynotebook.Changes{}, false
		}
		if r.reload != nil {
			rm.reloading = true
			return ynotebook.Changes{}, true
		}
		rm.diverged = nil // nothing to rebuild from: the document goes on
	case gapClosed:
	case !at.After(rm.file.ModTime):
		return ynotebook.Changes{}, false // rows older than the file: the file is still served
	case rm.saved == rm.file && !rm.lastContent.After(rm.file.ModTime):
		// Only rows that left the content as it was are after the file: the server's
		// save, or not; consult decides.
		return ynotebook.Changes{}, false
	}
	rm.file = nil
	return ynotebook.DiffContent(prev, rm.nb.Snapshot()), reload
}

// consult compares rm's document with its saved file once the store has reached the
// save (package comment above): a document that differs is a divergence, and the file is
// served instead. It compares and diffs with no lock held (filerooms.go), and settles
// what rm's files hold.
func (r *Writer) consult(rm *room) {
	defer r.settleFiles(rm)
	for range 2 { // again when the room changed while it was compared
		rm.mu.Lock()
		f := rm.saved
		if f == nil || rm.detached || rm.gone || rm.nb == nil || !rm.lastRow.After(f.ModTime) {
			rm.mu.Unlock()
			return // nothing to compare, or the store has not reached the save yet
		}
		doc, p, dirty := rm.nb.Snapshot(), rm.path, rm.nb.State().Dirty
		prev, cur := rm.served(), rm.file
		rm.mu.Unlock()

		same := !dirty && ynotebook.Equivalent(f.Snapshot, doc)
		if !dirty && !same && r.files != nil && p != "" {
			if mt, err := r.files.ModTime(p); err == nil && !mt.Equal(f.ModTime) {
				return // saved again since: compared when the watcher hands it over
			}
		}
		var ch ynotebook.Changes
		next := f // what is served once the document is found to differ: a newer save stays
		if cur != nil && cur.ModTime.After(f.ModTime) {
			next = cur
		}
		switch {
		case (dirty || same) && cur == f:
			ch = ynotebook.DiffContent(f.Snapshot, doc)
		case !dirty && !same:
			ch = ynotebook.DiffContent(prev, next.Snapshot)
		}
		rm.mu.Lock()
		if rm.saved != f || rm.nb.Snapshot() != doc || rm.file != cur || rm.served() != prev {
			rm.mu.Unlock()
			continue
		}
		rm.saved = nil
		o := Origin{Room: rm.info, At: rm.lastRow.UTC()}
		switch {
		case dirty || same:
			// Not the server's save (the row after it says unsaved), or the document
			// is what the file holds: the store is live.
			if rm.file == f {
				rm.file = nil
			}
		default:
			rm.diverged, rm.file = f, next
			o = Origin{Room: rm.info, At: rm.file.ModTime.UTC(), File: true}
		}
		diverged := rm.diverged == f
		rm.mu.Unlock()
		if diverged {
			r.diverged(rm.info, p, f, doc)
		}
		if !ch.Empty() && p != "" {
			r.notify.Changed(p, ch, o)
		}
		return
	}
}

// diverged counts and logs the document doc of room info at path p found different
// from its saved file f.
func (r *Writer) diverged(info ystore.Room, p string, f *ondisk.File, doc *ynotebook.Snapshot) {
	r.metrics.Diverged()
	r.metrics.SetDegraded(r.degradedCount())
	at, live, saved, _ := ynotebook.FirstDifference(doc, f.Snapshot)
	r.log.Error("live notebook differs from the server's saved file; serving the file until the store's content moves on",
		logkey.Room, info.Key, logkey.Path, p, "mtime", f.ModTime,
		"at", at, "live", clip(live), "saved", clip(saved))
}

// clip is b as text, at most maxLoggedValue bytes of it.
func clip(b []byte) string {
	if b == nil {
		return "(none)"
	}
	if len(b) <= maxLoggedValue {
		return string(b)
	}
	return fmt.Sprintf("%s… (%d bytes)", b[:maxLoggedValue], len(b))
}

// Run declares the gaps of rooms whose document waited GapAfter for missing updates,
// until ctx is done; it returns nil then.
func (r *Writer) Run(ctx context.Context) error {
	t := time.NewTicker(max(r.gapAfter/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			r.Sweep(now)
		}
	}
}

// Sweep is Run's round: it degrades, counts, logs and serves from its file each room
// whose document has waited GapAfter for missing updates by now (inspect passes a time
// past every wait), and reads again the gaps of those with rows applied since; a room
// whose document failed (it refuses every row) is served from its file at once.
func (r *Writer) Sweep(now time.Time) {
	for _, rm := range r.snapshotRooms() {
		rm.mu.Lock()
		if rm.failed() && !rm.failedSeen {
			// The document refuses every row: the server's saves are all there is.
			rm.failedSeen = true
			p, info, err := rm.path, rm.info, rm.nb.Doc().Failed()
			rm.mu.Unlock()
			r.log.Error("the room's document no longer follows the store; "+servingFile(p),
				logkey.Room, info.Key, logkey.Path, p, "err", err)
			r.serveFile(rm, p)
			continue
		}
		due := !rm.pendingSince.IsZero() && now.Sub(rm.pendingSince) >= r.gapAfter && (rm.gaps == nil || rm.gapRows != rm.rows)
		if !due {
			rm.mu.Unlock()
			continue
		}
		first := rm.gaps == nil
		all := rm.nb.Doc().Gaps()
		// a copy of the first gapsListed; not nil when pending but nothing was found
		// missing: degraded all the same
		rm.gaps, rm.gapClients, rm.gapRows = append([]yjs.Gap{}, all[:min(len(all), gapsListed)]...), len(all), rm.rows
		gaps, clients, p, info, since := gapsOf(rm.gaps), rm.gapClients, rm.path, rm.info, rm.pendingSince
		rm.mu.Unlock()
		if !first {
			r.log.Debug("room still waits for updates missing from the store", logkey.Room, info.Key, logkey.Path, p, "gaps", fmt.Sprint(gaps), "clients", clients)
			continue
		}
		r.metrics.Gap()
		r.metrics.SetDegraded(r.degradedCount())
		r.log.Error("updates missing from the store: later ones wait for them; "+servingFile(p),
			logkey.Room, info.Key, logkey.Path, p, "gaps", fmt.Sprint(gaps), "clients", clients, "waiting_since", since.UTC())
		r.serveFile(rm, p)
	}
}

// servingFile says what a degraded room at path p serves: its file, or, with no path
// known (the file id's path outside the root, or none), its document.
func servingFile(p string) string {
	if p == "" {
		return "its document stays served: the notebook's path is not known"
	}
	return "serving the notebook's file"
}

// serveFile serves rm's file at p now instead of its document, if it can be read, fits
// the Set's bound and rm still waits for missing updates, telling the subscribers.
func (r *Writer) serveFile(rm *room, p string) {
	if r.files == nil || p == "" {
		return
	}
	f, err := r.files.Read(p)
	if err != nil {
		r.log.Warn("notebook file not read; the room's document stays served", logkey.Room, rm.info.Key, logkey.Path, p, "err", err)
		return
	}
	if !r.reserveFile(rm, &f) {
		return
	}
	defer r.settleFiles(rm)
	ch, ok := diffToFile(rm, &f, func() bool {
		// a file served already was read since the room degraded (ApplyFile), or by an
		// earlier round: as new as f, whatever the mtimes say
		return rm.gaps == nil && !rm.failed() || rm.file != nil
	})
	if !ok {
		return
	}
	rm.file = &f
	info := rm.info
	rm.mu.Unlock()
	if !ch.Empty() {
		r.notify.Changed(p, ch, Origin{Room: info, At: f.ModTime.UTC(), File: true})
	}
}

// Degradation says why a room is degraded (/readyz).
type Degradation struct {
	Room     string `json:"room"`
	Path     string `json:"path,omitempty"`
	BadRows  int    `json:"bad_rows,omitempty"`
	Diverged bool   `json:"diverged_from_saved_file,omitempty"`
	Gaps     []Gap  `json:"missing_updates,omitempty"`
	// GapClients counts the clients whose updates are missing; Gaps lists the first 16.
	GapClients int `json:"missing_updates_clients,omitempty"`
	// Failed is why the document refuses every row (the notebook's file is served).
	Failed string `json:"document_failed,omitempty"`
}

// Degradations lists the degraded rooms and why, sorted by room.
func (r *Set) Degradations() []Degradation {
	var out []Degradation
	for _, ri := range r.Infos() {
		if ri.Degraded {
			out = append(out, Degradation{Room: ri.Key, Path: ri.Path, BadRows: ri.BadRows, Diverged: ri.Diverged, Gaps: ri.Gaps, GapClients: ri.GapClients, Failed: ri.Failed})
		}
	}
	return out
}
