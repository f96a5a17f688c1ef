package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// ErrCorruptRow is returned by Compact when a row of the room does not decode: the room
// is left as it is rather than lose the row.
var ErrCorruptRow = errors.New("compact: row does not decode")

// CompactResult tells what Compact did to a room.
type CompactResult struct {
	// Rows is the number of rows replaced by the merged row (0: nothing to do).
	Rows int
	// Bytes and MergedBytes are the update sizes before and after.
	Bytes, MergedBytes int
	// Skipped says why CompactStore left the room as it was, if it did.
	Skipped string
}

// ErrCutPairs is a room Compact leaves alone: a yjs client cut a surrogate pair in its
// text, and one merged row would not hold what its rows hold (yjs.Doc.CutPairs).
var ErrCutPairs = errors.New("a text of the room holds a surrogate pair cut by a writer: its rows are kept as they are")

// Compact replaces a room's rows by one row holding their merged Yjs state, in one
// transaction (rows committed while it runs are kept, even with lower ids). The merged row holds only state the replaced rows held, so tailers apply
// it as an idempotent update; it keeps the reset flag if a replaced row had it, so that a
// tailer that had not seen the reset still rebuilds the room. Rooms with fewer than two
// rows are left alone.
func Compact(ctx context.Context, db Beginner, cfg Config, room string) (CompactResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return CompactResult{}, err
	}
	n := namesOf(cfg)
	tx, err := db.Begin(ctx)
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact %q: begin: %w", room, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := lockRoom(ctx, tx, n, room); err != nil {
		return CompactResult{}, fmt.Errorf("compact: %w", err)
	}
	var (
		ids    []int64
		res    CompactResult
		reset  bool
		newest float64
	)
	rs, err := tx.Query(ctx, `SELECT id, yupdate, reset, timestamp FROM `+n.table+` WHERE path = $1 ORDER BY id`, room)
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact %q: read: %w", room, err)
	}
	var (
		id      int64
		update  []byte
		isReset bool
		ts      float64
	)
	doc := yjs.NewDoc()
	_, err = pgx.ForEachRow(rs, []any{&id, &update, &isReset, &ts}, func() error {
		if isReset {
			// A reset row starts the room's history: nothing before it counts.
			doc, res, ids = yjs.NewDoc(), CompactResult{}, ids[:0]
			reset = true
		}
		ids = append(ids, id)
		newest = max(newest, ts)
		if update == nil {
			return nil
		}
		res.Bytes += len(update)
		if _, err := doc.ApplyUpdate(update); err != nil {
			return fmt.Errorf("row %d: %w: %w", id, ErrCorruptRow, err)
		}
		return nil
	})
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact %q: %w", room, err)
	}
	if len(ids) < 2 {
		return CompactResult{}, nil
	}
	if doc.CutPairs() {
		// Its encoded state would not hold what its rows hold (yjs.Doc.CutPairs).
		return CompactResult{}, fmt.Errorf("compact %q: %w", room, ErrCutPairs)
	}
	merged, err := doc.EncodeStateAsUpdate(nil)
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact %q: merge: %w", room, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM `+n.table+` WHERE id = ANY($1)`, ids); err != nil {
		return CompactResult{}, fmt.Errorf("compact %q: delete: %w", room, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+n.table+` (path, yupdate, timestamp, reset) VALUES ($1, $2, $3, $4)`,
		room, merged, newest, reset); err != nil {
		return CompactResult{}, fmt.Errorf("compact %q: insert merged row: %w", room, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return CompactResult{}, fmt.Errorf("compact %q: commit: %w", room, err)
	}
	res.Rows, res.MergedBytes = len(ids), len(merged)
	return res, nil
}

// CompactStore connects with cfg.DSN and compacts the given rooms, or every room of the
// store when rooms is empty, each in its own transaction; report is told the outcome of
// each room as it is done.
func CompactStore(ctx context.Context, cfg Config, rooms []string, report func(room string, r CompactResult)) error {
	cfg, conn, err := open(ctx, cfg, "compact")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if len(rooms) == 0 {
		rs, err := conn.Query(ctx, `SELECT DISTINCT path FROM `+namesOf(cfg).table+` WHERE path IS NOT NULL ORDER BY path`)
		if err != nil {
			return fmt.Errorf("compact: list rooms: %w", err)
		}
		if rooms, err = pgx.CollectRows(rs, pgx.RowTo[string]); err != nil {
			return fmt.Errorf("compact: list rooms: %w", err)
		}
	}
	for _, room := range rooms {
		res, err := Compact(ctx, conn, cfg, room)
		if errors.Is(err, ErrCutPairs) {
			res.Skipped = ErrCutPairs.Error()
		} else if err != nil {
			return err
		}
		report(room, res)
	}
	return nil
}
