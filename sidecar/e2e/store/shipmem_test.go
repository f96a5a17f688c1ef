package store

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/demo"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// shipPeakBound is the peak resident memory (VmHWM) ship may reach copying a store of
// any size: z2jh gives the ship container 128 MiB, the goal is half of it. Measured:
// docs/BENCHMARKS.md, "ship: memory against the store's size".
const shipPeakMiB = 64

// TestShipMemory ships a generated store of realistic rows (writeSessions: the demo
// session's updates, one notebook room per replay) into Postgres with the built binary
// and bounds its peak resident memory: copying rows needs neither a decoded document nor
// the rows all at once, so the peak does not grow with the store. CI ships 300,000 rows;
// SHIP_BENCH=1 measures 300,000 and 1,500,000 (or the comma-separated SHIP_BENCH_ROWS)
// for docs/BENCHMARKS.md.
func TestShipMemory(t *testing.T) {
	if sidecartest.RaceBuild {
		t.Skip("memory is measured on a build without -race")
	}
	sizes := []int{300_000}
	if os.Getenv("SHIP_BENCH") != "" {
		sizes = []int{300_000, 1_500_000}
		if v := os.Getenv("SHIP_BENCH_ROWS"); v != "" {
			sizes = nil
			for f := range strings.SplitSeq(v, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					t.Fatalf("SHIP_BENCH_ROWS: %v", err)
				}
				sizes = append(sizes, n)
			}
		}
	}
	dsn, _ := sidecartest.InitPostgres(t) // the binary's schema, before any generation
	for _, rows := range sizes {
		t.Run(strconv.Itoa(rows), func(t *testing.T) {
			dir := t.TempDir()
			store := filepath.Join(dir, ".jupyter_ystore.db")
			rooms := writeSessions(t, store, rows, false)
			fi, err := os.Stat(store)
			if err != nil {
				t.Fatal(err)
			}
			_, schema := sidecartest.InitPostgres(t)
			t.Cleanup(func() { dropSchema(t, dsn, schema) })

			start := time.Now()
			sc := sidecartest.Launch(t, dir, fmt.Sprintf(`store: {sqlite: {path: %q}}
ship: {source_id: bench, postgres: {dsn: %q, schema: %s}}
`, store, dsn, schema), "ship")
			sc.WaitHTTP("/healthz", http.StatusOK)
			var loading string
			testenv.Eventually(t, 10*time.Minute, fmt.Sprintf("%d rows shipped", rows), func() bool {
				if _, body := sc.Get("/readyz"); loading == "" && strings.Contains(body, `"loading"`) {
					loading = strings.TrimSpace(body)
				}
				return sc.Metric("jupyter_mcp_sidecar_postgres_shipped_rows_total") == float64(rows)
			}, func() string {
				return fmt.Sprintf("%v rows shipped", sc.Metric("jupyter_mcp_sidecar_postgres_shipped_rows_total"))
			})
			took := time.Since(start)
			peak := testenv.ProcStatus(t, sc.Cmd.Process.Pid, "VmHWM") * 1e6 / (1 << 20) // MiB
			t.Logf("ship of %d rows (%d rooms, store %.0f MB): %.1f s, peak RSS %.1f MiB; /readyz while loading: %s",
				rows, rooms, float64(fi.Size())/1e6, took.Seconds(), peak, loading)
			if peak > shipPeakMiB {
				t.Errorf("ship's peak RSS %.1f MiB for %d rows, want at most %d MiB", peak, rows, shipPeakMiB)
			}
		})
	}
}

// writeSessions writes a pycrdt-store SQLite file of the demo session's updates replayed
// into one notebook room after another, rows rows in all (the last room cut short), one
// transaction per room, timestamps a millisecond apart. With compact, each room holds
// instead one row: the document its updates make, merged (Y.encodeStateAsUpdate), as a
// compaction leaves it. It returns the number of rooms.
func writeSessions(t testing.TB, path string, rows int, compact bool) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(sidecartest.RepoRoot, "sidecar", "demo", "session.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := demo.ParseSession(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	updates := make([][]byte, len(steps))
	for i, s := range steps {
		updates[i] = s.Update
	}
	db := sidecartest.BulkStore(t, path)
	merged := map[int][]byte{} // by the number of updates merged
	ts := float64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
	rooms := 0
	for written := 0; written < rows; rooms++ {
		room := fmt.Sprintf(".notebook:00000000-0000-4000-8000-%012d.y", rooms)
		us := updates[:min(len(updates), rows-written)]
		written += len(us)
		if compact {
			if merged[len(us)] == nil {
				merged[len(us)] = mergeUpdates(t, us)
			}
			us = [][]byte{merged[len(us)]}
		}
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			ts += 0.001
			if _, err := tx.Exec(`INSERT INTO yupdates VALUES (?, ?, ?, ?)`, room, u, []byte{}, ts); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return rooms
}

// mergeUpdates is the document updates make, as one update.
func mergeUpdates(t testing.TB, updates [][]byte) []byte {
	t.Helper()
	doc := yjs.NewDoc()
	for _, u := range updates {
		if _, err := doc.ApplyUpdate(u); err != nil {
			t.Fatal(err)
		}
	}
	b, err := doc.EncodeStateAsUpdate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestServeMemory measures, for docs/BENCHMARKS.md, the memory serve holds for a store
// against its rows and against its live content: the generated stores of TestShipMemory
// (SERVE_MEMORY_ROWS, default 300,000 and 1,500,000 rows), as written and compacted to
// one row a room (the same documents), each served by the built binary; once /readyz is
// ready it reports the heap (go_memstats_heap_alloc_bytes, after the load's own
// collections), the resident set and its peak; then, after the next collection (an idle
// process collects every 2 minutes), the live heap, a room's and a live cell's share of
// it. Run only with SERVE_MEMORY=1.
func TestServeMemory(t *testing.T) {
	if os.Getenv("SERVE_MEMORY") == "" {
		t.Skip("set SERVE_MEMORY=1 to measure")
	}
	if sidecartest.RaceBuild {
		t.Skip("memory is measured on a build without -race")
	}
	sizes := []int{300_000, 1_500_000}
	if v := os.Getenv("SERVE_MEMORY_ROWS"); v != "" {
		sizes = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("SERVE_MEMORY_ROWS: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	steps := sidecartest.Session(t)
	live := len(sidecartest.MustJSON(t, steps[len(steps)-1].After))
	state := len(mergeUpdates(t, func() (us [][]byte) {
		for _, s := range steps {
			us = append(us, s.Update)
		}
		return us
	}()))
	cells := steps[len(steps)-1].After.Len()
	t.Logf("a room: %d rows, %d cells, %d B as notebook JSON, %d B as one merged update", len(steps), cells, live, state)
	for _, rows := range sizes {
		for _, compact := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d rows, compacted %v", rows, compact), func(t *testing.T) {
				dir := t.TempDir()
				store := filepath.Join(dir, ".jupyter_ystore.db")
				rooms := writeSessions(t, store, rows, compact)
				start := time.Now()
				sc := sidecartest.StartSidecar(t, dir, sidecartest.Options{})
				var loading string
				testenv.Eventually(t, 10*time.Minute, "serve ready", func() bool {
					code, body := sc.Get("/readyz")
					if loading == "" && strings.Contains(body, `"loading"`) {
						loading = strings.TrimSpace(body)
					}
					return code == http.StatusOK
				})
				took := time.Since(start)
				m := sc.Metrics("go_memstats_heap_alloc_bytes", "go_memstats_heap_inuse_bytes")
				pid := sc.Cmd.Process.Pid
				t.Logf("serve of %d rows in %d rooms (compacted %v): ready in %.1f s; heap alloc %.0f MB (%.0f kB a room), in use %.0f MB; RSS %.0f MB, peak %.0f MB; /readyz while loading: %s",
					rows, rooms, compact, took.Seconds(), m[0]/1e6, m[0]/1e3/float64(rooms), m[1]/1e6,
					testenv.ProcStatus(t, pid, "VmRSS"), testenv.ProcStatus(t, pid, "VmHWM"), loading)
				gcs := sc.Metrics("go_gc_duration_seconds_count")[0]
				testenv.Eventually(t, 3*time.Minute, "the next collection", func() bool { return sc.Metrics("go_gc_duration_seconds_count")[0] > gcs })
				heap := sc.Metrics("go_memstats_heap_alloc_bytes")[0]
				t.Logf("live heap after the next collection: %.0f MB, %.0f kB a room, %.1f kB a live cell (%d cells a room)",
					heap/1e6, heap/1e3/float64(rooms), heap/1e3/float64(rooms*cells), cells)
			})
		}
	}
}

// dropSchema drops a test's Postgres schema, which may hold millions of rows.
func dropSchema(t testing.TB, dsn, schema string) {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}
