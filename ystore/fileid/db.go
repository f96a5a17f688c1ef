package fileid

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// ErrConfig reports an invalid configuration.
var ErrConfig = errors.New("invalid fileid config")

// DBConfig configures a DB resolver.
type DBConfig struct {
	// Path is file_id_manager.db; DefaultDBPath() if empty.
	Path string
	// RootDir is the Jupyter server's root directory, which the stored paths start with.
	RootDir string
}

// DB resolves ids from jupyter_server_fileid's database, read-only. Each lookup is one
// short query, so renames recorded by the server are followed at once.
type DB struct {
	path string
	root string

	mu sync.Mutex
	db *sql.DB
}

var _ Resolver = (*DB)(nil)

// DefaultDBPath returns where jupyter_server_fileid keeps its database by default:
// jupyter_data_dir()/file_id_manager.db, that is $JUPYTER_DATA_DIR, else the platform's
// data directory ($XDG_DATA_HOME/jupyter or ~/.local/share/jupyter on Linux).
func DefaultDBPath() string {
	return filepath.Join(jupyterDataDir(), "file_id_manager.db")
}

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
	return &DB{path: cfg.Path, root: filepath.Clean(cfg.RootDir)}, nil
}

// Path looks fileID up in the Files table.
func (d *DB) Path(ctx context.Context, fileID string) (string, error) {
	db, err := d.conn()
	if err != nil {
		return "", fmt.Errorf("file id %s: %w", fileID, err)
	}
	var stored string
	err = db.QueryRowContext(ctx, "SELECT path FROM Files WHERE id = ?", fileID).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("file id %s in %s: %w", fileID, d.path, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("file id %s in %s: %w", fileID, d.path, err)
	}
	p, ok := apiPath(stored, d.root)
	if !ok {
		return "", fmt.Errorf("file id %s: %s is outside root %s: %w", fileID, stored, d.root, ErrNotFound)
	}
	return p, nil
}

// conn opens the database on first use (it may not exist until Jupyter starts).
func (d *DB) conn() (*sql.DB, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db != nil {
		return d.db, nil
	}
	if _, err := os.Stat(d.path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no database %s: %w", d.path, ErrNotFound)
	}
	abs, err := filepath.Abs(d.path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d.path, err)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(1000)")
	q.Add("_pragma", "query_only(1)")
	q.Add("_pragma", "cache_size(-64)") // one lookup now and then: 64 KiB of page cache
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d.path, err)
	}
	db.SetMaxOpenConns(1)
	d.db = db
	return db, nil
}

// Close closes the database connection.
func (d *DB) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db == nil {
		return nil
	}
	err := d.db.Close()
	d.db = nil
	return err
}
