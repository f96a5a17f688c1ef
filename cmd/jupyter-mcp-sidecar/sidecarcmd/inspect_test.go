package sidecarcmd

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/demo"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

// inspect lists the rooms of a store written by the demo writer and prints its notebook
// by path and by file id.
func TestInspect(t *testing.T) {
	isolate(t)
	w, dir := demoStore(t)
	room, fileID := w.Room(), w.FileID()
	store := []string{"--store", w.StorePath(), "--fileid-db", w.FileIDDBPath(), "--root-dir", dir}

	out, _, err := run(t, append([]string{"inspect"}, store...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, room) || !strings.Contains(out, demo.NotebookPath) {
		t.Fatalf("inspect does not list room %s at %s:\n%s", room, demo.NotebookPath, out)
	}

	for _, target := range []string{demo.NotebookPath, fileID} {
		out, errOut, err := run(t, append([]string{"inspect"}, append(store, target)...)...)
		if err != nil {
			t.Fatalf("inspect %s: %v", target, err)
		}
		if errOut != "" {
			t.Fatalf("inspect %s of a whole room wrote to stderr:\n%s", target, errOut)
		}
		var nb struct {
			NBFormat int   `json:"nbformat"`
			Cells    []any `json:"cells"`
		}
		if err := json.Unmarshal([]byte(out), &nb); err != nil || nb.NBFormat != 4 || len(nb.Cells) == 0 {
			t.Fatalf("inspect %s printed no nbformat JSON (%v):\n%s", target, err, out)
		}
	}
	if _, _, err := run(t, append([]string{"inspect"}, append(store, "missing.ipynb")...)...); err == nil {
		t.Fatal("inspect of a missing notebook succeeded")
	}

	// A row that does not decode: the notebook is printed as served, and stderr says
	// the room is degraded and why (red team pass 18c: a cut-off notebook was printed
	// without a word).
	db, err := sql.Open("sqlite", "file:"+w.StorePath()+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO yupdates (path, yupdate, metadata, timestamp) SELECT path, X'ff', metadata, max(timestamp) + 1 FROM yupdates WHERE path = ?`, room); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(t, append([]string{"inspect"}, append(store, demo.NotebookPath)...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid([]byte(out)) {
		t.Fatalf("inspect of a degraded room printed no JSON:\n%s", out)
	}
	for _, want := range []string{"undecodable row skipped", "room is degraded", "bad_rows=1"} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// demoStore writes the first rows of the demo session, at 20 times its pace, into a
// fresh store; it returns the writer (closed at cleanup) and the store's directory.
func demoStore(t *testing.T) (*demo.Writer, string) {
	t.Helper()
	dir := t.TempDir()
	w := demo.New(demo.Options{Dir: dir, Speed: 20, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.Create(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// The first 50 updates (9 s of the session, under half a second at this pace) make a
	// notebook with cells; a whole replay, after which the writer moves to a fresh room,
	// takes 14 s.
	const rows = 50
	db, err := sql.Open("sqlite", "file:"+w.StorePath()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	room := w.Room()
	var n int
	testenv.Eventually(t, testenv.Wait, fmt.Sprintf("%d demo updates in the store", rows), func() bool {
		if err := db.QueryRow(`SELECT count(*) FROM yupdates WHERE path = ?`, room).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n >= rows
	}, func() string { return fmt.Sprintf("%d rows", n) })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w.Rounds() != 0 {
		t.Fatal("the demo writer moved to a fresh room before it was stopped")
	}
	return w, dir
}

// TestInspectWithoutStoreHints checks that inspect, run where there is no store and
// without --store, says how to name one; with --store the path given is what is wrong.
func TestInspectWithoutStoreHints(t *testing.T) {
	tests := []struct {
		name string
		args []string
		hint bool
	}{
		{"default path", nil, true},
		{"--store given", []string{"--store", "elsewhere.db"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(isolate(t))
			_, _, err := run(t, append([]string{"inspect"}, tt.args...)...)
			if !errors.Is(err, sqlite.ErrNoStore) {
				t.Fatalf("inspect = %v, want sqlite.ErrNoStore", err)
			}
			if got := strings.Contains(err.Error(), "--store"); got != tt.hint {
				t.Fatalf("inspect = %v; hint at --store: %v, want %v", err, got, tt.hint)
			}
		})
	}
}
