package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// A plan reads every row's key (room, rowid, timestamp), in rowid order. Returned row by
// row through database/sql, that was most of the plan's cost: 0.59 s for 540k rows, a Go
// string and several conversions a row. The keys are instead folded inside SQLite, by an
// aggregate function of the store's own (yfold) that hands each row's key to the plan
// (keysFold) as SQLite reads it: 0.2 s. The rows and their order are the same.

// foldFunc is the name of the aggregate registered with the driver.
const foldFunc = "jupyter_mcp_sidecar_yfold"

func init() {
	msqlite.MustRegisterFunction(foldFunc, &msqlite.FunctionImpl{
		NArgs: 4,
		// The room is only read, or copied when kept (picker.room).
		VolatileArgs:  true,
		MakeAggregate: func(msqlite.FunctionContext) (msqlite.AggregateFunction, error) { return &keysStep{}, nil },
	})
}

// folds are the folds under way, by the handle their query passes yfold: a random one,
// besides the schema's not being trusted (dsn), so that no query but the fold's own finds
// it.
var folds sync.Map // int64 → *keysFold

// keysFold is one read transaction's fold of row keys: each is handed to row; it stops
// once the transaction has run for txBudget (after at least minTxRows rows), or limit rows.
type keysFold struct {
	row   func(ystore.Row)
	start time.Time
	limit int
	n     int
	last  int64 // the rowid of the last row folded
	err   error // why it stopped reading: errFoldFull, or a row it could not read
}

// errFoldFull stops a fold's query once its transaction has read its share.
var errFoldFull = errors.New("fold full")

// keysStep is yfold's state in one query.
type keysStep struct{ f *keysFold }

func (s *keysStep) Step(_ *msqlite.FunctionContext, args []driver.Value) error {
	if s.f == nil {
		h, _ := args[0].(int64)
		v, ok := folds.Load(h)
		if !ok {
			return fmt.Errorf("%s: no fold %d", foldFunc, h)
		}
		s.f = v.(*keysFold)
	}
	f := s.f
	var r ystore.Row
	var err error
	switch p := args[1].(type) {
	case string:
		r.Room = p
	case []byte:
		r.Room = string(p)
	default:
		err = fmt.Errorf("row path: %T, want text", args[1])
	}
	r.ID, _ = args[2].(int64)
	if err == nil {
		r.Timestamp, err = asFloat(args[3])
	}
	if err != nil {
		f.err = fmt.Errorf("row %d: %w", r.ID, err)
		return f.err
	}
	f.row(r)
	f.n++
	f.last = r.ID
	if f.n >= f.limit || f.n >= minTxRows && time.Since(f.start) >= txBudget {
		f.err = errFoldFull
		return f.err
	}
	return nil
}

func (s *keysStep) WindowInverse(*msqlite.FunctionContext, []driver.Value) error {
	return errors.New(foldFunc + " is not a window function")
}

func (s *keysStep) WindowValue(*msqlite.FunctionContext) (driver.Value, error) { return nil, nil }

func (s *keysStep) Final(*msqlite.FunctionContext) {}

// asFloat reads a timestamp as database/sql would scan it into a float64.
func asFloat(v driver.Value) (float64, error) {
	switch t := v.(type) {
	case float64:
		return t, nil
	case int64:
		return float64(t), nil
	case string:
		return strconv.ParseFloat(t, 64)
	case []byte:
		return strconv.ParseFloat(string(t), 64)
	}
	return 0, fmt.Errorf("timestamp: %T, want a number", v)
}

// foldKeys hands row the key of each row with after < rowid <= upTo in rowid order, up
// to limit of them, in one read transaction bounded as scanRows bounds it; it returns
// the rowid of the last one and whether rows may remain. A row's Room is valid only
// during the call: row copies it to keep it.
func (s *store) foldKeys(ctx context.Context, after, upTo int64, limit int, row func(ystore.Row)) (last int64, more bool, err error) {
	err = s.read(ctx, func(tx *sql.Tx) error {
		f := &keysFold{row: row, start: time.Now(), limit: limit, last: after}
		h := rand.Int64()
		if _, taken := folds.LoadOrStore(h, f); taken {
			return fmt.Errorf("fold handle %d taken", h)
		}
		defer folds.Delete(h)
		var ignored any
		err := tx.QueryRowContext(ctx,
			"SELECT "+foldFunc+"(?, path, rowid, timestamp) FROM (SELECT path, rowid, timestamp FROM yupdates WHERE rowid > ? AND rowid <= ? ORDER BY rowid LIMIT ?)",
			h, after, upTo, limit).Scan(&ignored)
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
		return 0, false, fmt.Errorf("read row keys after %d: %w", after, err)
	}
	return last, more, nil
}
