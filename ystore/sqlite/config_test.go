package sqlite

import (
	"bytes"
	"compress/zlib"
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
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
		{"negative max rooms", Config{Path: "x.db", MaxRooms: -1}, false},
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
	// A second tailer on the same registry (hub mode's next user) feeds the same series.
	reg := prometheus.NewPedanticRegistry()
	x, err := New(Config{Path: "x.db", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	y, err := New(Config{Path: "y.db", Registerer: reg})
	if err != nil {
		t.Fatalf("a second tailer on the registry: %v", err)
	}
	x.m.busy.Inc()
	y.m.busy.Inc()
	if got := testenv.Metric(t, reg, "jupyter_mcp_sidecar_sqlite_busy_retries_total"); got != 2 {
		t.Fatalf("busy retries of both tailers %v, want 2 in one series", got)
	}
}

func TestMissingStore(t *testing.T) {
	tl, err := New(Config{Path: filepath.Join(t.TempDir(), "missing.db")})
	if err != nil {
		t.Fatal(err)
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

// TestDirectoryAppearsLater starts tailing before the store's directory exists: the
// store is awaited (Status.Absent, no error) until it is written, and a fault once it
// has been read and disappears.
func TestDirectoryAppearsLater(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	path := filepath.Join(dir, ".jupyter_ystore.db")
	tl := newTailer(t, Config{Path: path, PollInterval: 100 * time.Millisecond})
	s := newSink()
	runTailer(t, tl, s.deliver)
	testenv.Eventually(t, testenv.Wait, "the store awaited", func() bool { return tl.Status().Absent })
	if st := tl.Status(); st.Reachable || st.LastError != "" {
		t.Fatalf("status %+v of a store not written yet: want unreachable with no error", st)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := newModel(startWriter(t, path))
	m.write(roomA, "a1")
	converge(t, s, m)
	m.write(roomA, "a2")
	converge(t, s, m)
	if st := tl.Status(); st.Absent || !st.Reachable {
		t.Fatalf("status %+v once the store is read: want reachable, not absent", st)
	}
	// Once read, a store that disappears is a fault, not a store not written yet.
	if err := os.Rename(path, path+".aside"); err != nil {
		t.Fatal(err)
	}
	// The read that finds it gone may first fail on its stat; the status settles on ErrNoStore.
	testenv.Eventually(t, testenv.Wait, "the store gone reported", func() bool { return strings.Contains(tl.Status().LastError, ErrNoStore.Error()) })
	if st := tl.Status(); st.Absent || st.Reachable || !strings.Contains(st.LastError, ErrNoStore.Error()) {
		t.Fatalf("status %+v of a store gone: want unreachable with ErrNoStore, not absent", st)
	}
}

func TestRunTwice(t *testing.T) {
	tl := newTailer(t, Config{Path: filepath.Join(t.TempDir(), "x.db")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tl.Run(ctx, newSink().deliver) }()
	testenv.Eventually(t, testenv.Wait, "first run", func() bool { return tl.running.Load() })
	if err := tl.Run(ctx, newSink().deliver); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run: %v, want ErrRunning", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestDecompress tails a store written with zlib compression (jupyter-collaboration's
// compress_function = zlib.compress).
func TestDecompress(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
	w := startWriter(t, path)
	want := docs{}
	write := func(toks string, compress bool) {
		u := []byte(toks)
		if compress {
			var b bytes.Buffer
			z := zlib.NewWriter(&b)
			z.Write(u)
			z.Close()
			u = b.Bytes()
		}
		want.apply(roomA, []byte(toks))
		w.Do(map[string]any{"op": "write", "room": roomA, "update": b64(u)})
	}
	write("a1,a2", true)
	tl := newTailer(t, Config{Path: path, Decompress: func(b []byte) ([]byte, error) {
		r, err := zlib.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	}})
	s := newSink()
	runTailer(t, tl, s.deliver)
	write("a3", true)
	write("raw", false)
	write("a4", true)
	converge(t, s, &model{docs: want})
	if n := promtest.ToFloat64(tl.m.decompressErrors); n != 1 {
		t.Fatalf("decompress errors = %v, want 1", n)
	}
	if n := promtest.ToFloat64(tl.m.resyncs.WithLabelValues(reasonHistory)); n != 0 {
		t.Fatalf("history resyncs = %v: the cursor fingerprint must use stored sizes", n)
	}
}

// TestSchemaVersionChange reloads every room when the schema version changes in place.
func TestSchemaVersionChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
	m := newModel(startWriter(t, path))
	m.write(roomA, "a1")
	m.write(roomB, "b1")
	tl := newTailer(t, Config{Path: path, PollInterval: 20 * time.Millisecond})
	s := newSink()
	runTailer(t, tl, s.deliver)
	converge(t, s, m)
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("PRAGMA user_version = 3"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.Wait, "a second reset", func() bool { return s.kinds(roomA)[ystore.EventReset] == 2 })
	converge(t, s, m)
}

// A failing sink ends Run with ystore.ErrSink and the sink's error, as in every backend.
func TestSinkErrorStopsRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	newModel(startWriter(t, path)).write(roomA, "a1")
	tl := newTailer(t, Config{Path: path})
	errFull := errors.New("sink full")
	err := tl.Run(context.Background(), func(context.Context, []ystore.Event) error { return errFull })
	if !errors.Is(err, errFull) || !errors.Is(err, ystore.ErrSink) {
		t.Fatalf("Run: %v, want ystore.ErrSink and the sink's error", err)
	}
}
