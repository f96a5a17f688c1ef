package sidecarcmd

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

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
		out, _, err := run(t, append([]string{"inspect"}, append(store, target)...)...)
		if err != nil {
			t.Fatalf("inspect %s: %v", target, err)
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
}

// demoStore writes 300 ms of the demo session, at 100 times its pace, into a fresh store;
// it returns the writer (closed at cleanup) and the store's directory.
func demoStore(t *testing.T) (*demo.Writer, string) {
	t.Helper()
	dir := t.TempDir()
	w := demo.New(demo.Options{Dir: dir, Speed: 100, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.Create(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	time.Sleep(300 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
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
