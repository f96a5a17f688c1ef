package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/internal/reloads"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/internal/tailstatus"
)

// Timeouts bounding each round trip, so that a dead connection is noticed.
const (
	connectTimeout = 10 * time.Second
	queryTimeout   = 30 * time.Second
)

// Tailer follows the Postgres Y-store. Its cursor is the pg_snapshot of its last read
// (see Snapshot), which survives reconnects and server restarts.
type Tailer struct {
	cfg     Config
	n       names
	m       *tailMetrics
	status  *tailstatus.Recorder
	untrack func() // the status series stop counting this tailer
	// follow is set for a Follower's tailer: it starts from the snapshot it first
	// takes (rows before it are the owners' loads), tags events with their room's
	// owner, and calls read after each successful read.
	follow *following
	// reloads are the rooms asked for again (Reload), delivered by the next read.
	reloads *reloads.Requests
}

// following is what a Follower's tailer does differently.
type following struct {
	read func() // after each successful read
}

var (
	_ ystore.Tailer   = (*Tailer)(nil)
	_ ystore.Reloader = (*Tailer)(nil)
)

// New validates cfg, registers the metrics on cfg.Registerer and returns a Tailer; it
// does no I/O.
func New(cfg Config) (*Tailer, error) {
	t, err := newTailer(cfg)
	if err != nil {
		return nil, err
	}
	if t.untrack, err = tailstatus.Track(cfg.Registerer, subsystem, t.Status); err != nil {
		return nil, err
	}
	return t, nil
}

// newTailer is New but for the status series: the caller tracks the status it reports.
func newTailer(cfg Config) (*Tailer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newTailMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Tailer{cfg: cfg, n: namesOf(cfg), m: m, status: tailstatus.New(), untrack: func() {}, reloads: reloads.New()}, nil
}

// Close takes the tailer out of the status series (its rows stay counted); call it once
// Run has returned.
func (t *Tailer) Close() { t.untrack() }

// Status reports reachability, the last error and the lag.
func (t *Tailer) Status() ystore.Status {
	return t.status.Status()
}

// FirstRead is closed once the first read of the store has finished, succeeded or failed.
func (t *Tailer) FirstRead() <-chan struct{} { return t.status.FirstRead() }

// Reload asks Run to deliver room again, whole, as a Reset, with its next read (woken
// now): the room's rows are read in that read's transaction.
func (t *Tailer) Reload(room string) { t.reloads.Ask(room) }

// Run delivers a Reset per room, then the rows committed since, until ctx is done (it
// then returns nil) or sink fails (it returns an error wrapping ystore.ErrSink). Connection failures are
// retried with exponential backoff and jitter; the cursor carries over, so nothing is
// skipped and nothing delivered twice.
func (t *Tailer) Run(ctx context.Context, sink func(context.Context, []ystore.Event) error) error {
	st := &tailState{rooms: map[string]bool{}}
	for attempt := 0; ; attempt++ {
		err := t.session(ctx, st, sink)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ystore.ErrSink) {
			return err
		}
		t.status.Fail(statusError(err))
		t.m.retries.Inc()
		if st.progressed {
			attempt, st.progressed = 0, false
		}
		if t.cfg.pause(ctx, attempt, "postgres y-store unreachable, retrying", "err", err) != nil {
			return nil
		}
	}
}

// tailState is what Run keeps across sessions.
type tailState struct {
	cursor     *Snapshot       // nil until the first load
	rooms      map[string]bool // rooms delivered and not removed
	progressed bool            // a read succeeded in the current session
}

// session connects, listens, catches up and follows until an error.
func (t *Tailer) session(ctx context.Context, st *tailState, sink func(context.Context, []ystore.Event) error) error {
	conn, err := connect(ctx, t.cfg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if !t.cfg.DisableListen {
		// LISTEN before reading, so that no commit after the read goes unnoticed.
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{t.n.channel}.Sanitize()); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	for {
		if err := t.catchUp(ctx, conn, st, sink); err != nil {
			return err
		}
		if err := t.wait(ctx, conn); err != nil {
			return err
		}
	}
}

// wait returns after a notification or the poll interval, or with a connection error.
func (t *Tailer) wait(ctx context.Context, conn *pgx.Conn) error {
	if t.cfg.DisableListen {
		t.m.wakeups.WithLabelValues(wakePoll).Inc()
		timer := time.NewTimer(t.cfg.PollInterval)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		case <-t.reloads.Wake():
		}
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, t.cfg.PollInterval)
	waited := make(chan struct{})
	go func() { // a room asked for again ends the wait, as the poll interval does
		select {
		case <-t.reloads.Wake():
			cancel()
		case <-waited:
		}
	}()
	_, err := conn.WaitForNotification(wctx)
	close(waited)
	cancel()
	if err != nil && (ctx.Err() != nil || wctx.Err() == nil) {
		return fmt.Errorf("wait for notification: %w", err)
	}
	by := wakeNotify
	if err != nil {
		by = wakePoll
	}
	t.m.wakeups.WithLabelValues(by).Inc()
	// One read serves every notification already received.
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	for {
		if _, err := conn.WaitForNotification(done); err != nil {
			return nil
		}
	}
}

// catchUp reads what the cursor has not seen in one read-only transaction, then
// delivers it. At first (and after transaction ids went backwards) that is every room,
// loaded as the transaction runs: a Reset each, whose rows the sink reads through
// Event.Stream (a Follower's gathered and tagged with their owners: it hands them on
// after the call), and Removed for the rooms delivered before that are gone.
func (t *Tailer) catchUp(ctx context.Context, conn *pgx.Conn, st *tailState, sink func(context.Context, []ystore.Event) error) error {
	var (
		snap   Snapshot
		events []ystore.Event
		loaded bool // events were delivered in the transaction
	)
	start := time.Now()
	asked := t.reloads.Take()
	err := readTx(ctx, conn, func(ctx context.Context, tx pgx.Tx) error {
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		defer cancel()
		var text string
		if err := tx.QueryRow(qctx, `SELECT pg_current_snapshot()::text`).Scan(&text); err != nil {
			return fmt.Errorf("read snapshot: %w", err)
		}
		var err error
		if snap, err = ParseSnapshot(text); err != nil {
			return fmt.Errorf("read snapshot: %w", err)
		}
		cursor := st.cursor
		if cursor != nil && !cursor.Precedes(snap) {
			t.cfg.Logger.Warn("postgres transaction ids went backwards, reloading every room",
				"cursor", cursor.String(), "snapshot", snap.String())
			t.m.rebuilds.Add(float64(len(st.rooms)))
			cursor = nil
		}
		if t.follow != nil && st.cursor == nil {
			return nil // a Follower starts here: the owners load what came before
		}
		if cursor == nil {
			loaded = true
			return t.loadInto(ctx, tx, st, sink, func(loads []ystore.Event) { events = loads })
		}
		rows, err := t.readRows(qctx, tx, *cursor)
		if err != nil {
			return err
		}
		events, err = t.updateEvents(qctx, tx, rows)
		if err == nil {
			events, err = t.reloadEvents(qctx, tx, events, asked)
		}
		if err == nil && t.follow != nil {
			err = t.tagOwners(qctx, tx, events)
		}
		return err
	})
	if err != nil {
		for room := range asked {
			t.reloads.Ask(room) // asked again for the next read
		}
		return err
	}
	t.m.read.Observe(time.Since(start).Seconds())
	if !loaded {
		t.status.Pending(events)
		if len(events) > 0 {
			if err := ystore.Deliver(ctx, sink, events); err != nil {
				return err
			}
		}
	}
	st.cursor, st.progressed = &snap, true
	if t.follow == nil { // a Follower keeps no state per room (bound.go)
		applyRooms(st.rooms, events)
	}
	t.status.Read(events, len(st.rooms))
	if t.follow != nil {
		t.follow.read()
	}
	return nil
}

// loadInto delivers every room of tx's snapshot to sink (catchUp), with Removed for the
// rooms of st no longer there, and hands the events delivered to done. A streamed
// room's rows are counted as they are taken.
func (t *Tailer) loadInto(ctx context.Context, tx pgx.Tx, st *tailState, sink func(context.Context, []ystore.Event) error, done func([]ystore.Event)) error {
	taken := t.status.Streamed
	if t.follow != nil {
		taken = nil // gathered: counted as delivered rows
	}
	return t.streamLoad(ctx, tx, taken, func(events []ystore.Event) error {
		events = append(events, removedEvents(st.rooms, events)...)
		if t.follow != nil {
			var err error
			if events, err = gathered(ctx, events); err != nil {
				return err
			}
			qctx, cancel := context.WithTimeout(ctx, queryTimeout)
			defer cancel()
			if err := t.tagOwners(qctx, tx, events); err != nil {
				return err
			}
		}
		done(events)
		if len(events) == 0 {
			return nil
		}
		return ystore.Deliver(ctx, sink, events)
	})
}

// tagOwners sets each event's Owner from the rooms table, read in the same transaction
// as the rows (a room's owner is recorded with its first rows or with a reset).
func (t *Tailer) tagOwners(ctx context.Context, tx pgx.Tx, events []ystore.Event) error {
	if len(events) == 0 {
		return nil
	}
	rooms := make([]string, 0, len(events))
	for _, e := range events {
		rooms = append(rooms, e.Room)
	}
	rs, err := tx.Query(ctx, `SELECT path, owner FROM `+t.n.rooms+` WHERE path = ANY($1)`, rooms)
	if err != nil {
		return fmt.Errorf("read owners: %w", err)
	}
	owners := map[string]string{}
	var room, owner string
	if _, err := pgx.ForEachRow(rs, []any{&room, &owner}, func() error { owners[room] = owner; return nil }); err != nil {
		return fmt.Errorf("read owners: %w", err)
	}
	for i := range events {
		events[i].Owner = owners[events[i].Room]
	}
	return nil
}

// dbRow is one row of the updates table.
type dbRow struct {
	ystore.Row
	reset, null bool
}

// readTx runs fn in a read-only REPEATABLE READ transaction, so that all its queries see
// one snapshot, and ends the transaction before returning: none is held across a wait.
// Its begin and end are each bounded by queryTimeout; fn bounds its own round trips (a
// load's transaction lasts as long as its sink takes, a round trip per chunk).
func readTx(ctx context.Context, conn *pgx.Conn, fn func(context.Context, pgx.Tx) error) error {
	bctx, cancel := context.WithTimeout(ctx, queryTimeout)
	tx, err := conn.BeginTx(bctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	cancel()
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		return fmt.Errorf("end read: %w", err)
	}
	return nil
}

// rowColumns are the columns collectRows scans.
const rowColumns = `id, path, yupdate, yupdate IS NULL, timestamp, reset`

// readRows returns, in id order, the rows not visible in cursor: exactly those the
// reader has not delivered. With an Owner, only the rows of the rooms it owns in the
// transaction's snapshot.
func (t *Tailer) readRows(ctx context.Context, tx pgx.Tx, cursor Snapshot) ([]dbRow, error) {
	where, args := t.owned([]string{`xid >= pg_snapshot_xmin($1::pg_snapshot) AND NOT pg_visible_in_snapshot(xid, $1::pg_snapshot)`},
		[]any{cursor.String()})
	q := `SELECT ` + rowColumns + ` FROM ` + t.n.table + ` WHERE ` + strings.Join(where, ` AND `)
	rs, err := tx.Query(ctx, q+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read rows: %w", err)
	}
	out, err := collectRows(rs)
	if err != nil {
		return nil, fmt.Errorf("read rows: %w", err)
	}
	return out, nil
}

// owned returns the conditions where and their arguments args with, for an Owner, the
// one keeping only the rows of the rooms it owns.
func (t *Tailer) owned(where []string, args []any) ([]string, []any) {
	if t.cfg.Owner == "" {
		return where, args
	}
	args = append(args, t.cfg.Owner)
	return append(where, fmt.Sprintf(`path IN (SELECT path FROM %s WHERE owner = $%d)`, t.n.rooms, len(args))), args
}

// readRoom returns a room's rows in id order.
func readRoom(ctx context.Context, tx pgx.Tx, n names, room string) ([]dbRow, error) {
	rs, err := tx.Query(ctx, `SELECT `+rowColumns+` FROM `+n.table+` WHERE path = $1 ORDER BY id`, room)
	if err != nil {
		return nil, fmt.Errorf("read room %q: %w", room, err)
	}
	out, err := collectRows(rs)
	if err != nil {
		return nil, fmt.Errorf("read room %q: %w", room, err)
	}
	return out, nil
}

// collectRows scans rowColumns, sharing one string per room.
func collectRows(rs pgx.Rows) ([]dbRow, error) {
	var (
		out   []dbRow
		d     dbRow
		path  []byte
		rooms = map[string]string{}
	)
	_, err := pgx.ForEachRow(rs, []any{&d.ID, &path, &d.Update, &d.null, &d.Timestamp, &d.reset}, func() error {
		room, ok := rooms[string(path)]
		if !ok {
			room = string(path)
			rooms[room] = room
		}
		d.Room = room
		out = append(out, d)
		d.Update = nil
		return nil
	})
	return out, err
}

// groupRooms splits rows by room, rooms in the order of their first row.
func groupRooms(rows []dbRow) (order []string, byRoom map[string][]dbRow) {
	byRoom = map[string][]dbRow{}
	for _, r := range rows {
		if _, ok := byRoom[r.Room]; !ok {
			order = append(order, r.Room)
		}
		byRoom[r.Room] = append(byRoom[r.Room], r)
	}
	return order, byRoom
}

// history returns the rows a reader builds a room from: those from the last reset row
// on, without NULL markers. present is false when the room ends in an empty reset (the
// room was removed).
func history(rows []dbRow) (out []ystore.Row, present bool) {
	start := 0
	for i, r := range rows {
		if r.reset {
			start = i
		}
	}
	for _, r := range rows[start:] {
		if !r.null {
			out = append(out, r.Row)
		}
	}
	return out, len(out) > 0 || !rows[start].reset
}

// removedEvents reports the known rooms that a reload did not find.
func removedEvents(known map[string]bool, loaded []ystore.Event) []ystore.Event {
	found := map[string]bool{}
	for _, e := range loaded {
		found[e.Room] = true
	}
	var gone []string
	for room := range known {
		if !found[room] {
			gone = append(gone, room)
		}
	}
	sort.Strings(gone)
	events := make([]ystore.Event, 0, len(gone))
	for _, room := range gone {
		events = append(events, ystore.Event{Kind: ystore.EventRemoved, Room: room})
	}
	return events
}

// updateEvents turns newly visible rows into Updates, one per run of consecutive rows of
// a room, so that events keep commit order. A room with a reset row among them gets one
// Reset (or Removed) instead, rebuilt from the room's current rows, where its first run was.
func (t *Tailer) updateEvents(ctx context.Context, tx pgx.Tx, rows []dbRow) ([]ystore.Event, error) {
	_, byRoom := groupRooms(rows)
	rebuilt := map[string]bool{}
	var events []ystore.Event
	for i := 0; i < len(rows); {
		room, j := rows[i].Room, i+1
		for j < len(rows) && rows[j].Room == room {
			j++
		}
		run := rows[i:j]
		i = j
		if !hasReset(byRoom[room]) {
			if h, _ := history(run); len(h) > 0 {
				events = append(events, ystore.Event{Kind: ystore.EventUpdates, Room: room, Rows: h})
			}
			continue
		}
		if rebuilt[room] {
			continue
		}
		rebuilt[room] = true
		all, err := readRoom(ctx, tx, t.n, room)
		if err != nil {
			return nil, err
		}
		if h, ok := history(all); len(all) > 0 && ok {
			t.cfg.Logger.Info("postgres y-store room history replaced, rebuilding", logkey.Room, room, "rows", len(h))
			t.m.rebuilds.Inc()
			events = append(events, ystore.Event{Kind: ystore.EventReset, Room: room, Rows: h})
		} else {
			t.cfg.Logger.Info("postgres y-store room removed", logkey.Room, room)
			t.m.rebuilds.Inc()
			events = append(events, ystore.Event{Kind: ystore.EventRemoved, Room: room})
		}
	}
	return events, nil
}

// reloadEvents delivers each room asked for again as one Reset, read whole in tx, in
// place of its events among events (appended after the others); a room the store does
// not hold keeps its events.
func (t *Tailer) reloadEvents(ctx context.Context, tx pgx.Tx, events []ystore.Event, asked map[string]bool) ([]ystore.Event, error) {
	for _, room := range slices.Sorted(maps.Keys(asked)) {
		all, err := readRoom(ctx, tx, t.n, room)
		if err != nil {
			return nil, err
		}
		if len(all) == 0 {
			continue
		}
		h, ok := history(all)
		if !ok {
			continue
		}
		events = slices.DeleteFunc(events, func(e ystore.Event) bool { return e.Room == room })
		events = append(events, ystore.Event{Kind: ystore.EventReset, Room: room, Rows: h})
	}
	return events, nil
}

// hasReset reports whether any row is a reset row.
func hasReset(rows []dbRow) bool {
	for _, r := range rows {
		if r.reset {
			return true
		}
	}
	return false
}

// applyRooms tracks which rooms exist after events.
func applyRooms(rooms map[string]bool, events []ystore.Event) {
	for _, e := range events {
		if e.Kind == ystore.EventRemoved {
			delete(rooms, e.Room)
		} else {
			rooms[e.Room] = true
		}
	}
}

// statusError is err as the tailer's Status tells it: /readyz shows it to anyone who
// can reach the listener, without authentication, so a failed connection is told
// without the user and database names pgx puts into its message, and a server that
// refused it (authentication, an unknown role or database: messages naming them) by its
// SQLSTATE only. The log keeps the whole error.
func statusError(err error) error {
	ce, ok := errors.AsType[*pgconn.ConnectError](err)
	if !ok {
		return err
	}
	if pe, ok := errors.AsType[*pgconn.PgError](ce); ok {
		return fmt.Errorf("connect: the server refused the connection: %s (SQLSTATE %s; the log has the details)", pe.Severity, pe.Code)
	}
	return fmt.Errorf("connect: %w", ce.Unwrap())
}

// connect opens a connection to dsn within connectTimeout.
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgx.Connect(cctx, dsn)
	if err != nil {
		// pgx connect errors name host, user and database, never the password.
		return nil, fmt.Errorf("connect: %w", err)
	}
	return conn, nil
}
