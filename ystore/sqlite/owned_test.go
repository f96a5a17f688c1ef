package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestRowsOwnTheirBytes: each row read holds its own update, not a slice the driver
// reuses for the next (ownedBytes keeps the driver's, uncopied), and a read of 16 MB of
// rows allocates them once: database/sql copied each blob the driver had already
// copied out of SQLite.
func TestRowsOwnTheirBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	updates := [][]byte{{2, 2}, nil, bytes.Repeat([]byte{3}, 1000), bytes.Repeat([]byte{1}, 16<<20)} // the last ends the chunk
	for _, stmt := range []string{
		"CREATE TABLE yupdates (path TEXT NOT NULL, yupdate BLOB, metadata BLOB, timestamp REAL NOT NULL)",
		"CREATE INDEX idx_yupdates_path_timestamp ON yupdates (path, timestamp)",
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	for i, u := range updates {
		if _, err := db.Exec("INSERT INTO yupdates VALUES ('r', ?, x'', ?)", u, float64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(context.Background(), storeFile{path: path}, time.Second, func(time.Duration, time.Duration) {}, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rows, _, _, _, err := st.rowsAfter(context.Background(), 0, -1, 10, false, fingerprint{})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(updates) {
		t.Fatalf("%d rows, want %d", len(rows), len(updates))
	}
	for i, r := range rows {
		if !bytes.Equal(r.Update, updates[i]) {
			t.Errorf("row %d: %d bytes, not the %d written", i, len(r.Update), len(updates[i]))
		}
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 20<<20 {
		t.Errorf("reading 16 MB of rows allocated %d MB", n>>20)
	}
}
