package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// shipTimeout bounds one ship transaction, large enough for a first ship of a big store.
const shipTimeout = 5 * time.Minute

// ErrSourceID is returned by NewShipper for an empty source id.
var ErrSourceID = errors.New("ship: empty source id")

// Shipper appends the rows another store's Tailer delivers (in practice the local SQLite
// store) into the Postgres store, so that sidecars elsewhere serve from one shared
// Postgres. Per source room it records, in the same transaction as the rows, how many
// rows it shipped since the room's last reset and a digest of them; a Reset from the
// source that extends that prefix ships only what follows it, anything else becomes a
// Postgres-side reset. Restarts therefore neither lose nor duplicate rows.
type Shipper struct {
	cfg    Config
	n      names
	source ystore.Tailer
	id     string
	m      *shipMetrics

	mu     sync.Mutex
	status ShipStatus
	// cursors are the committed cursors of the rooms shipped by this Shipper.
	cursors map[string]shipCursor
}

// ShipStatus reports a Shipper's health.
type ShipStatus struct {
	// Source is the status of the tailer shipped from.
	Source ystore.Status
	// Reachable is true while Postgres accepts writes.
	Reachable bool
	// LastError is the most recent write error, empty after a successful write.
	LastError string
	// LastErrorAt is when LastError happened.
	LastErrorAt time.Time
	// RowsShipped counts rows appended since the Shipper started.
	RowsShipped uint64
	// Resets counts Postgres-side resets (history replaced or removed) written.
	Resets uint64
	// LastShippedAt is when the last batch was committed.
	LastShippedAt time.Time
}

// shipCursor is what was shipped for one source room since its last reset: the number of
// rows and the digest chain over their updates.
type shipCursor struct {
	rows   int64
	digest []byte
}

// extend chains the updates of rows onto the cursor.
func (c shipCursor) extend(rows []ystore.Row) shipCursor {
	for _, r := range rows {
		h := sha256.New()
		h.Write(c.digest)
		u := sha256.Sum256(r.Update)
		h.Write(u[:])
		c = shipCursor{rows: c.rows + 1, digest: h.Sum(nil)}
	}
	return c
}

// equal compares two cursors.
func (c shipCursor) equal(o shipCursor) bool {
	return c.rows == o.rows && bytes.Equal(c.digest, o.digest)
}

// NewShipper returns a Shipper from source into the store of cfg, recording its cursors
// under sourceID (one per source store, stable across restarts), and registers its
// metrics. It does no I/O.
func NewShipper(cfg Config, source ystore.Tailer, sourceID string) (*Shipper, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if sourceID == "" {
		return nil, ErrSourceID
	}
	m, err := newShipMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Shipper{cfg: cfg, n: namesOf(cfg), source: source, id: sourceID, m: m, cursors: map[string]shipCursor{}}, nil
}

// Status reports the source's and the Postgres side's health.
func (s *Shipper) Status() ShipStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Source = s.source.Status()
	return st
}

// Run ships until ctx is done (it then returns nil) or the source fails. Write failures
// are retried with backoff; a batch (a streamed load: each room of it) is committed whole
// or not at all.
func (s *Shipper) Run(ctx context.Context) error {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	first := true
	err := s.source.Run(ctx, func(ctx context.Context, events []ystore.Event) error {
		// A first delivery of Resets only is the source's full load: rooms shipped
		// before and missing from it were removed while the Shipper was down.
		var load []ystore.Event
		if first && allResets(events) {
			load = events
		}
		first = false
		for _, batch := range batches(events) {
			for attempt := 0; ; attempt++ {
				var err error
				if conn == nil {
					conn, err = connect(ctx, s.cfg.DSN)
				}
				if err == nil {
					if err = s.ship(ctx, conn, batch, load); err == nil {
						break
					}
					conn.Close(context.WithoutCancel(ctx))
					conn = nil
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				s.failed(err)
				s.m.retries.Inc()
				if err := s.cfg.pause(ctx, attempt, "ship to postgres failed, retrying", "source", s.id, "err", err); err != nil {
					return err
				}
			}
			load = nil // reconciled with the first batch
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ship from source %q: %w", s.id, err)
	}
	return nil
}

// streamedRooms is how many rooms of a streamed load ship in one transaction.
const streamedRooms = 100

// batches splits a delivery into what ships in one transaction: all of it, or, when its
// Resets are streamed (a load, of any size), streamedRooms rooms at a time, so that the
// transactions do not grow with the number of rooms; a room's rows and cursor always
// commit together.
func batches(events []ystore.Event) [][]ystore.Event {
	if !slices.ContainsFunc(events, func(e ystore.Event) bool { return e.Stream != nil }) {
		return [][]ystore.Event{events}
	}
	return slices.Collect(slices.Chunk(events, streamedRooms))
}

// roomsOf returns the rooms of events, sorted.
func roomsOf(events []ystore.Event) []string {
	rooms := make([]string, 0, len(events))
	for _, e := range events {
		rooms = append(rooms, e.Room)
	}
	slices.Sort(rooms)
	return slices.Compact(rooms)
}

// allResets reports whether every event is a Reset.
func allResets(events []ystore.Event) bool {
	for _, e := range events {
		if e.Kind != ystore.EventReset {
			return false
		}
	}
	return true
}

// ship writes one batch of events in one transaction; with load, the source's full load
// (of which the batch is a part), rooms shipped before but absent from it are removed.
func (s *Shipper) ship(ctx context.Context, conn *pgx.Conn, events []ystore.Event, load []ystore.Event) error {
	start := time.Now()
	qctx, cancel := context.WithTimeout(ctx, shipTimeout)
	defer cancel()
	tx, err := conn.Begin(qctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if load != nil {
		if events, err = s.withRemoved(qctx, tx, events, load); err != nil {
			return err
		}
	}
	// Lock the rooms in sorted order, so that concurrent shippers cannot deadlock.
	committed, owned := map[string]shipCursor{}, map[string]bool{}
	for _, room := range roomsOf(events) {
		if committed[room], err = s.lockCursor(qctx, tx, room); err != nil {
			return err
		}
		if owned[room], err = s.owned(qctx, tx, room); err != nil {
			return err
		}
	}
	s.mu.Lock()
	mems := maps.Clone(s.cursors)
	s.mu.Unlock()
	var (
		shipped uint64
		resets  []shippedReset
	)
	for _, e := range events {
		before := committed[e.Room]
		var (
			after shipCursor
			n     int64
			reset bool
		)
		if e.Kind == ystore.EventReset {
			after, n, reset, err = s.shipReset(qctx, tx, e, before, owned[e.Room])
			if err != nil {
				return err
			}
			owned[e.Room] = owned[e.Room] || n > 0 || reset // shipReset owns what it writes
		} else {
			var rows []ystore.Row
			after, rows, reset = plan(e, before, mems[e.Room])
			n = int64(len(rows))
			if !owned[e.Room] && (len(rows) > 0 || reset) {
				if err := s.own(qctx, tx, e.Room); err != nil {
					return err
				}
				owned[e.Room] = true
			}
			if reset {
				if err := s.replace(qctx, tx, e.Room); err != nil {
					return err
				}
			} else if err := s.append(qctx, tx, e.Room, rows, false); err != nil {
				return err
			}
		}
		// Later events of the room in this batch follow this one's result.
		mems[e.Room] = after
		if reset {
			resets = append(resets, shippedReset{kind: e.Kind, room: e.Room, rows: n})
		}
		if !after.equal(before) || reset {
			if _, err := tx.Exec(qctx, `INSERT INTO `+s.n.cursors+` (source, path, rows, digest) VALUES ($1, $2, $3, $4)
				ON CONFLICT (source, path) DO UPDATE SET rows = EXCLUDED.rows, digest = EXCLUDED.digest, updated_at = now()`,
				s.id, e.Room, after.rows, append([]byte{}, after.digest...)); err != nil {
				return fmt.Errorf("room %q: save cursor: %w", e.Room, err)
			}
		}
		committed[e.Room] = after
		shipped += uint64(n)
	}
	if err := tx.Commit(qctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for _, r := range resets {
		s.cfg.Logger.Info("shipped room history as a reset", "source", s.id, logkey.Room, r.room, "kind", r.kind.String(), "rows", r.rows)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for room, c := range committed {
		s.cursors[room] = c
	}
	s.status.Reachable, s.status.LastError = true, ""
	s.status.RowsShipped += shipped
	s.status.Resets += uint64(len(resets))
	s.m.rows.Add(float64(shipped))
	s.m.resets.Add(float64(len(resets)))
	s.m.batch.Observe(time.Since(start).Seconds())
	s.status.LastShippedAt = time.Now()
	return nil
}

// withRemoved appends to events a Removed event for every room this source shipped that
// load (a full load) lacks.
func (s *Shipper) withRemoved(ctx context.Context, tx pgx.Tx, events, load []ystore.Event) ([]ystore.Event, error) {
	rs, err := tx.Query(ctx, `SELECT path FROM `+s.n.cursors+` WHERE source = $1 AND rows > 0 ORDER BY path`, s.id)
	if err != nil {
		return nil, fmt.Errorf("list shipped rooms: %w", err)
	}
	shipped, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list shipped rooms: %w", err)
	}
	present := make(map[string]bool, len(load))
	for _, e := range load {
		present[e.Room] = true
	}
	out := slices.Clone(events)
	for _, room := range shipped {
		if !present[room] {
			out = append(out, ystore.Event{Kind: ystore.EventRemoved, Room: room})
		}
	}
	return out, nil
}

// lockCursor reads a room's cursor, locking it for the transaction.
func (s *Shipper) lockCursor(ctx context.Context, tx pgx.Tx, room string) (shipCursor, error) {
	// The room lock also covers rooms without a cursor row yet.
	if err := lockRoom(ctx, tx, s.n, room); err != nil {
		return shipCursor{}, err
	}
	var c shipCursor
	err := tx.QueryRow(ctx, `SELECT rows, digest FROM `+s.n.cursors+` WHERE source = $1 AND path = $2`, s.id, room).
		Scan(&c.rows, &c.digest)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return shipCursor{}, fmt.Errorf("room %q: read cursor: %w", room, err)
	}
	return c, nil
}

// owned reports whether the room's recorded owner is this Shipper's (always true
// without an Owner: it then records none).
func (s *Shipper) owned(ctx context.Context, tx pgx.Tx, room string) (bool, error) {
	if s.cfg.Owner == "" {
		return true, nil
	}
	var owner string
	err := tx.QueryRow(ctx, `SELECT owner FROM `+s.n.rooms+` WHERE path = $1`, room).Scan(&owner)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("room %q: read owner: %w", room, err)
	}
	return owner == s.cfg.Owner, nil
}

// own records this Shipper's Owner as the room's owner.
func (s *Shipper) own(ctx context.Context, tx pgx.Tx, room string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.n.rooms+` (path, owner) VALUES ($1, $2)
		ON CONFLICT (path) DO UPDATE SET owner = EXCLUDED.owner, updated_at = now()`, room, s.cfg.Owner); err != nil {
		return fmt.Errorf("room %q: record owner: %w", room, err)
	}
	return nil
}

// shippedReset is a room whose history a batch replaced, for the log once committed.
type shippedReset struct {
	kind ystore.EventKind
	room string
	rows int64
}

// plan decides what an Updates or Removed event ships given the room's cursor in the
// database and the one this Shipper last committed: the rows to write, whether they
// replace the room's history (Removed: with nothing), and the cursor after.
func plan(e ystore.Event, db, mem shipCursor) (after shipCursor, rows []ystore.Row, reset bool) {
	if e.Kind == ystore.EventUpdates {
		if next := mem.extend(e.Rows); next.equal(db) && !mem.equal(db) {
			// An earlier attempt committed although its commit reported an error.
			return db, nil, false
		}
		return db.extend(e.Rows), e.Rows, false
	}
	if db.rows == 0 {
		return db, nil, false
	}
	return shipCursor{}, nil, true
}

// errNotPrefix stops the read of a Reset's rows that do not begin with what was shipped.
var errNotPrefix = errors.New("not the shipped prefix")

// shipReset writes a source Reset of a room whose cursor in the database is db, reading
// its rows as it copies them (a streamed Reset is never held): when the room is owned and
// its rows begin with the db.rows rows shipped, only the rest is appended; otherwise they
// become the room's history (reset), unless the room's history in Postgres is contained
// in them (needsReset), or there are none and nothing was shipped. It records the owner
// of what it writes. It returns the cursor after, the rows written and whether they
// replaced the history.
func (s *Shipper) shipReset(ctx context.Context, tx pgx.Tx, e ystore.Event, db shipCursor, owned bool) (after shipCursor, n int64, reset bool, err error) {
	if owned && db.rows > 0 {
		w := s.newRoomWriter(ctx, tx, e.Room, false)
		w.skip = db
		if err := e.Each(ctx, w.add); err != nil && !errors.Is(err, errNotPrefix) {
			return shipCursor{}, 0, false, err
		} else if err == nil && w.skip.rows == 0 {
			if err := w.flush(); err != nil {
				return shipCursor{}, 0, false, err
			}
			return w.cur, w.n, false, nil
		}
	}
	// A room taking its owner (ownerless before, or another's) is rewritten whole, so
	// that its owner's readers see all of it.
	reset = true
	if owned {
		if reset, err = s.needsReset(ctx, tx, e); err != nil {
			return shipCursor{}, 0, false, err
		}
	}
	w := s.newRoomWriter(ctx, tx, e.Room, reset)
	if err := e.Each(ctx, w.add); err != nil {
		return shipCursor{}, 0, false, err
	}
	if err := w.flush(); err != nil {
		return shipCursor{}, 0, false, err
	}
	switch {
	case w.n == 0 && db.rows == 0:
		return db, 0, false, nil // nothing shipped, nothing to ship
	case w.n == 0:
		// No rows: the room is gone at the source.
		after, reset = shipCursor{}, true
		err = s.replace(ctx, tx, e.Room)
	default:
		after = w.cur
	}
	if err == nil && !owned {
		err = s.own(ctx, tx, e.Room)
	}
	return after, w.n, reset, err
}

// copyBatchRows and copyBatchBytes bound the rows a roomWriter holds before it copies
// them: a streamed chunk can be a few dozen rows, and one COPY each would be slow.
const (
	copyBatchRows  = 5000
	copyBatchBytes = 4 << 20
)

// roomWriter copies the rows of one room handed to add, in batches, chaining them onto
// its cursor; the rows of skip's count are only hashed, and must chain to skip.
type roomWriter struct {
	s     *Shipper
	ctx   context.Context
	tx    pgx.Tx
	room  string
	reset bool // flag the first row written as the room's reset
	skip  shipCursor
	hash  shipCursor // the rows skipped so far
	cur   shipCursor
	n     int64
	held  []ystore.Row
	bytes int
}

func (s *Shipper) newRoomWriter(ctx context.Context, tx pgx.Tx, room string, reset bool) *roomWriter {
	return &roomWriter{s: s, ctx: ctx, tx: tx, room: room, reset: reset}
}

// add takes the next rows of the room; errNotPrefix when the rows skipped are not skip's.
func (w *roomWriter) add(rows []ystore.Row) error {
	if w.skip.rows > 0 {
		k := min(int64(len(rows)), w.skip.rows-w.hash.rows)
		w.hash = w.hash.extend(rows[:k])
		rows = rows[k:]
		if w.hash.rows < w.skip.rows {
			return nil
		}
		if !w.hash.equal(w.skip) {
			return errNotPrefix
		}
		w.cur, w.skip = w.skip, shipCursor{}
	}
	for _, r := range rows {
		w.held = append(w.held, r)
		w.bytes += len(r.Update)
		if len(w.held) >= copyBatchRows || w.bytes >= copyBatchBytes {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush copies the rows held; the first, when the rows replace the room's history,
// after deleting that history.
func (w *roomWriter) flush() error {
	if len(w.held) == 0 {
		return nil
	}
	first := w.reset && w.n == 0
	if first {
		if _, err := w.tx.Exec(w.ctx, `DELETE FROM `+w.s.n.table+` WHERE path = $1`, w.room); err != nil {
			return fmt.Errorf("room %q: delete history: %w", w.room, err)
		}
	}
	if err := w.s.append(w.ctx, w.tx, w.room, w.held, first); err != nil {
		return err
	}
	w.cur = w.cur.extend(w.held)
	w.n += int64(len(w.held))
	w.held, w.bytes = w.held[:0], 0
	return nil
}

// needsReset reports whether a source Reset's rows must replace the room's history in
// Postgres: false when the room holds history and the rows' document contains it (a
// compaction or checkpoint at the source), so that appending them changes the document
// to the source's exactly.
func (s *Shipper) needsReset(ctx context.Context, tx pgx.Tx, e ystore.Event) (bool, error) {
	all, err := readRoom(ctx, tx, s.n, e.Room)
	if err != nil {
		return false, err
	}
	if len(all) == 0 {
		return true, nil
	}
	held, present := history(all)
	if !present || len(held) == 0 {
		return true, nil
	}
	ok, err := covers(ctx, e, held)
	if err != nil {
		s.cfg.Logger.Info("room history does not decode; shipping a reset", "source", s.id, logkey.Room, e.Room, "err", err)
		return true, nil
	}
	return !ok, nil
}

// covers reports whether the document built from newer's rows holds everything the one
// built from older holds: applying older on top of it changes nothing.
func covers(ctx context.Context, newer ystore.Event, older []ystore.Row) (bool, error) {
	doc := yjs.NewDoc()
	if err := newer.Each(ctx, func(rows []ystore.Row) error { return applyAll(doc, rows) }); err != nil {
		return false, err
	}
	before, err := doc.EncodeStateAsUpdate(nil)
	if err != nil {
		return false, err
	}
	if err := applyAll(doc, older); err != nil {
		return false, err
	}
	after, err := doc.EncodeStateAsUpdate(nil)
	if err != nil {
		return false, err
	}
	return bytes.Equal(before, after), nil
}

// applyAll applies rows to doc.
func applyAll(doc *yjs.Doc, rows []ystore.Row) error {
	for _, r := range rows {
		if _, err := doc.ApplyUpdate(r.Update); err != nil {
			return fmt.Errorf("row %d: %w", r.ID, err)
		}
	}
	return nil
}

// replace deletes a room's rows and writes a NULL reset row, which marks it removed.
func (s *Shipper) replace(ctx context.Context, tx pgx.Tx, room string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM `+s.n.table+` WHERE path = $1`, room); err != nil {
		return fmt.Errorf("room %q: delete history: %w", room, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.n.table+` (path, yupdate, timestamp, reset)
		VALUES ($1, NULL, extract(epoch FROM clock_timestamp()), true)`, room); err != nil {
		return fmt.Errorf("room %q: mark removed: %w", room, err)
	}
	return nil
}

// append copies rows into the table in order, the first flagged reset if asked.
func (s *Shipper) append(ctx context.Context, tx pgx.Tx, room string, rows []ystore.Row, reset bool) error {
	if len(rows) == 0 {
		return nil
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{s.cfg.Schema, s.cfg.Table},
		[]string{"path", "yupdate", "timestamp", "reset"},
		pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
			r := rows[i]
			return []any{room, r.Update, r.Timestamp, reset && i == 0}, nil
		}))
	if err != nil {
		return fmt.Errorf("room %q: copy %d rows: %w", room, len(rows), err)
	}
	return nil
}

// failed records a write error.
func (s *Shipper) failed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.Reachable = false
	s.status.LastError = statusError(err).Error() // ship's /readyz too answers without authentication
	s.status.LastErrorAt = time.Now()
}
