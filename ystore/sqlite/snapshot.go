package sqlite

import (
	"context"
	"slices"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// summary condenses a room's stored rows, to notice when its history was rewritten
// (squashed, cleaned up, rowids reused) rather than appended to.
type summary struct {
	count int64
	maxID int64
	total float64 // sum of timestamps
	first rowKey  // the room's first row: a squash deletes it
}

func (s *summary) add(r ystore.Row) {
	if k := (rowKey{r.Timestamp, r.ID}); s.count == 0 || k.less(s.first) {
		s.first = k
	}
	s.count++
	s.maxID = max(s.maxID, r.ID)
	s.total += r.Timestamp
}

// roomPlan is one room of a plan.
type roomPlan struct {
	sum summary
	// floor is the timestamp of the room's checkpoint, when it has one (ckpt): its load
	// is the checkpoint, then the rows stamped at or after it.
	floor float64
	ckpt  bool
	// rows is how many rows its load has, the checkpoint included.
	rows int64
}

// plan is what a read of the whole store knows before it reads any update: its rooms up
// to the row top (those a picker chose: all, or Config.MaxRooms+1 of them), each one's
// summary and the size of its load; dv is the data version top was read at; skipped the
// rows of the rooms left out, over whether any was. Its memory is its rooms', whatever
// the rows and the rooms left out.
type plan struct {
	top     int64
	fp      fingerprint
	dv      int64
	rooms   map[string]*roomPlan
	skipped int64
	over    bool
}

// sortedRooms returns the plan's room keys in order.
func (p *plan) sortedRooms() []string {
	keys := make([]string, 0, len(p.rooms))
	for k := range p.rooms {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// readPlan reads the checkpoints' timestamps, then the room and timestamp of every row up
// to the current newest one in rowid chunks, without their updates (foldAll); it plans at most
// limit rooms (0: all), those of followed first, then the first by key (picker).
func (s *store) readPlan(ctx context.Context, chunk, limit int, followed map[string]summary) (*plan, error) {
	top, fp, dv, err := s.top(ctx)
	if err != nil {
		return nil, err
	}
	k := newPicker(limit, followed)
	err = s.checkpointTimes(ctx, func(room string, ts float64) {
		if rp := k.room(room); rp != nil {
			rp.floor, rp.ckpt, rp.rows = ts, true, 1
		}
	})
	if err != nil {
		return nil, err
	}
	if err := s.foldAll(ctx, top, chunk, false, k.row, func() error { return nil }); err != nil {
		return nil, err
	}
	return &plan{top: top, fp: fp, dv: dv, rooms: k.rooms, skipped: k.skipped, over: k.over}, nil
}

// eachRow hands yield the rows of room's load up to the row top, the way Jupyter loads a
// room: its checkpoint, then the rows stamped at or after it (without one, at or after
// 0), in timestamp order (rowid among equals); a chunk per read transaction, yield called outside any.
func (s *store) eachRow(ctx context.Context, room string, top int64, chunk int, yield func([]ystore.Row) error) error {
	ckpt, stamp, found, err := s.checkpoint(ctx, room)
	if err != nil {
		return err
	}
	var floor any = 0.0 // pycrdt-store reads a room without a checkpoint from timestamp 0
	if found {
		if err := yield([]ystore.Row{ckpt}); err != nil {
			return err
		}
		floor = stamp // as pycrdt-store binds it: SQLite compares the rows with it
	}
	var after *pageKey
	for {
		rows, next, more, err := s.roomRowsAfter(ctx, room, floor, after, top, chunk)
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			if err := yield(rows); err != nil {
				return err
			}
			after = next
		}
		if !more {
			return nil
		}
	}
}
