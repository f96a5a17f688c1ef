package postgres

import (
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// The rooms a load reads and an Owner's Tailer on a Follower follows (Config.MaxRooms).
// In hub mode an owner's rooms are what she ships from her own SQLite store, and the
// process is everyone's: unbounded, her load listed every room of hers and her tailer
// kept an entry per room the Follower heard of. Bounded, they make the choice of the
// SQLite tailer and of a rooms.Set bounded alike (ystore/sqlite/bound.go): a load reads
// the first MaxRooms rooms by key and one more, so that the sink refuses it and knows
// the store is over its bound (the database sorts and counts the rooms; the sidecar
// holds MaxRooms+1); the owner's tailer then takes a room that appears while it follows
// fewer and none was left out. The rows of the rooms left out are neither read nor
// delivered, only counted (postgres_rows_skipped_total). A place freed by a room removed
// is taken by the next room by key at the owner's next load (a new tenant).
//
// The Follower itself keeps no state per room: it hands each room's rows to the
// tailers of its owner and forgets them.

// followLimit is the rooms a load reads at most (MaxRooms and the one past it), 0 when
// unbounded.
func (c Config) followLimit() int {
	if c.MaxRooms == 0 {
		return 0
	}
	return c.MaxRooms + 1
}

// follow returns the events of events that the owner's tailer delivers, o.rooms holding
// the rooms it follows: those of its rooms, a room's removal, and the events of a room
// new to it while it follows fewer than its limit and left none out (over). The rows of
// the others are counted skipped.
func (o *ownerTailer) follow(events []ystore.Event, over *bool) []ystore.Event {
	limit := o.load.cfg.followLimit()
	if limit == 0 {
		return events
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	rooms := o.rooms
	kept := events[:0]
	for _, e := range events {
		if e.Kind != ystore.EventRemoved && !rooms[e.Room] {
			if *over || len(rooms) >= limit {
				if !*over {
					o.load.cfg.Logger.Warn("postgres y-store past its bound: rooms past it are not read", logkey.Room, e.Room, "max_rooms", o.load.cfg.MaxRooms)
				}
				*over = true
				o.load.m.skipped.Add(float64(len(e.Rows)))
				continue
			}
			rooms[e.Room] = true
		}
		kept = append(kept, e)
	}
	return kept
}
