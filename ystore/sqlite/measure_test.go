package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// The measurements behind docs/BENCHMARKS.md run only with YSTORE_SQLITE_BENCH=1:
//
//	YSTORE_SQLITE_BENCH=1 go test ./ystore/sqlite -run Measure -v
func measuring(t *testing.T) {
	if os.Getenv("YSTORE_SQLITE_BENCH") == "" {
		t.Skip("set YSTORE_SQLITE_BENCH=1 to measure")
	}
}

// TestMeasureLatency measures commit-to-delivered latency: the writer commits a row every
// 10 ms, the sink notes when each arrives.
func TestMeasureLatency(t *testing.T) {
	measuring(t)
	for _, mode := range []struct {
		name string
		cfg  Config
	}{
		{"fsnotify", Config{PollInterval: time.Second}},
		{"polling 50ms", Config{PollInterval: 50 * time.Millisecond, DisableFSNotify: true}},
		{"polling 500ms (default)", Config{DisableFSNotify: true}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
			w := startWriter(t, path)
			w.Do(map[string]any{"op": "write", "room": roomA, "update": b64(tokens("seed"))})
			cfg := mode.cfg
			cfg.Path = path
			tl := newTailer(t, cfg)
			var mu sync.Mutex
			arrived := map[int64]time.Time{}
			runTailer(t, tl, func(_ context.Context, events []ystore.Event) error {
				now := time.Now()
				mu.Lock()
				defer mu.Unlock()
				for _, e := range events {
					for _, r := range e.Rows {
						arrived[r.ID] = now
					}
				}
				return nil
			})
			testenv.Eventually(t, testenv.Wait, "initial load", func() bool { mu.Lock(); defer mu.Unlock(); return len(arrived) == 1 })
			const n = 300
			updates := make([]string, n)
			for i := range updates {
				updates[i] = b64(tokens(fmt.Sprintf("u%d", i)))
			}
			r := w.Do(map[string]any{"op": "flood", "room": roomB, "updates": updates, "interval": 0.01})
			testenv.Eventually(t, testenv.Wait, "every row", func() bool { mu.Lock(); defer mu.Unlock(); return len(arrived) == n+1 })
			lat := make([]time.Duration, 0, n)
			for _, row := range r.Rows {
				committed := time.Unix(0, int64(row[2]*1e9))
				lat = append(lat, arrived[int64(row[0])].Sub(committed))
			}
			slices.Sort(lat)
			t.Logf("%s: commit to delivered over %d rows: p50 %v, p99 %v, max %v; longest read transaction %v (CPU ≤ %vs)",
				mode.name, n, lat[n/2], lat[n*99/100], lat[n-1], tl.Status().MaxReadTx, longest(t, tl.m.readTxCPU))
		})
	}
}

// TestMeasureColdLoad measures Load of a store of 100 notebooks and 500k rows, without
// and with a checkpoint per room (as Jupyter writes one every 100 updates).
func TestMeasureColdLoad(t *testing.T) {
	measuring(t)
	const rooms, perRoom = 100, 5000
	for _, ckpt := range []bool{false, true} {
		t.Run(fmt.Sprintf("checkpoints=%v", ckpt), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
			buildStore(t, path, rooms, perRoom, ckpt)
			tl := newTailer(t, Config{Path: path})
			start := time.Now()
			events, err := tl.Load(context.Background())
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			delivered := 0
			for _, e := range events {
				delivered += len(e.Rows)
			}
			if len(events) != rooms {
				t.Fatalf("%d rooms loaded, want %d", len(events), rooms)
			}
			t.Logf("cold Load of %d rooms, %d rows (checkpoints %v): %v, %d rows delivered; longest read transaction %v (CPU ≤ %vs)",
				rooms, rooms*perRoom, ckpt, took, delivered, tl.Status().MaxReadTx, longest(t, tl.m.readTxCPU))
		})
	}
}

// buildStore writes a pycrdt-store schema with rooms×perRoom rows of 64-byte updates
// interleaved across rooms, and optionally a checkpoint per room 50 rows before its end.
func buildStore(t *testing.T, path string, rooms, perRoom int, checkpoints bool) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range []string{
		"CREATE TABLE yupdates (path TEXT NOT NULL, yupdate BLOB, metadata BLOB, timestamp REAL NOT NULL)",
		"CREATE INDEX idx_yupdates_path_timestamp ON yupdates (path, timestamp)",
		"CREATE TABLE ycheckpoints (path TEXT NOT NULL, checkpoint BLOB NOT NULL, timestamp REAL NOT NULL, PRIMARY KEY(path))",
		"PRAGMA user_version = 2",
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ins, err := tx.Prepare("INSERT INTO yupdates VALUES (?, ?, x'', ?)")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	update := make([]byte, 64)
	ts := 1.7e9
	for i := range perRoom {
		for r := range rooms {
			for j := range update {
				update[j] = byte(rng.Uint32())
			}
			ts += 0.001
			room := fmt.Sprintf(".notebook:%08d-0000-4000-8000-000000000000.y", r)
			if _, err := ins.Exec(room, update, ts); err != nil {
				t.Fatal(err)
			}
			if checkpoints && i == perRoom-50 {
				if _, err := tx.Exec("INSERT OR REPLACE INTO ycheckpoints VALUES (?, ?, ?)", room, make([]byte, 32<<10), ts); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// longest returns the upper bound of the highest non-empty bucket of h.
func longest(t *testing.T, h prometheus.Histogram) float64 {
	t.Helper()
	hist := histogram(t, h)
	prev, bound := uint64(0), 0.0
	for _, b := range hist.GetBucket() {
		if b.GetCumulativeCount() > prev {
			bound = b.GetUpperBound()
		}
		prev = b.GetCumulativeCount()
	}
	if prev < hist.GetSampleCount() {
		return math.Inf(1)
	}
	return bound
}

// TestMeasureManyRooms measures a read of a store of YSTORE_SQLITE_ROOMS one-row rooms
// (default 2,000,000) under hub mode's bound: the time to its first delivery and the
// heap the tailer holds.
func TestMeasureManyRooms(t *testing.T) {
	measuring(t)
	many := 2_000_000
	if n := os.Getenv("YSTORE_SQLITE_ROOMS"); n != "" {
		if _, err := fmt.Sscan(n, &many); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "store.db")
	w := startWriter(t, path)
	start := time.Now()
	writeRooms(t, w, 0, many)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rooms written in %v: %d MB", many, time.Since(start).Round(time.Millisecond), fi.Size()>>20)
	for _, bound := range []int{2000, 0} {
		before := heapAlloc()
		tl := newTailer(t, Config{Path: path, PollInterval: time.Hour, DisableFSNotify: true, MaxRooms: bound, StreamLoads: true})
		k := newKeys()
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tl.Run(ctx, k.deliver) }()
		<-tl.FirstRead()
		took := time.Since(start)
		t.Logf("max rooms %d: first read in %v, %d rooms followed, heap grown %d MB (the sink's included)",
			bound, took.Round(time.Millisecond), tl.Status().Rooms, (int64(heapAlloc())-int64(before))>>20)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
