package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/internal/sqlitevfs"
)

// No SQLite connection of the process blocks opening a named pipe, whatever its mode:
// the open fails at once, where SQLite's own open(2) would wait for a writer for ever.
func TestSQLiteNeverBlocksOpeningAFIFO(t *testing.T) {
	if sqlitevfs.HookErr != nil {
		t.Fatalf("SQLite's open system call not replaced: %v", sqlitevfs.HookErr)
	}
	fifo := filepath.Join(t.TempDir(), "store.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dsn := range []string{dsn(fifo), "file:" + fifo, "file:" + fifo + "?mode=rwc"} {
		done := make(chan error, 1)
		go func() {
			db, err := sql.Open("sqlite", dsn)
			if err != nil {
				done <- err
				return
			}
			defer db.Close()
			done <- db.PingContext(context.Background())
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: opened a named pipe as a database", dsn)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: open of a named pipe still blocked after 10 s", dsn)
		}
	}
}
