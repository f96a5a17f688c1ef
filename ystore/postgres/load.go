package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

var _ ystore.StreamLoader = (*Tailer)(nil)

// Load reads every room once, as Reset events in room order (LoadStream's rooms, their
// rows gathered).
func (t *Tailer) Load(ctx context.Context) ([]ystore.Event, error) {
	return loadWith(ctx, t.LoadStream)
}

// loadWith returns the events loadStream hands its sink, their rows gathered.
func loadWith(ctx context.Context, loadStream func(context.Context, func(context.Context, []ystore.Event) error) error) ([]ystore.Event, error) {
	var events []ystore.Event
	err := loadStream(ctx, func(ctx context.Context, streamed []ystore.Event) (err error) {
		events, err = gathered(ctx, streamed)
		return err
	})
	if err != nil {
		return nil, err
	}
	return events, nil
}

// LoadStream reads every room once, in one read-only transaction on a connection of its
// own, and hands sink a Reset per room in room order whose rows sink reads through
// Event.Stream, Config.ChunkRows rows per round trip, while the call runs. It returns
// sink's error as is, or the error of a read that failed (a room's stream included,
// whatever sink answered), which Status then reports unless ctx ended it.
func (t *Tailer) LoadStream(ctx context.Context, sink func(context.Context, []ystore.Event) error) error {
	conn, err := connect(ctx, t.cfg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var (
		rooms   int
		sinkErr error
	)
	err = readTx(ctx, conn, func(ctx context.Context, tx pgx.Tx) error {
		return t.streamLoad(ctx, tx, nil, func(events []ystore.Event) error {
			rooms = len(events)
			sinkErr = sink(ctx, events)
			return sinkErr
		})
	})
	switch {
	case sinkErr != nil && errors.Is(err, sinkErr):
		return err
	case err != nil && ctx.Err() != nil:
		return err // ended by its caller: nothing wrong with the store
	case err != nil:
		t.status.Fail(statusError(err))
		return err
	}
	t.status.Read(nil, rooms)
	return nil
}

// loadRoom is a room a load delivers: its history is its rows from id start on (its last
// reset row, 0 when it has none), without NULL markers (see history).
type loadRoom struct {
	room  string
	start int64
}

// streamLoad reads the rooms present in tx's snapshot and hands them to deliver, in one
// call, as Resets in room order whose rows stream from tx (Event.Stream), each chunk
// passed to taken (when not nil) once the sink has taken it. It returns the error of a
// read that failed, a room's stream included whatever deliver answered, before
// deliver's own.
func (t *Tailer) streamLoad(ctx context.Context, tx pgx.Tx, taken func([]ystore.Row), deliver func([]ystore.Event) error) error {
	rooms, err := t.readLoadRooms(ctx, tx)
	if err != nil {
		return err
	}
	fails := make([]error, len(rooms))
	events := make([]ystore.Event, 0, len(rooms))
	for i, r := range rooms {
		events = append(events, ystore.Event{Kind: ystore.EventReset, Room: r.room, Stream: t.stream(tx, r, &fails[i], taken)})
	}
	err = deliver(events)
	return cmp.Or(errors.Join(fails...), err)
}

// readLoadRooms returns the rooms present in tx's snapshot (those not ending in an empty
// reset, history's present), in room order, with Owner only its rooms.
func (t *Tailer) readLoadRooms(ctx context.Context, tx pgx.Tx) ([]loadRoom, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	where, args := t.owned(nil, nil)
	q := `SELECT path, coalesce(max(id) FILTER (WHERE reset), 0), count(*), count(*) OVER (), sum(count(*)) OVER () FROM ` + t.n.table
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	// A room is present unless its last reset row has no row with an update from it on.
	q += ` GROUP BY path HAVING NOT bool_or(reset)
		OR max(id) FILTER (WHERE yupdate IS NOT NULL) >= max(id) FILTER (WHERE reset)
		ORDER BY path COLLATE "C"`
	if limit := t.cfg.followLimit(); limit > 0 {
		args = append(args, limit)
		q += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rs, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read rooms: %w", err)
	}
	var (
		rooms           []loadRoom
		r               loadRoom
		n, all, allRows int64
		keptRows        int64
	)
	if _, err := pgx.ForEachRow(rs, []any{&r.room, &r.start, &n, &all, &allRows}, func() error {
		rooms, keptRows = append(rooms, r), keptRows+n
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read rooms: %w", err)
	}
	if int(all) > len(rooms) {
		t.m.skipped.Add(float64(allRows - keptRows))
		t.cfg.Logger.Warn("postgres y-store past its bound: rooms past it are not read", "rooms", len(rooms), "past", int(all)-len(rooms),
			"max_rooms", t.cfg.MaxRooms, "rows_skipped", allRows-keptRows)
	}
	return rooms, nil
}

// stream returns the Event.Stream of room r's history in tx: a round trip of at most
// Config.ChunkRows rows per chunk, the next one read while the sink takes the last
// (ystore.ReadAhead), read afresh at each call. It records in failed the
// error of a read that failed (nil when the stream ended, or stopped at yield's error):
// what a sink's error may stand for, the store's failure rather than the sink's.
func (t *Tailer) stream(tx pgx.Tx, r loadRoom, failed *error, taken func([]ystore.Row)) func(context.Context, func([]ystore.Row) error) error {
	return func(ctx context.Context, yield func([]ystore.Row) error) error {
		read := func(ctx context.Context, send func([]ystore.Row) error) error {
			for after := r.start - 1; ; {
				chunk, err := t.readChunk(ctx, tx, r.room, after)
				if err != nil {
					return err
				}
				if len(chunk) == 0 {
					return nil
				}
				if err := send(chunk); err != nil {
					return err
				}
				if len(chunk) < t.cfg.ChunkRows {
					return nil
				}
				after = chunk[len(chunk)-1].ID
			}
		}
		return ystore.ReadAhead(ctx, aheadLarge, read, func(chunk []ystore.Row) error {
			if err := yield(chunk); err != nil {
				return err
			}
			if taken != nil {
				taken(chunk)
			}
			return nil
		}, failed)
	}
}

// aheadLarge is the size of a chunk after which a load's read ahead waits for the sink
// to take it before reading on (ystore.ReadAhead): a chunk is ChunkRows rows of any size.
const aheadLarge = 1 << 20

// readChunk returns, in id order, at most Config.ChunkRows rows of room with an update
// and an id above after.
func (t *Tailer) readChunk(ctx context.Context, tx pgx.Tx, room string, after int64) ([]ystore.Row, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rs, err := tx.Query(ctx, `SELECT id, yupdate, timestamp FROM `+t.n.table+
		` WHERE path = $1 AND id > $2 AND yupdate IS NOT NULL ORDER BY id LIMIT $3`, room, after, t.cfg.ChunkRows)
	if err != nil {
		return nil, fmt.Errorf("read room %q: %w", room, err)
	}
	chunk := make([]ystore.Row, 0, t.cfg.ChunkRows)
	r := ystore.Row{Room: room}
	if _, err := pgx.ForEachRow(rs, []any{&r.ID, &r.Update, &r.Timestamp}, func() error {
		chunk = append(chunk, r)
		r.Update = nil
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read room %q: %w", room, err)
	}
	return chunk, nil
}

// gathered returns events with each one's streamed rows read into its Rows.
func gathered(ctx context.Context, events []ystore.Event) ([]ystore.Event, error) {
	for i, e := range events {
		var rows []ystore.Row
		if err := e.Each(ctx, func(chunk []ystore.Row) error { rows = append(rows, chunk...); return nil }); err != nil {
			return nil, err
		}
		events[i].Rows, events[i].Stream = rows, nil
	}
	return events, nil
}
