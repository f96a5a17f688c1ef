package fileid

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/confine"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/internal/sqlitevfs"
)

// ErrConfig reports an invalid configuration.
var ErrConfig = errors.New("invalid fileid config")

// DBConfig configures a DB resolver.
type DBConfig struct {
	// Path is file_id_manager.db; DefaultDBPath() if empty.
	Path string
	// RootDir is the Jupyter server's root directory, which the stored paths start with.
	RootDir string
	// Confine, when set (hub mode), is the user's directory: Path is resolved beneath
	// it and must belong to its owner, and SQLite opens only the file located there
	// (ystore/internal/sqlitevfs); a database refused is an error wrapping
	// confine.ErrRefused. Nil: Path is opened as given.
	Confine *confine.Dir
	// Logger hears a fault (Fault) when it appears or changes, once, and when it clears;
	// nil: slog.Default().
	Logger *slog.Logger
	// Registerer takes fileid_lookup_faults_total{fault}; nil: not counted.
	Registerer prometheus.Registerer
}

// DB resolves ids from jupyter_server_fileid's database, read-only. A lookup is one short
// query, so renames recorded by the server are followed at once, unless neither the
// database nor its WAL has changed since the id was last looked up: then the answer is
// the last one. The connection closes when it has been idle for dbIdle, so a quiet
// database costs no SQLite memory. A database that cannot be read, or whose files lie
// outside the root, is a Fault: logged once, counted at every lookup.
type DB struct {
	path    string
	root    string
	confine *confine.Dir
	log     *slog.Logger

	faults   *prometheus.CounterVec // fault: unreadable, outside_root
	faultsMu sync.Mutex
	fault    error // the current fault, nil for none

	mu       sync.Mutex
	db       *sql.DB
	confined *sqlitevfs.Confined // the database db opens, when confined
	idle     time.Duration       // how long an unused connection stays open: dbIdle
	stamp    filesStamp          // the files as they were when cache was filled
	cache    map[string]answer   // file id → the answer given while the files had stamp
}

// answer is one lookup's result: the API path, or not found.
type answer struct {
	path  string
	found bool
}

// dbIdle is how long an unused connection to the database stays open.
const dbIdle = 5 * time.Second

// racyWindow is how recent a file modification may be for its stamp not to be trusted:
// a write in the same clock tick as the stat would leave the stamp unchanged (the
// "racy git" problem), so answers are cached only for files older than this.
const racyWindow = 2 * time.Second

// fileStamp identifies one version of a file: a write changes its size or modification
// time, a replacement its identity (device and inode where the platform has them). Not
// its change time: SQLite, run as root, changes the WAL's owner on every open.
type fileStamp struct {
	size, mtime int64
	id          fileIdentity
	exists      bool
}

// filesStamp is the stamp of the database and of its WAL.
type filesStamp [2]fileStamp

// stampFiles stats the database and its WAL; settled reports that neither changed within
// racyWindow of now.
func (d *DB) stampFiles() (st filesStamp, settled bool) {
	settled = true
	for i, p := range []string{d.path, d.path + "-wal"} {
		fi, err := d.stat(p)
		if err != nil {
			continue
		}
		st[i] = fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano(), id: identity(fi), exists: true}
		if time.Since(fi.ModTime()) < racyWindow {
			settled = false
		}
	}
	return st, settled
}

var _ Resolver = (*DB)(nil)

// DefaultDBPath returns where jupyter_server_fileid keeps its database by default:
// jupyter_data_dir()/file_id_manager.db, that is $JUPYTER_DATA_DIR, else the platform's
// data directory ($XDG_DATA_HOME/jupyter or ~/.local/share/jupyter on Linux).
func DefaultDBPath() string {
	return filepath.Join(jupyterDataDir(), DBName)
}

// DBName is the name of jupyter_server_fileid's database file.
const DBName = "file_id_manager.db"

func jupyterDataDir() string {
	if d := os.Getenv("JUPYTER_DATA_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	switch runtime.GOOS {
	case "darwin":
		return filepath.Join(home, "Library", "Jupyter")
	case "windows":
		return filepath.Join(os.Getenv("APPDATA"), "jupyter")
	}
	if xdg := os.Getenv("XDG_DATA_HOME"); xdg != "" {
		return filepath.Join(xdg, "jupyter")
	}
	return filepath.Join(home, ".local", "share", "jupyter")
}

// NewDB returns a DB resolver; it does no I/O.
func NewDB(cfg DBConfig) (*DB, error) {
	if cfg.RootDir == "" {
		return nil, fmt.Errorf("root dir is empty: %w", ErrConfig)
	}
	if cfg.Path == "" {
		cfg.Path = DefaultDBPath()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	r := promreg.On(cfg.Registerer)
	faults := promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "fileid", Name: "lookup_faults_total",
		Help: "File id lookups that failed for the configuration, by fault: unreadable (fileid.db_path is no file id database), outside_root (the file lies outside fileid.root_dir)."},
		[]string{"fault"}))
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register fileid metrics: %w", err)
	}
	for _, f := range []string{faultUnreadable, faultOutsideRoot} {
		faults.WithLabelValues(f)
	}
	return &DB{path: cfg.Path, root: filepath.Clean(cfg.RootDir), confine: cfg.Confine, log: log, faults: faults, idle: dbIdle}, nil
}

// stat returns the file at path, beneath the user's directory when confined.
func (d *DB) stat(path string) (os.FileInfo, error) {
	if d.confine == nil {
		return os.Stat(path)
	}
	return d.confine.Stat(path)
}

// The faults of lookup_faults_total.
const (
	faultUnreadable  = "unreadable"
	faultOutsideRoot = "outside_root"
)

// Fault is why lookups cannot succeed, nil when they can: the database is unreadable
// (ErrUnreadable; cleared by a lookup that reads it), or the last file found lies outside
// the root (ErrOutsideRoot; cleared by a file found inside it).
func (d *DB) Fault() error {
	d.faultsMu.Lock()
	defer d.faultsMu.Unlock()
	return d.fault
}

// setFault records the outcome of a lookup that reached the database: fault (nil: it
// read the database; found: it found a file inside the root). A new or changed fault is
// logged once, with attrs, a cleared one too.
func (d *DB) setFault(fault error, found bool, attrs ...any) {
	d.faultsMu.Lock()
	defer d.faultsMu.Unlock()
	old := d.fault
	switch {
	case fault != nil:
		d.fault = fault
	case found || errors.Is(old, ErrUnreadable):
		d.fault = nil
	}
	switch {
	case d.fault != nil && (old == nil || old.Error() != d.fault.Error()):
		d.log.Warn("file id lookups fail; notebooks get their paths from their documents, if at all (counted in fileid_lookup_faults_total)",
			append([]any{"err", d.fault}, attrs...)...)
	case d.fault == nil && old != nil:
		d.log.Info("file id lookups work again", "db", d.path)
	}
}

// Path looks fileID up in the Files table, or in the answers given since the database
// last changed.
func (d *DB) Path(ctx context.Context, fileID string) (string, error) {
	st, settled := d.stampFiles()
	d.mu.Lock()
	if st != d.stamp {
		d.stamp, d.cache = st, nil
	}
	a, hit := d.cache[fileID]
	d.mu.Unlock()
	if !hit || !settled {
		var err error
		if a, err = d.query(ctx, fileID); err != nil {
			return "", err
		}
		if settled {
			d.mu.Lock()
			if d.stamp == st {
				if d.cache == nil {
					d.cache = map[string]answer{}
				}
				d.cache[fileID] = a
			}
			d.mu.Unlock()
		}
	}
	if !a.found {
		return "", fmt.Errorf("file id %s in %s: %w", fileID, d.path, ErrNotFound)
	}
	return a.path, nil
}

// query asks the database for fileID's path.
func (d *DB) query(ctx context.Context, fileID string) (answer, error) {
	db, err := d.conn()
	if err != nil {
		return answer{}, fmt.Errorf("file id %s: %w", fileID, err)
	}
	var stored string
	err = db.QueryRowContext(ctx, "SELECT path FROM Files WHERE id = ?", fileID).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		d.setFault(nil, false)
		return answer{}, nil
	case err != nil:
		if d.confine != nil {
			d.drop(db) // the file located may be gone or replaced: locate it afresh next time
		}
		if ctx.Err() == nil {
			fault := fmt.Errorf("%s: %w: %w", d.path, ErrUnreadable, err)
			d.faults.WithLabelValues(faultUnreadable).Inc()
			d.setFault(fault, false)
			return answer{}, fmt.Errorf("file id %s: %w", fileID, fault)
		}
		return answer{}, fmt.Errorf("file id %s in %s: %w", fileID, d.path, err)
	}
	p, ok := apiPath(stored, d.root)
	if !ok {
		d.faults.WithLabelValues(faultOutsideRoot).Inc()
		d.setFault(fmt.Errorf("%s: %w %s: is fileid.root_dir the Jupyter server's root?", d.path, ErrOutsideRoot, d.root), false, "stored", stored)
		return answer{}, fmt.Errorf("file id %s: %s is outside root %s: %w: %w", fileID, stored, d.root, ErrOutsideRoot, ErrNotFound)
	}
	d.setFault(nil, true)
	return answer{path: p, found: true}, nil
}

// conn opens the database on first use (it may not exist until Jupyter starts).
func (d *DB) conn() (*sql.DB, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db != nil {
		return d.db, nil
	}
	if _, err := d.stat(d.path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no database %s: %w", d.path, ErrNotFound)
	}
	name, confined, err := d.locate()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d.path, err)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(1000)")
	q.Add("_pragma", "query_only(1)")
	q.Add("_pragma", "cache_size(-64)") // one lookup now and then: 64 KiB of page cache
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: name, RawQuery: q.Encode()}).String())
	if err != nil {
		if confined != nil {
			_ = confined.Close()
		}
		return nil, fmt.Errorf("open %s: %w", d.path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(d.idle)
	d.db, d.confined = db, confined
	return db, nil
}

// locate returns the name SQLite opens the database by: its absolute path, or when
// confined the name of the file located beneath the user's directory, owned by them.
func (d *DB) locate() (string, *sqlitevfs.Confined, error) {
	if d.confine == nil {
		abs, err := filepath.Abs(d.path)
		return abs, nil, err
	}
	l, err := d.confine.Locate(d.path)
	if err != nil {
		return "", nil, err
	}
	c, err := sqlitevfs.Confine(l)
	if err != nil {
		_ = l.Close()
		return "", nil, err
	}
	return c.Name(), c, nil
}

// Close closes the database connection.
func (d *DB) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closeLocked()
}

// drop closes db if it is still the connection in use; the next lookup opens another.
func (d *DB) drop(db *sql.DB) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db == db {
		_ = d.closeLocked()
	}
}

// closeLocked closes the connection; d.mu is held.
func (d *DB) closeLocked() error {
	if d.db == nil {
		return nil
	}
	err := d.db.Close()
	if d.confined != nil {
		_ = d.confined.Close()
	}
	d.db, d.confined = nil, nil
	return err
}
