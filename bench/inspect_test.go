package bench

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

// TestInspectMemory measures, for docs/BENCHMARKS.md ("inspect: memory against rows and
// live content"), the peak RSS of `inspect` reading a whole pycrdt-store SQLite file,
// side by side, in one run, with a yjs reader (bench/storeread.mjs: one Y.Doc per room) and
// a pycrdt reader (bench/storeread.py: one pycrdt Doc per room, what jupyter-collaboration
// holds) of the same rooms; and inspect's live Go heap at its peak and at its last
// collection (GODEBUG=gctrace=1: the heap marked live by each collection, in whole MB), and
// the live heap the rooms hold once loaded the same way in this process, against the
// store's rows and its live cells. Run only with
// YINSPECT=DIR: every directory under DIR holding room-*.bin frame files (one room's
// updates each, bench/inspect.sh writes them) is a store, written once to DIR/NAME/store.db
// with the rooms' rows interleaved in commit order. YINSPECT_BIN: name=binary pairs,
// comma-separated, to compare builds (default: this tree's, built here);
// YINSPECT_ROUNDS: rounds, the smallest figure of each counts (default 3). YINSPECT_PG: a
// Postgres DSN; each store's rows are then also copied, in the same order, into a schema
// of their own there (yinspect_NAME, kept for the next run) and each build's `inspect
// --backend postgres` of it measured too, as "BUILD (postgres)".
//
// The guard: on every store, the build under test (the last of YINSPECT_BIN, else this
// tree's) reads the SQLite store at least twice as fast as the pycrdt reader (wall time)
// at no more peak RSS, or the test fails (issue 42: a cold load is the sidecar's start, a
// hub user's first read and a replica taking over).
func TestInspectMemory(t *testing.T) {
	dir := os.Getenv("YINSPECT")
	if dir == "" {
		t.Skip("set YINSPECT=DIR to measure (bench/inspect.sh)")
	}
	type build struct{ name, path string }
	var bins []build
	for pair := range strings.SplitSeq(os.Getenv("YINSPECT_BIN"), ",") {
		if name, path, ok := strings.Cut(pair, "="); ok {
			bins = append(bins, build{name, path})
		}
	}
	if len(bins) == 0 {
		bin := filepath.Join(t.TempDir(), "sidecar")
		if out, err := exec.Command("go", "build", "-o", bin, "../cmd/jupyter-mcp-sidecar").CombinedOutput(); err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
		bins = []build{{"this tree", bin}}
	}
	rounds, _ := strconv.Atoi(os.Getenv("YINSPECT_ROUNDS"))
	rounds = cmp.Or(rounds, 3)
	python := filepath.Join(os.Getenv("SIDECAR_TEST_JUPYTER_VENV"), "bin", "python")

	stores, _ := filepath.Glob(filepath.Join(dir, "*", "room-*.bin"))
	names := map[string][]string{}
	for _, f := range stores {
		names[filepath.Dir(f)] = append(names[filepath.Dir(f)], f)
	}
	t.Log("| store | rooms | rows | live cells | live JSON | reader | peak RSS | peak live heap | live heap at the last collection | wall |")
	t.Log("|---|---|---|---|---|---|---|---|---|---|")
	for _, sd := range slices.Sorted(func(yield func(string) bool) {
		for k := range names {
			if !yield(k) {
				return
			}
		}
	}) {
		rooms := names[sd]
		slices.Sort(rooms)
		db := filepath.Join(sd, "store.db")
		rows := writeStore(t, db, rooms)
		type figure struct {
			rss, peakHeap, endHeap uint64
			wall                   time.Duration
		}
		best := map[string]figure{}
		keep := func(name string, f figure) {
			b, ok := best[name]
			if !ok {
				best[name] = f
				return
			}
			best[name] = figure{min(b.rss, f.rss), min(b.peakHeap, f.peakHeap), min(b.endHeap, f.endHeap), min(b.wall, f.wall)}
		}
		var content struct{ Cells, JSON int }
		type reader struct {
			name string
			args []string
			env  []string
		}
		var inspects []reader
		for _, b := range bins {
			inspects = append(inspects, reader{b.name, []string{b.path, "inspect", "--store", db}, nil})
		}
		if dsn := os.Getenv("YINSPECT_PG"); dsn != "" {
			schema := pgStore(t, dsn, db, filepath.Base(sd), rows)
			for _, b := range bins {
				inspects = append(inspects, reader{b.name + " (postgres)", []string{b.path, "inspect", "--backend", "postgres", "--dsn", dsn},
					[]string{"JUPYTER_MCP_SIDECAR_STORE_POSTGRES_SCHEMA=" + schema}})
			}
		}
		for range rounds {
			for _, r := range inspects {
				cmd := exec.Command(r.args[0], r.args[1:]...)
				cmd.Env = append(append(os.Environ(), "GODEBUG=gctrace=1"), r.env...)
				stdout, stderr, rss, wall := measure(t, cmd)
				if n := strings.Count(stdout, "\n") - 1; n != len(rooms) {
					t.Fatalf("%s inspect listed %d rooms, want %d:\n%s", r.name, n, len(rooms), stdout)
				}
				peak, end := liveHeaps(stderr)
				keep(r.name, figure{rss, peak, end, wall})
			}
			cmd := exec.Command("node", append([]string{"--expose-gc", "storeread.mjs"}, rooms...)...)
			stdout, _, rss, wall := measure(t, cmd)
			var js struct {
				Rows, Cells, JSON int
				Heap              uint64
			}
			if err := json.Unmarshal([]byte(stdout), &js); err != nil || js.Rows != rows {
				t.Fatalf("yjs reader: %v (%d rows, want %d): %s", err, js.Rows, rows, stdout)
			}
			content.Cells, content.JSON = js.Cells, js.JSON
			keep("yjs 13.6", figure{rss, js.Heap, js.Heap, wall})
			stdout, _, rss, wall = measure(t, exec.Command(python, "storeread.py", db))
			var py struct{ Rows int }
			if err := json.Unmarshal([]byte(stdout), &py); err != nil || py.Rows != rows {
				t.Fatalf("pycrdt reader: %v (%d rows, want %d): %s", err, py.Rows, rows, stdout)
			}
			keep("pycrdt", figure{rss, 0, 0, wall})
		}
		held := heldHeap(t, db)
		t.Logf("%s, this tree in process: the rooms hold %.1f MiB of live heap, %.1f kB a live cell, %.0f B a row", filepath.Base(sd),
			float64(held)/(1<<20), float64(held)/1e3/float64(content.Cells), float64(held)/float64(rows))
		readers := []string{}
		for _, r := range inspects {
			readers = append(readers, r.name)
		}
		guard(t, filepath.Base(sd), bins[len(bins)-1].name, best[bins[len(bins)-1].name].rss, best[bins[len(bins)-1].name].wall,
			best["pycrdt"].rss, best["pycrdt"].wall)
		for _, r := range append(readers, "yjs 13.6", "pycrdt") {
			f := best[r]
			heap := func(v uint64) string {
				if v == 0 {
					return "—"
				}
				return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20))
			}
			t.Logf("| %s | %d | %d | %d | %.0f kB | %s | %.1f MiB | %s | %s | %.1f s |", filepath.Base(sd), len(rooms), rows,
				content.Cells, float64(content.JSON)/1e3, r, float64(f.rss)/(1<<20), heap(f.peakHeap), heap(f.endHeap), f.wall.Seconds())
		}
	}
}

// Cold-load guard of TestInspectMemory: inspect at least coldSpeedup times as fast as the
// pycrdt reader, at no more peak RSS.
const coldSpeedup = 2

// guard logs the verdict of build on store against the pycrdt reader and fails t when
// build misses the guard.
func guard(t *testing.T, store, build string, rss uint64, wall time.Duration, pyRSS uint64, pyWall time.Duration) {
	t.Helper()
	speedup := pyWall.Seconds() / wall.Seconds()
	verdict := "met"
	if speedup < coldSpeedup || rss > pyRSS {
		verdict = "**FAILED**"
		t.Errorf("%s: %s reads the store %.2f× as fast as pycrdt at %.1f MiB peak RSS (pycrdt %.1f MiB); the guard is ≥ %d× at no more memory",
			store, build, speedup, float64(rss)/(1<<20), float64(pyRSS)/(1<<20), coldSpeedup)
	}
	t.Logf("guard %s: %s %.2f× pycrdt's speed, %.1f MiB against %.1f MiB peak RSS (≥ %d× at ≤ its memory): %s",
		store, build, speedup, float64(rss)/(1<<20), float64(pyRSS)/(1<<20), coldSpeedup, verdict)
}

// heldHeap loads the store at db as inspect does (sqlite.Tailer.LoadStream into the rooms)
// in this process and returns the live heap the rooms hold, collected before and after.
func heldHeap(t *testing.T, db string) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tl, err := sqlite.New(sqlite.Config{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	rs := rooms.New(rooms.Config{}).Writer(nil)
	if err := tl.LoadStream(t.Context(), rs.Sink); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(rs)
	return after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
}

// writeStore writes the rooms' frames into a pycrdt-store SQLite file at path, unless it
// exists, one row per update, the rooms' rows interleaved as concurrent sessions commit
// them; it returns the number of rows.
func writeStore(t *testing.T, path string, rooms []string) int {
	t.Helper()
	updates := make([][][]byte, len(rooms))
	total := 0
	for i, f := range rooms {
		buf, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		updates[i] = frames(buf)
		total += len(updates[i])
	}
	if _, err := os.Stat(path); err == nil {
		return total
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	db := sidecartest.BulkStore(t, tmp)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ts := float64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
	for i := 0; ; i++ {
		wrote := false
		for r, us := range updates {
			if i >= len(us) {
				continue
			}
			ts += 0.001
			room := fmt.Sprintf(".notebook:00000000-0000-4000-8000-%012d.y", r)
			if _, err := tx.Exec(`INSERT INTO yupdates VALUES (?, ?, ?, ?)`, room, us[i], []byte{}, ts); err != nil {
				t.Fatal(err)
			}
			wrote = true
		}
		if !wrote {
			break
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return total
}

// pgStore copies the rows of the SQLite store at db, in rowid (commit) order, into a
// fresh Postgres store in schema yinspect_NAME at dsn, unless it holds rows rows already,
// and returns the schema.
func pgStore(t *testing.T, dsn, db, name string, rows int) string {
	t.Helper()
	ctx := t.Context()
	cfg := postgres.Config{DSN: dsn, Schema: "yinspect_" + strings.ReplaceAll(name, "-", "_")}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	table := pgx.Identifier{cfg.Schema, postgres.DefaultTable}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+table.Sanitize()).Scan(&n); err == nil && n == rows {
		return cfg.Schema
	}
	if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{cfg.Schema}.Sanitize()+` CASCADE`); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Init(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	src, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rs, err := src.QueryContext(ctx, `SELECT path, yupdate, timestamp FROM yupdates ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var (
		path   string
		update []byte
		ts     float64
	)
	copied, err := conn.CopyFrom(ctx, table, []string{"path", "yupdate", "timestamp"}, pgx.CopyFromFunc(func() ([]any, error) {
		if !rs.Next() {
			return nil, rs.Err()
		}
		err := rs.Scan(&path, &update, &ts)
		return []any{path, update, ts}, err
	}))
	if err != nil || copied != int64(rows) {
		t.Fatalf("copy into postgres: %d rows of %d: %v", copied, rows, err)
	}
	return cfg.Schema
}

// measure runs cmd under GNU time and returns its output, its peak RSS and its
// wall-clock time. The peak is what time reports of the process it forks: a process
// started by the test directly would report the test's own peak as a floor (Linux keeps
// the peak across the exec of a process the test's memory was shared with).
func measure(t *testing.T, cmd *exec.Cmd) (stdout, stderr string, rss uint64, wall time.Duration) {
	t.Helper()
	peak := filepath.Join(t.TempDir(), "maxrss")
	cmd.Args = append([]string{"/usr/bin/time", "-f", "%M", "-o", peak}, cmd.Args...)
	cmd.Path = "/usr/bin/time"
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, e.String())
	}
	wall = time.Since(start)
	b, err := os.ReadFile(peak)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("GNU time: %v", err)
	}
	return o.String(), e.String(), kb << 10, wall
}

// gcLine matches a gctrace line's heap sizes: before, after and marked live, in MB.
var gcLine = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)

// liveHeaps returns the largest and the last heap a collection marked live, from a
// GODEBUG=gctrace=1 trace.
func liveHeaps(trace string) (peak, end uint64) {
	for _, m := range gcLine.FindAllStringSubmatch(trace, -1) {
		v, _ := strconv.ParseUint(m[3], 10, 64)
		end = v << 20
		peak = max(peak, end)
	}
	return peak, end
}
