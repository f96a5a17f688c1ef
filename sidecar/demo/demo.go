// Package demo writes a throwaway Y-store the way jupyter-collaboration does, so that
// `jupyter-mcp-sidecar serve --demo` has a live notebook to serve: a pycrdt-store SQLite
// file (one transaction per update, rollback journal), a jupyter_server_fileid database
// naming the room's file, and a recorded editing session replayed at its recorded pace,
// again and again into a fresh room, so that edits never stop.
package demo

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

// session is a recorded editing session of one notebook (see ParseSession).
//
//go:embed session.jsonl.gz
var session []byte

// File names inside Options.Dir.
const (
	NotebookPath = "demo.ipynb"       // the notebook, relative to the Jupyter root (Dir)
	StoreFile    = sqlite.DefaultPath // the pycrdt-store SQLite file
	FileIDFile   = fileid.DBName      // the jupyter_server_fileid database
)

// StoreSchema is pycrdt-store's SQLite schema, version 2: the statements that create a
// store.
var StoreSchema = []string{
	`CREATE TABLE yupdates (path TEXT NOT NULL, yupdate BLOB, metadata BLOB, timestamp REAL NOT NULL)`,
	`CREATE INDEX idx_yupdates_path_timestamp ON yupdates (path, timestamp)`,
	`CREATE TABLE ycheckpoints (path TEXT NOT NULL, checkpoint BLOB NOT NULL, timestamp REAL NOT NULL, PRIMARY KEY(path))`,
	`PRAGMA user_version = 2`,
}

// Options configure a Writer.
type Options struct {
	Dir     string       // directory for the store, the fileid database and demo.ipynb's root
	Session []byte       // gzip JSON-lines recording; nil means the embedded session
	Speed   float64      // pace multiplier; 0 or 1 is the recorded pace, 10 is ten times faster
	Logger  *slog.Logger // nil means slog.Default()
}

// Writer creates the demo store and keeps editing its notebook.
type Writer struct {
	opts  Options
	log   *slog.Logger
	steps []Step

	mu     sync.Mutex
	store  *sql.DB
	fileDB *sql.DB
	fileID string // the current room's file id
	rounds int    // completed replays
}

// New returns a Writer for o; it does no I/O.
func New(o Options) *Writer {
	if o.Session == nil {
		o.Session = session
	}
	o.Speed = cmp.Or(max(o.Speed, 0), 1)
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Writer{opts: o, log: log}
}

// StorePath is the SQLite store the Writer writes.
func (w *Writer) StorePath() string { return filepath.Join(w.opts.Dir, StoreFile) }

// FileIDDBPath is the jupyter_server_fileid database naming the notebook.
func (w *Writer) FileIDDBPath() string { return filepath.Join(w.opts.Dir, FileIDFile) }

// Room is the store key of the room being written now.
func (w *Writer) Room() string { return roomKey(w.FileID()) }

// FileID is the file id bound to demo.ipynb now.
func (w *Writer) FileID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fileID
}

// Rounds is the number of complete replays of the session so far.
func (w *Writer) Rounds() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rounds
}

func roomKey(fileID string) string { return ".notebook:" + fileID + ".y" }

// Create parses the session, creates the store and the fileid database (which must not
// exist yet) and binds a first file id to demo.ipynb.
func (w *Writer) Create(ctx context.Context) (err error) {
	if w.steps, err = ParseSession(bytes.NewReader(w.opts.Session)); err != nil {
		return err
	}
	for _, p := range []string{w.StorePath(), w.FileIDDBPath()} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("create demo store: %s already exists", p)
		}
	}
	if w.store, err = openDB(w.StorePath()); err != nil {
		return err
	}
	if w.fileDB, err = openDB(w.FileIDDBPath()); err != nil {
		return errors.Join(err, w.Close())
	}
	for _, q := range StoreSchema {
		if _, err := w.store.ExecContext(ctx, q); err != nil {
			return errors.Join(fmt.Errorf("create demo store: %w", err), w.Close())
		}
	}
	if _, err := w.fileDB.ExecContext(ctx, fileid.Schema); err != nil {
		return errors.Join(fmt.Errorf("create fileid db: %w", err), w.Close())
	}
	id := newFileID()
	if _, err := w.fileDB.ExecContext(ctx, `INSERT INTO Files (id, path) VALUES (?, ?)`, id, w.notebookAbs()); err != nil {
		return errors.Join(fmt.Errorf("bind file id: %w", err), w.Close())
	}
	w.mu.Lock()
	w.fileID = id
	w.mu.Unlock()
	return nil
}

func openDB(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// notebookAbs is the path the default fileid manager stores: root_dir + "/" + api_path.
func (w *Writer) notebookAbs() string { return w.opts.Dir + "/" + NotebookPath }

// newFileID returns a random UUID, as jupyter_server_fileid mints.
func newFileID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Run replays the session at its pace until ctx is done, then returns nil. After each
// complete replay it deletes the room, binds a new file id to demo.ipynb and replays
// again into the new room. Create must have succeeded.
func (w *Writer) Run(ctx context.Context) error {
	if w.store == nil {
		return errors.New("demo writer: Run before Create")
	}
	for {
		room := w.Room()
		w.log.Info("demo: replaying session", logkey.Room, room, "updates", len(w.steps))
		if err := w.replay(ctx, room, w.opts.Speed); err != nil || ctx.Err() != nil {
			return err
		}
		if err := w.rebind(ctx, room); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// WriteOnce writes the whole session into the room at once, unpaced, and returns: a
// store with a finished notebook (scripts/image-check.sh serves it read-only). Create
// must have succeeded.
func (w *Writer) WriteOnce(ctx context.Context) error {
	if w.store == nil {
		return errors.New("demo writer: WriteOnce before Create")
	}
	return w.replay(ctx, w.Room(), 0)
}

// replay writes the session's updates into room, each after its delay divided by speed
// (0: none), until done or ctx is done (then nil).
func (w *Writer) replay(ctx context.Context, room string, speed float64) error {
	for _, st := range w.steps {
		if speed > 0 && !sleep(ctx, time.Duration(float64(st.Delay)/speed)) {
			return nil
		}
		if _, err := w.store.ExecContext(ctx, `INSERT INTO yupdates VALUES (?, ?, ?, ?)`,
			room, st.Update, []byte{}, unixSeconds(time.Now())); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("demo: write room %s: %w", room, err)
		}
	}
	return nil
}

// rebind deletes old's rows and binds a fresh file id to demo.ipynb.
func (w *Writer) rebind(ctx context.Context, old string) error {
	id := newFileID()
	if _, err := w.fileDB.ExecContext(ctx, `UPDATE Files SET id = ? WHERE path = ?`, id, w.notebookAbs()); err != nil {
		return fmt.Errorf("demo: rebind file id: %w", err)
	}
	tx, err := w.store.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("demo: delete room %s: %w", old, err)
	}
	for _, q := range []string{`DELETE FROM yupdates WHERE path = ?`, `DELETE FROM ycheckpoints WHERE path = ?`} {
		if _, err := tx.ExecContext(ctx, q, old); err != nil {
			return errors.Join(fmt.Errorf("demo: delete room %s: %w", old, err), tx.Rollback())
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("demo: delete room %s: %w", old, err)
	}
	w.mu.Lock()
	w.fileID = id
	w.rounds++
	w.mu.Unlock()
	w.log.Info("demo: session replayed, restarting in a fresh room", logkey.Room, old, "new_room", roomKey(id))
	return nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// sleep waits d or until ctx is done; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Close closes the databases; the files stay in Dir.
func (w *Writer) Close() error {
	var errs []error
	for _, db := range []*sql.DB{w.store, w.fileDB} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}
