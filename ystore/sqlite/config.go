package sqlite

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/confine"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultPollInterval = 500 * time.Millisecond
	DefaultChunkRows    = 1000
	DefaultMaxBusyWait  = 30 * time.Second
)

// DefaultPath is the store file jupyter-collaboration writes by default (pycrdt-store's
// SQLiteYStore), in the Jupyter server's working directory. New does not apply it: a
// Config names its file.
const DefaultPath = ".jupyter_ystore.db"

// ErrConfig reports an invalid Config.
var ErrConfig = errors.New("invalid sqlite tailer config")

// Config configures a Tailer.
type Config struct {
	// Path is the store file (jupyter-collaboration's default: DefaultPath in the Jupyter
	// server's working directory). It need not exist yet.
	Path string
	// Confine, when set (hub mode), is the user's directory: Path is resolved beneath
	// its root, following symbolic links only inside it, the file must belong to its
	// owner, and SQLite opens that file and its journal only where it was found
	// (ystore/internal/sqlitevfs). A store refused is unreachable, with an error
	// wrapping confine.ErrRefused. Nil: Path is opened as given, as the Jupyter server
	// running as the same user opens it.
	Confine *confine.Dir
	// PollInterval is how often the store is checked for changes without a file event
	// (PRAGMA data_version and the file's identity); DefaultPollInterval if zero.
	PollInterval time.Duration
	// ChunkRows bounds the rows read in one read transaction; DefaultChunkRows if zero.
	ChunkRows int
	// DisableFSNotify turns file events off, leaving polling alone (for file systems
	// where events do not arrive).
	DisableFSNotify bool
	// Watcher, when set, delivers the file events, shared with other tailers (hub mode:
	// one inotify instance for every user's store); nil: the tailer watches on its own.
	Watcher *Watcher
	// MaxBusyWait bounds how long a read keeps retrying while the writer holds its lock;
	// DefaultMaxBusyWait if zero.
	MaxBusyWait time.Duration
	// Decompress undoes the compression configured in jupyter-collaboration's
	// SQLiteYStore (compress_function / decompress_function, off by default), e.g. zlib;
	// nil delivers updates and checkpoints as stored.
	Decompress func([]byte) ([]byte, error)
	// StreamLoads delivers a read of the whole store (the load at start, a re-read) in one
	// call of Reset events whose rows the sink reads through ystore.Event.Stream, a chunk
	// at a time, rather than held: ship copies, and serve's rooms decode, a store of any
	// size in bounded memory.
	// Without it, the rooms are read whole and delivered in calls of about 50,000 rows.
	StreamLoads bool
	// MaxRooms bounds the rooms the tailer reads and follows (bound.go): hub mode gives a
	// user's store hub.max_rooms_per_user, the bound of the rooms.Set it feeds. 0: every
	// room, whatever their number.
	MaxRooms int
	// Logger receives the tailer's logs; slog.Default() if nil.
	Logger *slog.Logger
	// Registerer receives the tailer's metrics (the sqlite_* series and the status series
	// every tailer shares, ystore/internal/tailstatus); tailers on one Registerer feed
	// the same series. None are registered if nil.
	Registerer prometheus.Registerer
}

// withDefaults validates c and fills in its zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.Path == "" {
		return c, fmt.Errorf("path is empty: %w", ErrConfig)
	}
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.ChunkRows = cmp.Or(c.ChunkRows, DefaultChunkRows)
	c.MaxBusyWait = cmp.Or(c.MaxBusyWait, DefaultMaxBusyWait)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c, nil
}

// Validate reports what is wrong with c's bounds, each a *keyerr.KeyError naming its
// field in snake case (sidecar/config renames them to the daemon's keys); a zero field is
// refused, so call it on a Config as the daemon maps it (New fills the defaults first).
func (c Config) Validate() error {
	var errs []error
	if c.PollInterval <= 0 {
		errs = append(errs, keyerr.Invalid("poll_interval", "must be > 0, got %s", c.PollInterval))
	}
	if c.ChunkRows <= 0 {
		errs = append(errs, keyerr.Invalid("chunk_rows", "must be > 0, got %d", c.ChunkRows))
	}
	if c.MaxBusyWait <= 0 {
		errs = append(errs, keyerr.Invalid("max_busy_wait", "must be > 0, got %s", c.MaxBusyWait))
	}
	if c.MaxRooms < 0 {
		errs = append(errs, keyerr.Invalid("max_rooms", "must be >= 0 (0: no bound), got %d", c.MaxRooms))
	}
	return errors.Join(errs...)
}
