package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/demo"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/testutil"
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
	if raceBuild {
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
	dsn, _ := initPostgres(t) // the binary's schema, before any generation
	for _, rows := range sizes {
		t.Run(strconv.Itoa(rows), func(t *testing.T) {
			dir := t.TempDir()
			store := filepath.Join(dir, ".jupyter_ystore.db")
			rooms := writeSessions(t, store, rows)
			fi, err := os.Stat(store)
			if err != nil {
				t.Fatal(err)
			}
			_, schema := initPostgres(t)
			t.Cleanup(func() { dropSchema(t, dsn, schema) })

			start := time.Now()
			sc := launch(t, dir, fmt.Sprintf(`store: {sqlite: {path: %q}}
ship: {source_id: bench, postgres: {dsn: %q, schema: %s}}
`, store, dsn, schema), "ship")
			sc.waitHTTP("/healthz", http.StatusOK)
			var loading string
			testutil.Eventually(t, 10*time.Minute, fmt.Sprintf("%d rows shipped", rows), func() bool {
				if _, body := sc.get("/readyz"); loading == "" && strings.Contains(body, `"loading"`) {
					loading = strings.TrimSpace(body)
				}
				return sc.metric("jupyter_mcp_sidecar_postgres_shipped_rows_total") == float64(rows)
			}, func() string { return fmt.Sprintf("%v rows shipped", sc.metric("jupyter_mcp_sidecar_postgres_shipped_rows_total")) })
			took := time.Since(start)
			peak := status(t, sc.cmd.Process.Pid, "VmHWM") * 1e6 / (1 << 20) // MiB
			t.Logf("ship of %d rows (%d rooms, store %.0f MB): %.1f s, peak RSS %.1f MiB; /readyz while loading: %s",
				rows, rooms, float64(fi.Size())/1e6, took.Seconds(), peak, loading)
			if peak > shipPeakMiB {
				t.Errorf("ship's peak RSS %.1f MiB for %d rows, want at most %d MiB", peak, rows, shipPeakMiB)
			}
		})
	}
}

// writeSessions writes a pycrdt-store SQLite file of rows rows: the demo session's
// updates replayed into one notebook room after another (the last one cut short), one
// transaction per room, timestamps a millisecond apart. It returns the number of rooms.
func writeSessions(t testing.TB, path string, rows int) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "sidecar", "demo", "session.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := demo.ParseSession(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(off)&_pragma=synchronous(off)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range demo.StoreSchema {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	ts := float64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
	rooms := 0
	for written := 0; written < rows; rooms++ {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		room := fmt.Sprintf(".notebook:00000000-0000-4000-8000-%012d.y", rooms)
		for _, s := range steps[:min(len(steps), rows-written)] {
			ts += 0.001
			if _, err := tx.Exec(`INSERT INTO yupdates VALUES (?, ?, ?, ?)`, room, s.Update, []byte{}, ts); err != nil {
				t.Fatal(err)
			}
			written++
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return rooms
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
