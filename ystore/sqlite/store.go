package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/confine"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/internal/sqlitevfs"
)

// chunkBytes bounds the update bytes read in one transaction (a single larger row or
// checkpoint piece excepted).
const chunkBytes = 256 << 10

// txBudget bounds the time one read transaction spends reading rows: past it, the rows
// read so far are returned and the rest wait for the next transaction. The row and byte
// bounds alone let a backlog of small rows hold the writer's lock for milliseconds.
const txBudget = 2 * time.Millisecond

// minTxRows is how many rows a read transaction reads before txBudget can end it: on a
// starved machine the scheduler alone can use up the budget, and one row per transaction
// (two queries and a delivery each) left a flood of 1,500 rows unread after 30 s. 64 small
// rows are a fraction of a millisecond of the reader's own work.
const minTxRows = 64

// fingerprint identifies one stored row, to notice when its rowid is reused.
type fingerprint struct {
	room      string
	timestamp uint64 // math.Float64bits: a NULL one (NaN, rowStamp) equals itself
	size      int64
}

// rowStamp scans a row's timestamp as pycrdt-store's loads compare and order it (`WHERE
// timestamp >= ? ORDER BY timestamp`): a number as it is; NULL, which they never read,
// as NaN; text or a blob, which a crafted store may hold and SQLite orders after every
// number, as +Inf.
type rowStamp float64

func (s *rowStamp) Scan(src any) error {
	f, err := timestampOf(src)
	*s = rowStamp(f)
	return err
}

// rawStamp scans a timestamp as rowStamp does into *f, keeping the value SQLite holds
// (raw), to be bound again where SQLite, not Go, must compare it: text and blob stamps,
// all +Inf as numbers, are ordered among themselves only by SQLite.
type rawStamp struct {
	f   *float64
	raw any
}

func (s *rawStamp) Scan(src any) error {
	if b, ok := src.([]byte); ok {
		src = bytes.Clone(b)
	}
	s.raw = src
	var err error
	*s.f, err = timestampOf(src)
	return err
}

// timestampOf is the timestamp rowStamp scans from src.
func timestampOf(src any) (float64, error) {
	switch v := src.(type) {
	case nil:
		return math.NaN(), nil
	case float64:
		return v, nil
	case int64:
		return float64(v), nil
	case string, []byte:
		return math.Inf(1), nil
	}
	return 0, fmt.Errorf("scan timestamp: %T, want a number", src)
}

// store is one read-only connection to one store file.
type store struct {
	db       *sql.DB
	confined *sqlitevfs.Confined // nil: not confined
	ident    os.FileInfo         // the file the connection has open
	// onTx observes each read transaction's duration; onBusy each busy retry.
	onTx        func(wall, cpu time.Duration)
	onBusy      func()
	maxBusyWait time.Duration
	// schemaChecked is the schema version checkSchema last found plain tables at (0:
	// none: a store's version is 1 or more once it has a table).
	schemaChecked atomic.Int64
}

// storeFile is the store's path and, in hub mode, the user's directory it is confined to.
type storeFile struct {
	path string
	dir  *confine.Dir // nil: not confined
}

// stat returns the file at the path, resolved beneath the user's directory if confined.
func (f storeFile) stat() (os.FileInfo, error) {
	if f.dir == nil {
		return os.Stat(f.path)
	}
	return f.dir.Stat(f.path)
}

// openStore opens f read-only if it is a regular file (statStore), and checks that
// the connection has the file that f names now (a rename between stat and open is
// retried by the caller). A confined file is located beneath the user's directory,
// checked to be the user's, and handed to SQLite under a name only that file and its
// journal can be opened by (sqlitevfs.Confine): checking the path and then letting
// SQLite open it would race with a symbolic link swapped in between.
func openStore(ctx context.Context, f storeFile, maxBusyWait time.Duration, onTx func(wall, cpu time.Duration), onBusy func()) (*store, error) {
	before, err := statStore(f)
	if err != nil {
		return nil, err
	}
	name, confined, err := confineStore(f, before)
	if err != nil {
		return nil, err
	}
	closeAll := func(db *sql.DB) {
		if db != nil {
			db.Close()
		}
		if confined != nil {
			_ = confined.Close()
		}
	}
	db, err := sql.Open("sqlite", dsn(name))
	if err != nil {
		closeAll(nil)
		return nil, fmt.Errorf("open store: %w", err)
	}
	// One long-lived connection: it keeps the file (and so its inode number) held, and
	// PRAGMA data_version is only meaningful on the same connection.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	// Opening reads the schema, which the writer's lock can refuse like any read.
	if err := retryBusy(ctx, maxBusyWait, onBusy, func() error { return db.PingContext(ctx) }); err != nil {
		closeAll(db)
		if _, serr := statStore(f); serr != nil {
			return nil, serr // gone, or replaced by what cannot be opened, in between: the reason
		}
		return nil, fmt.Errorf("open store: %w", err)
	}
	after, err := f.stat()
	if err != nil || !os.SameFile(before, after) {
		closeAll(db)
		return nil, fmt.Errorf("open store: %w", errReplacedWhileOpening)
	}
	return &store{db: db, confined: confined, ident: after, onTx: onTx, onBusy: onBusy, maxBusyWait: maxBusyWait}, nil
}

// confineStore returns the name SQLite opens f by: its path, or for a confined file the
// name of the file located beneath the user's directory, which must be the user's and
// the file stat found (before).
func confineStore(f storeFile, before os.FileInfo) (string, *sqlitevfs.Confined, error) {
	if f.dir == nil {
		return f.path, nil, nil
	}
	l, err := f.dir.Locate(f.path)
	switch {
	case errors.Is(err, confine.ErrMoved):
		return "", nil, fmt.Errorf("open store: %w", errReplacedWhileOpening)
	case err != nil:
		return "", nil, fmt.Errorf("open store: %w", err)
	case !os.SameFile(before, l.Info):
		_ = l.Close()
		return "", nil, fmt.Errorf("open store: %w", errReplacedWhileOpening)
	}
	c, err := sqlitevfs.Confine(l)
	if err != nil {
		_ = l.Close()
		return "", nil, fmt.Errorf("open store: %w", err)
	}
	return c.Name(), c, nil
}

var errReplacedWhileOpening = errors.New("file replaced while opening")

// dsn is a read-only URI for path: no busy handler (busy reads are retried outside
// any transaction), no writes.
func dsn(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(0)")
	q.Add("_pragma", "query_only(1)")
	// The store's schema (its views, triggers, indexes) may not call the functions the
	// sidecar registers, as the plan's fold (fold.go): a store is input.
	q.Add("_pragma", "trusted_schema(0)")
	// A tailer reads each row once: a small page cache (256 KiB, not SQLite's 2 MB)
	// keeps a hub of many open stores small.
	q.Add("_pragma", "cache_size(-256)")
	return (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String()
}

func (s *store) close() error {
	err := s.db.Close()
	if s.confined != nil {
		_ = s.confined.Close()
	}
	return err
}

// shrink frees what memory the connection's caches can give back (PRAGMA
// shrink_memory); it is an optimization, so a failure is ignored: the next read
// reports a connection that is broken.
func (s *store) shrink(ctx context.Context) { _, _ = s.db.ExecContext(ctx, "PRAGMA shrink_memory") }

// read runs fn in one read transaction, retried from scratch while the writer holds its
// lock. fn must not wait on anything but the database.
func (s *store) read(ctx context.Context, fn func(*sql.Tx) error) error {
	return retryBusy(ctx, s.maxBusyWait, s.onBusy, func() error { return s.measured(ctx, fn) })
}

// retryBusy runs attempt until it is not refused by the writer's lock or maxWait has
// passed, sleeping 0.1 to 2 ms between attempts (never inside a transaction).
func retryBusy(ctx context.Context, maxWait time.Duration, onBusy func(), attempt func() error) error {
	deadline := time.Now().Add(maxWait)
	backoff := 100 * time.Microsecond
	for {
		err := attempt()
		if !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		onBusy()
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Millisecond)
	}
}

// measured runs one attempt of fn on a locked OS thread and reports its wall-clock and
// thread CPU durations unless the writer's lock refused it (then no lock was held). The
// wall-clock time is how long the writer may have been kept waiting; the CPU time is the
// part that is the reader's own work rather than the scheduler's.
func (s *store) measured(ctx context.Context, fn func(*sql.Tx) error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	start := time.Now()
	err := s.readOnce(ctx, fn)
	wall := time.Since(start)
	if !isBusy(err) {
		s.onTx(wall, threadCPU()-cpu0)
	}
	return err
}

func (s *store) readOnce(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	if err := s.checkSchema(ctx, tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("end read: %w", err)
	}
	return nil
}

// isBusy reports whether err means the writer holds a lock that blocks the read.
func isBusy(err error) bool {
	var e *msqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	code := e.Code() & 0xff
	return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
}

// ErrSchema is returned by reads of a file without the yupdates table: a store being
// created, truncated, or not a Y-store.
var ErrSchema = errors.New("y-store has no yupdates table")

// ErrNotTable is returned by reads of a file whose yupdates or ycheckpoints is not a
// plain table: a view, a virtual table, or a table with generated columns computes what
// a read returns, so that a store of a few kilobytes could make a read run forever (a
// recursive view) or build gigabytes (zeroblob); a collation declared on yupdates
// changes which rows are a room's.
var ErrNotTable = errors.New("y-store table is not a plain table")

// checkSchema fails with ErrNotTable when yupdates or ycheckpoints is not a plain table,
// in tx, before anything reads them; it checks again only when the schema changed
// (PRAGMA schema_version).
func (s *store) checkSchema(ctx context.Context, tx *sql.Tx) error {
	var version int64
	if err := tx.QueryRowContext(ctx, "PRAGMA schema_version").Scan(&version); err != nil {
		return err
	}
	if version == s.schemaChecked.Load() {
		return nil
	}
	var name, kind string
	err := tx.QueryRowContext(ctx,
		"SELECT name, type FROM pragma_table_list WHERE schema = 'main' AND name IN ('yupdates', 'ycheckpoints') AND type != 'table' LIMIT 1",
	).Scan(&name, &kind)
	switch {
	case err == nil:
		return fmt.Errorf("%w: %s is a %s", ErrNotTable, name, kind)
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	var def sql.NullString
	err = tx.QueryRowContext(ctx, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'yupdates'").Scan(&def)
	switch {
	case err == nil && strings.Contains(strings.ToUpper(def.String), "COLLATE"):
		// pycrdt-store reads a room WHERE path = ?: a collation other than the default
		// makes rooms of other keys (NOCASE: another case) its rows too.
		return fmt.Errorf("%w: yupdates declares a collation", ErrNotTable)
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return err
	}
	for _, table := range []string{"yupdates", "ycheckpoints"} {
		var col string
		err := tx.QueryRowContext(ctx, "SELECT name FROM pragma_table_xinfo(?) WHERE hidden != 0 LIMIT 1", table).Scan(&col)
		switch {
		case err == nil:
			return fmt.Errorf("%w: %s has a computed column %s", ErrNotTable, table, col)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
	}
	s.schemaChecked.Store(version)
	return nil
}

// isNoTable reports whether err means a table is missing (a store being created or
// truncated, or one older than ycheckpoints).
func isNoTable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such table")
}

// versions returns PRAGMA data_version, which changes when another connection commits,
// and PRAGMA user_version, the schema version pycrdt-store checks.
func (s *store) versions(ctx context.Context) (data, user int64, err error) {
	err = s.read(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "PRAGMA data_version").Scan(&data); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&user)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("read versions: %w", err)
	}
	return data, user, nil
}

// dataVersion reads PRAGMA data_version in tx: the version of the state tx reads.
func dataVersion(ctx context.Context, tx *sql.Tx) (int64, error) {
	var dv int64
	err := tx.QueryRowContext(ctx, "PRAGMA data_version").Scan(&dv)
	return dv, err
}

// top returns the highest rowid and its row's fingerprint (0 for an empty store), and
// the data version they were read at.
func (s *store) top(ctx context.Context) (id int64, fp fingerprint, dv int64, err error) {
	err = s.read(ctx, func(tx *sql.Tx) error {
		id, fp = 0, fingerprint{}
		var err error
		if dv, err = dataVersion(ctx, tx); err != nil {
			return err
		}
		var ts rowStamp
		err = tx.QueryRowContext(ctx,
			"SELECT rowid, path, timestamp, length(yupdate) FROM yupdates ORDER BY rowid DESC LIMIT 1",
		).Scan(&id, &fp.room, &ts, &fp.size)
		fp.timestamp = math.Float64bits(float64(ts))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case isNoTable(err):
			return ErrSchema
		}
		return err
	})
	if err != nil {
		return 0, fingerprint{}, 0, fmt.Errorf("read newest row: %w", err)
	}
	return id, fp, dv, nil
}

// rowKey orders a room's rows the way its index does: by timestamp, then rowid.
type rowKey struct {
	timestamp float64
	id        int64
}

func (k rowKey) less(o rowKey) bool {
	return k.timestamp < o.timestamp || (k.timestamp == o.timestamp && k.id < o.id)
}

// same reports whether k and o are the same row as far as Go can order them: rows
// stamped text or blob (+Inf, rowStamp) are ordered among themselves by SQLite alone,
// so any two such are the same.
func (k rowKey) same(o rowKey) bool {
	return k == o || math.IsInf(k.timestamp, 1) && math.IsInf(o.timestamp, 1)
}

// firstRows returns the first row (by timestamp, then rowid) of each room, in one read
// transaction; a room without rows is absent.
func (s *store) firstRows(ctx context.Context, rooms []string) (map[string]rowKey, error) {
	var out map[string]rowKey
	err := s.read(ctx, func(tx *sql.Tx) error {
		out = make(map[string]rowKey, len(rooms))
		for _, room := range rooms {
			var k rowKey
			err := tx.QueryRowContext(ctx,
				"SELECT timestamp, rowid FROM yupdates WHERE path = ? AND timestamp IS NOT NULL ORDER BY timestamp, rowid LIMIT 1", room,
			).Scan((*rowStamp)(&k.timestamp), &k.id)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				continue
			case isNoTable(err):
				return ErrSchema
			case err != nil:
				return err
			}
			out[room] = k
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read first rows: %w", err)
	}
	return out, nil
}

// rowsAfter returns up to limit rows with after < rowid <= upTo (upTo < 0: no bound) in
// rowid order, stopping early once chunkBytes of updates are read or the transaction has
// run for txBudget (after at least minTxRows rows); more reports whether
// rows may remain; dv is the data version they were read at. When check is set, it first
// verifies in the same transaction that the row at after still has fingerprint fp, and
// reports ok false (and no rows) if not.
func (s *store) rowsAfter(ctx context.Context, after, upTo int64, limit int, check bool, fp fingerprint) (rows []ystore.Row, more, ok bool, dv int64, err error) {
	err = s.read(ctx, func(tx *sql.Tx) error {
		start := time.Now()
		rows, more, ok = nil, false, true
		var err error
		if dv, err = dataVersion(ctx, tx); err != nil {
			return err
		}
		if check && after > 0 {
			var got fingerprint
			var ts rowStamp
			err := tx.QueryRowContext(ctx,
				"SELECT path, timestamp, length(yupdate) FROM yupdates WHERE rowid = ?", after,
			).Scan(&got.room, &ts, &got.size)
			got.timestamp = math.Float64bits(float64(ts))
			if isNoTable(err) {
				return ErrSchema
			}
			if errors.Is(err, sql.ErrNoRows) || (err == nil && got != fp) {
				ok = false
				return nil
			}
			if err != nil {
				return err
			}
		}
		if upTo < 0 {
			upTo = 1<<63 - 1
		}
		rows, _, more, err = queryRows(ctx, tx, start, limit, "",
			"SELECT rowid, path, yupdate, timestamp FROM yupdates WHERE rowid > ? AND rowid <= ? ORDER BY rowid LIMIT ?",
			after, upTo, limit)
		return err
	})
	if err != nil {
		return nil, false, false, 0, fmt.Errorf("read rows after %d: %w", after, err)
	}
	return rows, more, ok, dv, nil
}

// queryRows runs query in tx and reads its rows as scanRows does; a missing table is
// ErrSchema.
func queryRows(ctx context.Context, tx *sql.Tx, start time.Time, limit int, room string, query string, args ...any) (rows []ystore.Row, last any, more bool, err error) {
	q, err := tx.QueryContext(ctx, query, args...)
	if isNoTable(err) {
		return nil, nil, false, ErrSchema
	}
	if err != nil {
		return nil, nil, false, err
	}
	return scanRows(q, start, limit, room)
}

// scanRows reads the rows of q, at most limit: (rowid, path, yupdate, timestamp), or
// (rowid, yupdate, timestamp) of room when room is not empty (a room's own rows: the
// path is not read again for each, a string the driver would allocate per row); it
// stops early once chunkBytes of updates are read or the transaction begun at start has
// run for txBudget (after at least minTxRows rows); more reports whether rows may remain,
// last is the timestamp of the last row as SQLite holds it (rawStamp). It closes q.
func scanRows(q *sql.Rows, start time.Time, limit int, room string) (rows []ystore.Row, last any, more bool, err error) {
	defer q.Close()
	size := 0
	var r ystore.Row
	ts := rawStamp{f: &r.Timestamp}
	dst := []any{&r.ID, &r.Room, (*ownedBytes)(&r.Update), &ts}
	if room != "" {
		r.Room = room
		dst = []any{&r.ID, (*ownedBytes)(&r.Update), &ts}
	}
	for q.Next() {
		if err := q.Scan(dst...); err != nil {
			return nil, nil, false, err
		}
		rows = append(rows, r)
		if size += len(r.Update); size >= chunkBytes || len(rows) >= minTxRows && time.Since(start) >= txBudget {
			return rows, ts.raw, true, nil
		}
	}
	return rows, ts.raw, len(rows) == limit, q.Err()
}

// ownedBytes scans a blob without copying it: the driver (modernc.org/sqlite) copies each
// blob out of SQLite into a slice of its own (conn.columnBlob), which database/sql, not
// knowing, copied again, so that a load held each row twice while it read (a row of
// 57 MB, 114). TestRowsOwnTheirBytes fails if a driver reuses the slice.
type ownedBytes []byte

// Scan takes src, a blob, as it is; NULL is nil.
func (b *ownedBytes) Scan(src any) error {
	switch v := src.(type) {
	case []byte:
		*b = v
	case nil:
		*b = nil
	case string:
		*b = []byte(v)
	default:
		return fmt.Errorf("scan update: %T, want a blob", src)
	}
	return nil
}

// stampParam returns what stands for stamp, a timestamp as SQLite holds it (rawStamp), in
// a query, and its arguments: a parameter bound to it, but the literal X” for the empty
// blob, which the driver binds as NULL (a nil or empty []byte).
func stampParam(stamp any) (string, []any) {
	if b, ok := stamp.([]byte); ok && len(b) == 0 {
		return "X''", nil
	}
	return "?", []any{stamp}
}

// pageKey is where a read of a room's rows in load order stopped: the last row's
// timestamp as SQLite holds it (rawStamp) and its rowid, so that SQLite compares the next
// page's rows with it as it ordered them.
type pageKey struct {
	stamp any
	id    int64
}

// roomRowsAfter returns up to limit rows of room with rowid <= upTo stamped at or after
// floor (a timestamp as SQLite holds it: NULL takes none), in timestamp then rowid order,
// after the key after (nil: from the first), in one read transaction bounded as scanRows
// bounds it, and the key of its last row (nil without rows). The index pycrdt-store keeps
// on (path, timestamp) serves it.
func (s *store) roomRowsAfter(ctx context.Context, room string, floor any, after *pageKey, upTo int64, limit int) (rows []ystore.Row, next *pageKey, more bool, err error) {
	var last any
	err = s.read(ctx, func(tx *sql.Tx) error {
		var err error
		if after == nil {
			f, fa := stampParam(floor)
			rows, last, more, err = queryRows(ctx, tx, time.Now(), limit, room,
				"SELECT rowid, yupdate, timestamp FROM yupdates WHERE path = ? AND rowid <= ? AND timestamp >= "+f+" ORDER BY timestamp, rowid LIMIT ?",
				slices.Concat([]any{room, upTo}, fa, []any{limit})...)
		} else {
			k, ka := stampParam(after.stamp)
			rows, last, more, err = queryRows(ctx, tx, time.Now(), limit, room,
				"SELECT rowid, yupdate, timestamp FROM yupdates WHERE path = ? AND rowid <= ? AND timestamp >= "+k+" AND (timestamp > "+k+" OR rowid > ?) ORDER BY timestamp, rowid LIMIT ?",
				slices.Concat([]any{room, upTo}, ka, ka, []any{after.id, limit})...)
		}
		return err
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("read rows of %s: %w", room, err)
	}
	if len(rows) > 0 {
		next = &pageKey{stamp: last, id: rows[len(rows)-1].ID}
	}
	return rows, next, more, nil
}

// checkpointTimes hands each room's checkpoint timestamp to each, in one read
// transaction: a room's is a few bytes, whatever its checkpoint's size.
func (s *store) checkpointTimes(ctx context.Context, each func(room string, ts float64)) error {
	err := s.read(ctx, func(tx *sql.Tx) error {
		q, err := tx.QueryContext(ctx, "SELECT path, timestamp FROM ycheckpoints")
		if isNoTable(err) {
			return nil
		}
		if err != nil {
			return err
		}
		defer q.Close()
		for q.Next() {
			var room string
			var ts rowStamp
			if err := q.Scan(&room, &ts); err != nil {
				return err
			}
			each(room, float64(ts))
		}
		return q.Err()
	})
	if err != nil {
		return fmt.Errorf("read checkpoint times: %w", err)
	}
	return nil
}

// checkpointReads bounds the reads of a checkpoint that the writer keeps replacing while
// it is read (pycrdt-store replaces one at most every few seconds).
const checkpointReads = 16

// checkpoint returns room's checkpoint as a row with ID 0 and its timestamp as SQLite
// holds it (rawStamp; the row's is rowStamp's), found false when it has none. A
// checkpoint is a whole document state, so it is read in pieces of chunkBytes, one
// transaction each, and read again if the writer replaced it meanwhile, checkpointReads
// times at most. Its bytes are read as a blob's whatever it holds (text, or NULL: no
// bytes), so that its length and its pieces count the same bytes.
func (s *store) checkpoint(ctx context.Context, room string) (ckpt ystore.Row, stamp any, found bool, err error) {
	for range checkpointReads {
		head := ystore.Row{Room: room}
		ts := rawStamp{f: &head.Timestamp}
		var size int64
		err := s.read(ctx, func(tx *sql.Tx) error {
			err := tx.QueryRowContext(ctx,
				"SELECT timestamp, coalesce(length(CAST(checkpoint AS BLOB)), 0) FROM ycheckpoints WHERE path = ?", room).Scan(&ts, &size)
			found = err == nil
			if errors.Is(err, sql.ErrNoRows) || isNoTable(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return ystore.Row{}, nil, false, fmt.Errorf("read checkpoint of %s: %w", room, err)
		}
		if !found {
			return ystore.Row{}, nil, false, nil
		}
		blob, same, err := s.checkpointBlob(ctx, room, ts.raw, size)
		if err != nil {
			return ystore.Row{}, nil, false, err
		}
		if same {
			head.Update = blob
			return head, ts.raw, true, nil
		}
	}
	return ystore.Row{}, nil, false, fmt.Errorf("read checkpoint of %s: replaced %d times while read", room, checkpointReads)
}

// checkpointBlob reads the checkpoint of room stamped stamp (as SQLite holds it: `IS`
// matches a NULL one too) in pieces; same is false if it was replaced or deleted in
// between.
func (s *store) checkpointBlob(ctx context.Context, room string, stamp any, size int64) (blob []byte, same bool, err error) {
	blob = make([]byte, 0, size)
	for off := int64(0); off == 0 || off < size; off += chunkBytes {
		var piece []byte
		st, sa := stampParam(stamp)
		err := s.read(ctx, func(tx *sql.Tx) error {
			return tx.QueryRowContext(ctx,
				"SELECT substr(CAST(checkpoint AS BLOB), ?, ?) FROM ycheckpoints WHERE path = ? AND timestamp IS "+st,
				slices.Concat([]any{off + 1, chunkBytes, room}, sa)...).Scan(&piece)
		})
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("read checkpoint of %s: %w", room, err)
		}
		blob = append(blob, piece...)
	}
	return blob, int64(len(blob)) == size, nil
}
