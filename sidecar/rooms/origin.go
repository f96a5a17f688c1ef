package rooms

import (
	"math"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// Origin is where a change of a notebook comes from: its room, and the commit time
// of the newest row behind it.
type Origin struct {
	Room ystore.Room
	At   time.Time // zero when no row is behind the change (a room removed or emptied, a rename)
	File bool      // the change is the notebook's file, served instead of the room (At: its mtime)
}

// originOf is the origin of a change made by rows of the room info.
func originOf(info ystore.Room, rows []ystore.Row) Origin {
	newest := math.Inf(-1)
	for _, row := range rows {
		newest = max(newest, row.Timestamp)
	}
	return originAt(info, newest)
}

// originAt is the origin of a change of the room info whose newest row was committed at
// newest (seconds since the epoch; not above 0: unknown, or no row).
func originAt(info ystore.Room, newest float64) Origin {
	o := Origin{Room: info}
	if newest > 0 {
		// Seconds as a float: microseconds are what survive the round trip.
		o.At = time.UnixMicro(int64(math.Round(newest * 1e6))).UTC()
	}
	return o
}
