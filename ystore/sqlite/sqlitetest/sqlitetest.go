// Package sqlitetest drives, for the tests of any package, testdata/pycrdt_writer/writer.py:
// a Python stdlib writer that stores Yjs updates exactly as pycrdt-store's SQLiteYStore
// does (one transaction per row, rollback journal, squash, checkpoints, renames).
package sqlitetest

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	_ "modernc.org/sqlite"
)

// Writer is one running writer process on one store file.
type Writer struct {
	t   testing.TB
	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Scanner
}

// Reply is one answer of the writer (see testdata/pycrdt_writer/README.md).
type Reply struct {
	OK          bool        `json:"ok"`
	Error       string      `json:"error"`
	RowID       int64       `json:"rowid"`
	TS          float64     `json:"ts"`
	Committed   float64     `json:"committed"`
	MergedRowID int64       `json:"merged_rowid"`
	Deleted     int64       `json:"deleted"`
	Rows        [][]float64 `json:"rows"`
	Errors      []string    `json:"errors"`
}

// Start runs the writer on the store file at path (created if missing); it stops, and
// must have exited cleanly, when the test ends.
func Start(t testing.TB, path string) *Writer {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(self), "..", "..", "..", "testdata", "pycrdt_writer", "writer.py")
	c := testenv.StartChild(t, exec.Command("python3", script, path), testenv.CleanExit)
	w := &Writer{t: t, in: c.In, out: bufio.NewScanner(c.Out)}
	w.out.Buffer(make([]byte, 1<<20), 64<<20)
	return w
}

// Do sends one command and fails the test unless it succeeded. Writes lost inside a
// flood are reported in Reply.Errors, for the caller to judge.
func (w *Writer) Do(cmd map[string]any) Reply {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	b, err := json.Marshal(cmd)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.in.Write(append(b, '\n')); err != nil {
		w.t.Fatalf("send %s: %v", b, err)
	}
	if !w.out.Scan() {
		w.t.Fatalf("no reply to %s: %v", b, w.out.Err())
	}
	var r Reply
	if err := json.Unmarshal(w.out.Bytes(), &r); err != nil {
		w.t.Fatalf("reply %q: %v", w.out.Bytes(), err)
	}
	if !r.OK {
		w.t.Fatalf("%s failed: %s", cmd["op"], r.Error)
	}
	return r
}

// WriteInPlace overwrites the file's contents keeping its inode, the way cp does: a
// restore or damage of a live store outside SQLite.
func WriteInPlace(t testing.TB, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Rows returns the updates of room in the pycrdt-store file at path (opened read-only),
// in rowid order: a stored fixture's room, as a tailer would read it.
func Rows(t testing.TB, path, room string) [][]byte {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.Query(`SELECT yupdate FROM yupdates WHERE path = ? ORDER BY rowid`, room)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var rows [][]byte
	for rs.Next() {
		var u []byte
		if err := rs.Scan(&u); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, u)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}
