package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// A read of every row in rowid order (a plan's keys, a load's pass over the table) hands
// the rows to Go inside SQLite, through an aggregate function of the sidecar's own
// (foldFunc) that calls a Go function with each row as SQLite reads it, rather than
// returning them row by row through database/sql: a Go string per row for its room, and
// the driver's conversions, were most of such a read (0.59 s for 540k rows' keys against
// 0.2 s folded). The rows, their order and the transactions' bounds are the same.

// foldFunc is the name of the aggregate registered with the driver.
const foldFunc = "mcp_sidecar_yfold"

func init() {
	msqlite.MustRegisterFunction(foldFunc, &msqlite.FunctionImpl{
		NArgs: 5,
		// A row's room and update are views of SQLite's memory for the call (fold.row).
		VolatileArgs:  true,
		MakeAggregate: func(msqlite.FunctionContext) (msqlite.AggregateFunction, error) { return &foldStep{}, nil },
	})
}

// folds are the folds under way, by the handle their query passes foldFunc: a random one,
// besides the schema's not being trusted (dsn), so that no query but the fold's own finds
// it.
var folds sync.Map // int64 → *fold

// fold is one read transaction's fold of rows: each is handed to row, its Room and Update
// valid only during the call (row copies what it keeps). It stops once chunkBytes of
// updates are read or the transaction has run for txBudget (after at least minTxRows
// rows), or after limit rows.
type fold struct {
	row   func(ystore.Row)
	start time.Time
	limit int
	n     int
	size  int
	last  int64 // the rowid of the last row folded
	err   error // why it stopped reading: errFoldFull, or a row it could not read
}

// errFoldFull stops a fold's query once its transaction has read its share.
var errFoldFull = errors.New("fold full")

// foldStep is foldFunc's state in one query.
type foldStep struct{ f *fold }

func (s *foldStep) Step(_ *msqlite.FunctionContext, args []driver.Value) error {
	if s.f == nil {
		h, _ := args[0].(int64)
		v, ok := folds.Load(h)
		if !ok {
			return fmt.Errorf("%s: no fold %d", foldFunc, h)
		}
		s.f = v.(*fold)
	}
	f := s.f
	r, load, err := foldedRow(args[1:])
	if err != nil {
		f.err = fmt.Errorf("row %d: %w", r.ID, err)
		return f.err
	}
	if load {
		f.row(r)
	}
	f.n++
	f.size += len(r.Update)
	f.last = r.ID
	if f.n >= f.limit || f.size >= chunkBytes || f.n >= minTxRows && time.Since(f.start) >= txBudget {
		f.err = errFoldFull
		return f.err
	}
	return nil
}

// foldedRow reads (path, rowid, timestamp, update) as scanRows would scan them (rowStamp);
// load is false for a row no room's load reads, as pycrdt-store reads a room (`WHERE path
// = ? AND timestamp >= ?`): its path is not text, or its timestamp is NULL.
func foldedRow(args []driver.Value) (r ystore.Row, load bool, err error) {
	r.ID, _ = args[1].(int64)
	switch p := args[0].(type) {
	case string:
		r.Room = p
	case []byte, nil:
		return r, false, nil
	default:
		return r, false, fmt.Errorf("path: %T, want text", args[0])
	}
	if r.Timestamp, err = timestampOf(args[2]); err != nil {
		return r, false, err
	}
	if math.IsNaN(r.Timestamp) {
		return r, false, nil
	}
	switch u := args[3].(type) {
	case []byte:
		r.Update = u
	case string:
		r.Update = []byte(u)
	case nil:
	default:
		return r, false, fmt.Errorf("update: %T, want a blob", args[3])
	}
	return r, true, nil
}

func (s *foldStep) WindowInverse(*msqlite.FunctionContext, []driver.Value) error {
	return errors.New(foldFunc + " is not a window function")
}

func (s *foldStep) WindowValue(*msqlite.FunctionContext) (driver.Value, error) { return nil, nil }

func (s *foldStep) Final(*msqlite.FunctionContext) {}

// foldRows hands row each row with from <= rowid <= upTo in rowid order (their updates
// too when updates is set, else nil) that a room's load reads (foldedRow), in one read
// transaction bounded as fold is; it returns the rowid of the last row it read and
// whether rows may remain.
func (s *store) foldRows(ctx context.Context, from, upTo int64, limit int, updates bool, row func(ystore.Row)) (last int64, more bool, err error) {
	cols, update := "path, rowid, timestamp", "NULL" // a blob not asked for is not read
	if updates {
		cols, update = cols+", yupdate", "yupdate"
	}
	err = s.read(ctx, func(tx *sql.Tx) error {
		f := &fold{row: row, start: time.Now(), limit: limit, last: from}
		h := rand.Int64()
		if _, taken := folds.LoadOrStore(h, f); taken {
			return fmt.Errorf("fold handle %d taken", h)
		}
		defer folds.Delete(h)
		var ignored any
		err := tx.QueryRowContext(ctx,
			"SELECT "+foldFunc+"(?, path, rowid, timestamp, "+update+") FROM (SELECT "+cols+" FROM yupdates WHERE rowid >= ? AND rowid <= ? ORDER BY rowid LIMIT ?)",
			h, from, upTo, limit).Scan(&ignored)
		switch {
		case isNoTable(err):
			return ErrSchema
		case errors.Is(f.err, errFoldFull):
			last, more = f.last, true
			return nil
		case f.err != nil:
			return f.err
		case err != nil && f.n > 0:
			// Not retried as a busy store would be: the rows folded were handed on.
			return fmt.Errorf("read stopped after %d rows: %v", f.n, err)
		case err != nil:
			return err
		}
		last, more = f.last, false
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("read rows from %d: %w", from, err)
	}
	return last, more, nil
}

// foldAll folds the rows up to upTo (foldRows), from the first, a read transaction at a
// time: every rowid counts, the ones at or below 0 a crafted store may hold too.
func (s *store) foldAll(ctx context.Context, upTo int64, limit int, updates bool, row func(ystore.Row), chunk func() error) error {
	for from := int64(math.MinInt64); ; {
		last, more, err := s.foldRows(ctx, from, upTo, limit, updates, row)
		if err != nil {
			return err
		}
		if err := chunk(); err != nil {
			return err
		}
		if !more || last >= upTo {
			return nil
		}
		from = last + 1
	}
}
