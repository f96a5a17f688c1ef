package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

func TestConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{Path: "x.db"}, true},
		{"no path", Config{}, false},
		{"negative poll", Config{Path: "x.db", PollInterval: -1}, false},
		{"negative chunk", Config{Path: "x.db", ChunkRows: -1}, false},
		{"negative busy wait", Config{Path: "x.db", MaxBusyWait: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, err := New(tt.cfg)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Fatalf("New: %v", err)
			}
			if tt.ok && (tl.cfg.PollInterval != DefaultPollInterval || tl.cfg.ChunkRows != DefaultChunkRows || tl.cfg.MaxBusyWait != DefaultMaxBusyWait) {
				t.Fatalf("defaults not applied: %+v", tl.cfg)
			}
		})
	}
	reg := prometheus.NewRegistry()
	if _, err := New(Config{Path: "x.db", Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Path: "y.db", Registerer: reg}); err == nil {
		t.Fatal("a second tailer registered the same metrics")
	}
}

func TestBackend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	tl, err := ystore.Open("sqlite", ystore.Options{Source: path, PollInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := tl.(*Tailer).cfg; got.Path != path || got.PollInterval != time.Second {
		t.Fatalf("config %+v", got)
	}
	if _, err := tl.Load(context.Background()); !errors.Is(err, ErrNoStore) {
		t.Fatalf("Load of a missing store: %v, want ErrNoStore", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tl.Run(ctx, nil); err != nil {
		t.Fatalf("Run with a done context: %v", err)
	}
}

// TestDirectoryAppearsLater starts tailing before the store's directory exists.
func TestDirectoryAppearsLater(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	path := filepath.Join(dir, ".jupyter_ystore.db")
	tl := newTailer(t, Config{Path: path, PollInterval: 100 * time.Millisecond})
	s := newSink()
	runTailer(t, tl, s.deliver)
	waitFor(t, 5*time.Second, "unreachable status", func() bool { return tl.Status().LastError != "" })
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := newModel(startWriter(t, path))
	m.write(roomA, "a1")
	converge(t, s, m)
	m.write(roomA, "a2")
	converge(t, s, m)
}

func TestRunTwice(t *testing.T) {
	tl := newTailer(t, Config{Path: filepath.Join(t.TempDir(), "x.db")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tl.Run(ctx, newSink().deliver) }()
	waitFor(t, 5*time.Second, "first run", func() bool { return tl.running.Load() })
	if err := tl.Run(ctx, newSink().deliver); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run: %v, want ErrRunning", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
