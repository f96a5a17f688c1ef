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

// roomRows is one room of a snapshot.
type roomRows struct {
	sum  summary
	ckpt *ystore.Row
	rows []ystore.Row // rows at or after the checkpoint, rowid order
}

// load returns the room the way Jupyter loads it: the checkpoint, then the rows stamped
// at or after it, in timestamp order.
func (r *roomRows) load() []ystore.Row {
	out := make([]ystore.Row, 0, len(r.rows)+1)
	if r.ckpt != nil {
		out = append(out, *r.ckpt)
	}
	rows := slices.Clone(r.rows)
	slices.SortStableFunc(rows, func(a, b ystore.Row) int {
		switch {
		case a.Timestamp < b.Timestamp:
			return -1
		case a.Timestamp > b.Timestamp:
			return 1
		}
		return 0
	})
	return append(out, rows...)
}

// snapshot is every room of the store up to the row top, read in bounded transactions;
// dv is the data version top was read at.
type snapshot struct {
	top   int64
	fp    fingerprint
	dv    int64
	rooms map[string]*roomRows
}

// sortedRooms returns the snapshot's room keys in order.
func (s *snapshot) sortedRooms() []string {
	keys := make([]string, 0, len(s.rooms))
	for k := range s.rooms {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// readSnapshot reads the checkpoints, then every row up to the current newest one in
// rowid chunks. Rows stamped before their room's checkpoint are counted, not kept.
func (s *store) readSnapshot(ctx context.Context, chunk int) (*snapshot, error) {
	top, fp, dv, err := s.top(ctx)
	if err != nil {
		return nil, err
	}
	ckpts, err := s.checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	snap := &snapshot{top: top, fp: fp, dv: dv, rooms: map[string]*roomRows{}}
	for room, c := range ckpts {
		snap.rooms[room] = &roomRows{ckpt: &c}
	}
	for after := int64(0); after < top; {
		rows, more, _, _, err := s.rowsAfter(ctx, after, top, chunk, false, fingerprint{})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			rr := snap.rooms[r.Room]
			if rr == nil {
				rr = &roomRows{}
				snap.rooms[r.Room] = rr
			}
			rr.sum.add(r)
			if rr.ckpt == nil || r.Timestamp >= rr.ckpt.Timestamp {
				rr.rows = append(rr.rows, r)
			}
		}
		if !more {
			break
		}
		after = rows[len(rows)-1].ID
	}
	return snap, nil
}
