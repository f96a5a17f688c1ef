// Package postgres is the Postgres Y-store: its schema (Migrate), a Tailer that follows it
// with LISTEN/NOTIFY and a polling fallback, Compact, and ship mode (a Shipper appending
// the rows of another store, such as a local SQLite file, into it). No Postgres Y-store
// exists upstream; docs/POSTGRES.md documents this one.
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
)

// Defaults for the zero fields of Config.
const (
	DefaultSchema       = "jupyter_ystore"
	DefaultTable        = "yupdates"
	DefaultChannel      = "jupyter_ystore"
	DefaultPollInterval = 2 * time.Second
	DefaultBackoffMin   = 100 * time.Millisecond
	DefaultBackoffMax   = 10 * time.Second
	DefaultChunkRows    = 1000
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("invalid postgres y-store config")

// identRe accepts the identifiers used unquoted in generated SQL and channel names.
var identRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// Config configures the Postgres Y-store. The zero value of every field but DSN means its
// default.
type Config struct {
	// DSN is a pgx connection string (URL or key=value). It may hold a password and is
	// never logged.
	DSN string
	// Schema holds the store's tables; default "jupyter_ystore".
	Schema string
	// Table is the updates table; default "yupdates".
	Table string
	// Channel is the NOTIFY channel the insert trigger signals; default "jupyter_ystore".
	Channel string
	// PollInterval is how often the tailer polls when no notification arrives; default 2 s.
	PollInterval time.Duration
	// DisableListen makes the tailer poll only (for poolers that drop LISTEN).
	DisableListen bool
	// Owner, when set, is the user whose rooms this Config is about: the Tailer follows
	// only the rooms owned by Owner, and the Shipper records Owner as the owner of the
	// rooms it ships. Empty: the Tailer follows every room, the Shipper records no owner.
	Owner string
	// ChunkRows bounds the rows a load of the whole store (Load, LoadStream, Run's first
	// read) reads in one round trip, and so holds at once; default 1,000.
	ChunkRows int
	// MaxRooms bounds the rooms an Owner's Tailer on a Follower loads and follows
	// (bound.go), and the rooms any load reads: hub mode gives a user's rooms
	// hub.max_rooms_per_user, the bound of the rooms.Set they feed. 0: every room.
	MaxRooms int
	// BackoffMin and BackoffMax bound the reconnect delay, doubled per failure with
	// jitter; defaults 100 ms and 10 s.
	BackoffMin, BackoffMax time.Duration
	// Logger receives the logs; nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics (the postgres_* series and the status series every
	// tailer shares, ystore/internal/tailstatus); tailers and shippers on one Registerer
	// feed the same series. nil means none are registered.
	Registerer prometheus.Registerer
}

// Validate reports what is wrong with c's names and bounds, each a *keyerr.KeyError
// naming its field in snake case (sidecar/config renames them to the daemon's keys): a
// name that is no identifier the generated SQL can use unquoted, a bound not above 0, a
// backoff out of order. A zero field is refused, so call it on a Config as the daemon
// maps it (New fills the defaults first). The DSN is parsed when it is used.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct{ key, v string }{{"schema", c.Schema}, {"table", c.Table}, {"channel", c.Channel}} {
		if !identRe.MatchString(f.v) {
			errs = append(errs, keyerr.Invalid(f.key, "must be a SQL identifier ([a-z_][a-z0-9_]*, at most 48 characters), got %q", f.v))
		}
	}
	if c.PollInterval <= 0 {
		errs = append(errs, keyerr.Invalid("poll_interval", "must be > 0, got %s", c.PollInterval))
	}
	if c.ChunkRows <= 0 {
		errs = append(errs, keyerr.Invalid("chunk_rows", "must be > 0, got %d", c.ChunkRows))
	}
	if c.MaxRooms < 0 {
		errs = append(errs, keyerr.Invalid("max_rooms", "must be >= 0 (0: no bound), got %d", c.MaxRooms))
	}
	if c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin {
		errs = append(errs, keyerr.Invalid("backoff", "must be > 0 and ordered, got %s..%s", c.BackoffMin, c.BackoffMax))
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero fields and validates the result.
func (c Config) withDefaults() (Config, error) {
	c.Schema = cmp.Or(c.Schema, DefaultSchema)
	c.Table = cmp.Or(c.Table, DefaultTable)
	c.Channel = cmp.Or(c.Channel, DefaultChannel)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.BackoffMin = cmp.Or(c.BackoffMin, DefaultBackoffMin)
	c.BackoffMax = cmp.Or(c.BackoffMax, DefaultBackoffMax)
	c.ChunkRows = cmp.Or(c.ChunkRows, DefaultChunkRows)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if _, err := pgx.ParseConfig(c.DSN); err != nil {
		// pgx redacts the password in its parse errors.
		return c, fmt.Errorf("dsn: %w: %w", ErrConfig, err)
	}
	return c, nil
}

// names are the SQL identifiers derived from a Config, quoted where they are used.
type names struct {
	schema, table, cursors, rooms, ownerIndex, notifyFunc, trigger, pathIndex, xidIndex, channel string
}

// namesOf derives the identifiers of a validated Config.
func namesOf(c Config) names {
	q := func(parts ...string) string { return pgx.Identifier(parts).Sanitize() }
	return names{
		schema:     q(c.Schema),
		table:      q(c.Schema, c.Table),
		cursors:    q(c.Schema, c.Table+"_ship_cursors"),
		rooms:      q(c.Schema, c.Table+"_rooms"),
		ownerIndex: q(c.Table + "_rooms_owner"),
		notifyFunc: q(c.Schema, c.Table+"_notify"),
		trigger:    q(c.Table + "_notify"),
		pathIndex:  q(c.Table + "_path_id"),
		xidIndex:   q(c.Table + "_xid"),
		channel:    c.Channel,
	}
}

// pause logs msg with args and the reconnect attempt, then sleeps for its backoff delay;
// it returns ctx's error if ctx ends first.
func (c Config) pause(ctx context.Context, attempt int, msg string, args ...any) error {
	delay := backoff(c.BackoffMin, c.BackoffMax, attempt, rand.Float64())
	c.Logger.Warn(msg, append(args, "attempt", attempt+1, "delay", delay)...)
	return sleep(ctx, delay)
}

// sleep waits for d; it returns ctx's error if ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// backoff is the delay before reconnect attempt n (from 0): lo doubled per attempt up to
// hi, scaled by a jitter factor in [0.5, 1) from u in [0, 1).
func backoff(lo, hi time.Duration, attempt int, u float64) time.Duration {
	d := hi
	if attempt < 62 && lo<<attempt > 0 && lo<<attempt < hi {
		d = lo << attempt
	}
	return time.Duration(float64(d) * (0.5 + u/2))
}
