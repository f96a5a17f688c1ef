package sqlite

import (
	"bytes"
	"context"
	"math"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// A load of every room reads the table once, in rowid order, rather than each room
// through the (path, timestamp) index: concurrent sessions interleave the rooms' rows, so
// that each room's read went over nearly every page of the file, one table lookup a row
// (bench/inspect.sh: 540k rows in 20 rooms read their rows in 1.9 s of SQLite work one
// room at a time, 0.7 s in one pass). A room's load order is by timestamp, then rowid;
// in rowid order the rows of a room are in that order unless a writer's clock went back.
// The scan checks it row by row: a room whose row is older than the one before it is
// restarted and read again alone, through the index, after the pass.

// scanRoom is what the pass knows of one of its rooms.
type scanRoom struct {
	key   string
	floor float64 // the timestamp of its checkpoint; 0 without one (eachRow)
	last  float64 // the timestamp of the last row handed
	any   bool    // a row was handed
	again bool    // out of load order: read again alone after the pass
}

// scan is the ystore.Scan of rooms (of plan p, in order) on st: their checkpoints, then
// the table's rows up to p.top in rowid order (foldAll), a chunk per read transaction,
// read a chunk ahead of yield as stream reads them; then, restarted, each room whose rows
// were not in load order, alone. Each chunk is passed to taken once yield has taken it (nil: none);
// failed records the error of a read that failed, as stream's does.
func (t *Tailer) scan(st *store, p *plan, rooms []string, failed *error, taken func([]ystore.Row)) *ystore.Scan {
	return &ystore.Scan{Rooms: len(rooms), Each: func(ctx context.Context, yield func([]ystore.Row) error, restart func(string) error) error {
		want := make(map[string]*scanRoom, len(rooms))
		for _, room := range rooms {
			want[room] = &scanRoom{key: room}
		}
		read := func(ctx context.Context, send func([]ystore.Row) error) error {
			for _, room := range rooms {
				if !p.rooms[room].ckpt {
					continue
				}
				ckpt, _, found, err := st.checkpoint(ctx, room)
				if err != nil {
					return err
				}
				if found {
					want[room].floor = ckpt.Timestamp
					if err := send(t.decompress([]ystore.Row{ckpt})); err != nil {
						return err
					}
				}
			}
			var kept []ystore.Row
			return st.foldAll(ctx, p.top, t.cfg.ChunkRows, true, func(r ystore.Row) {
				if s := want[r.Room]; s.takes(r) {
					kept = append(kept, ystore.Row{Room: s.key, ID: r.ID, Update: bytes.Clone(r.Update), Timestamp: r.Timestamp})
				}
			}, func() error {
				if len(kept) == 0 {
					return nil
				}
				chunk := kept
				kept = nil
				return send(t.decompress(chunk))
			})
		}
		var pass error
		if err := ystore.ReadAhead(ctx, 2*chunkBytes, read, counted(yield, taken), &pass); err != nil {
			*failed = pass
			return err
		}
		for _, room := range rooms {
			if !want[room].again {
				continue
			}
			if err := restart(room); err != nil {
				return err
			}
			err := t.stream(st, p, room, failed, taken)(ctx, yield)
			if err != nil {
				return err
			}
		}
		*failed = nil
		return nil
	}}
}

// takes reports whether the pass hands r (read in rowid order), of the room of s (nil:
// not one of the pass's): stamped at or after its floor (its checkpoint's timestamp, else
// 0; a NULL on either side, NaN, takes none, as SQLite's `>=`), while the room's rows
// come in load order. A row older than the last one handed, or a stamp of text or blob
// on either side (+Inf, ordered among themselves by SQLite alone), marks the room to be
// read again; its later rows are left out.
func (s *scanRoom) takes(r ystore.Row) bool {
	switch {
	case s == nil || s.again:
		return false
	case math.IsInf(r.Timestamp, 1) || math.IsInf(s.floor, 1):
		s.again = true
		return false
	case !(r.Timestamp >= s.floor):
		return false
	case s.any && r.Timestamp < s.last:
		s.again = true
		return false
	}
	s.last, s.any = r.Timestamp, true
	return true
}
