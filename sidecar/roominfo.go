package sidecar

import (
	"math"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// Origin is where a change of a notebook comes from: its room, and the commit time
// of the newest row behind it.
type Origin struct {
	Room ystore.Room
	At   time.Time // zero when no row is behind the change (a room removed or emptied)
	File bool      // the change is the notebook's file, served instead of the room (At: its mtime)
}

// originOf is the origin of a change made by rows of the room info.
func originOf(info ystore.Room, rows []ystore.Row) Origin {
	newest := math.Inf(-1)
	for _, row := range rows {
		newest = max(newest, row.Timestamp)
	}
	o := Origin{Room: info}
	if len(rows) > 0 && newest > 0 {
		// Seconds as a float: microseconds are what survive the round trip.
		o.At = time.UnixMicro(int64(math.Round(newest * 1e6))).UTC()
	}
	return o
}

// publishOrigin is o as the publisher's events carry it, for the hub user whose store
// the room is in ("" outside hub mode).
func (o Origin) publishOrigin(user string) publish.Origin {
	po := publish.Origin{Room: o.Room.Key, FileID: o.Room.FileID, Time: o.At, User: user}
	if o.File {
		po.Source = "file"
	}
	return po
}

// Origin is the origin of the notebook at path now: its most recently updated room,
// with no row time. ok is false when no room has that path.
func (r *Rooms) Origin(path string) (Origin, bool) {
	rm := r.find(path)
	if rm == nil {
		return Origin{}, false
	}
	return Origin{Room: rm.info}, true
}

// change is what the debouncer holds per path: the merged changes of a burst and the
// origin of its newest row.
type change struct {
	ch     ynotebook.Changes
	origin Origin
}

// mergeChange folds add, a later change of the same path, into old.
func mergeChange(old, add change) change {
	old.ch.Merge(add.ch)
	at := old.origin.At
	if add.origin.At.After(at) {
		at = add.origin.At
	}
	old.origin = add.origin
	old.origin.At = at
	return old
}
