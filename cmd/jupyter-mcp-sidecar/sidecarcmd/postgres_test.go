package sidecarcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres/pgtest"
)

// The Postgres commands against the real PostgreSQL .ci/run starts: postgres init (twice:
// idempotent), ship a demo store into it, inspect the shipped notebook from Postgres.
func TestPostgresInitShipInspect(t *testing.T) {
	dsn := pgtest.DSN(t)
	isolate(t)
	schema := fmt.Sprintf("cmdtest_%d", time.Now().UnixNano())
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		conn.Close(context.Background())
	})
	pg := []string{"--dsn", dsn, "--schema", schema, "--channel", schema}
	for range 2 {
		out, _, err := run(t, append([]string{"postgres", "init"}, pg...)...)
		if err != nil || !strings.Contains(out, "postgres y-store ready: "+schema+".yupdates") {
			t.Fatalf("postgres init = %q, %v", out, err)
		}
	}

	w, dir := demoStore(t)
	fileID := w.FileID()

	t.Setenv("JUPYTER_MCP_SIDECAR_SHIP_POSTGRES_SCHEMA", schema)
	t.Setenv("JUPYTER_MCP_SIDECAR_STORE_POSTGRES_SCHEMA", schema)
	t.Setenv("JUPYTER_MCP_SIDECAR_STORE_POSTGRES_CHANNEL", schema)
	shipCtx, stopShip := context.WithCancel(context.Background())
	defer stopShip()
	shipped := make(chan error, 1)
	probes := "http://" + testenv.FreeAddr(t)
	go func() {
		root := newRoot(&testenv.LockedBuffer{}, &testenv.LockedBuffer{})
		root.SetArgs([]string{"ship", "--store", w.StorePath(), "--ship-dsn", dsn, "--source-id", "test-host", "--log-level", "error",
			"--metrics-listen", strings.TrimPrefix(probes, "http://")})
		shipped <- root.ExecuteContext(shipCtx)
	}()
	inspect := []string{"inspect", "--backend", "postgres", "--fileid-db", w.FileIDDBPath(), "--root-dir", dir, "--dsn", dsn}
	testenv.Eventually(t, testenv.Wait, "the shipped room visible to inspect", func() bool {
		select {
		case err := <-shipped:
			t.Fatalf("ship stopped: %v", err)
		default:
		}
		out, _, err := run(t, inspect...)
		return err == nil && strings.Contains(out, fileID)
	})
	// ship answers the probes serve answers: live, ready once the store is shipped, and
	// its metrics.
	for _, p := range []struct{ path, want string }{
		{"/healthz", "ok"},
		{"/readyz", `"ready":true`},
		{"/metrics", "jupyter_mcp_sidecar_postgres_shipped_rows_total"},
	} {
		testenv.Eventually(t, testenv.Wait, "ship's "+p.path, func() bool {
			resp, err := http.Get(probes + p.path)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == http.StatusOK && strings.Contains(string(body), p.want)
		})
	}
	stopShip()
	if err := <-shipped; err != nil {
		t.Fatalf("ship: %v", err)
	}
	out, _, err := run(t, append(inspect, fileID)...)
	if err != nil {
		t.Fatalf("inspect %s from postgres: %v", fileID, err)
	}
	var nb struct {
		Cells []any `json:"cells"`
	}
	if err := json.Unmarshal([]byte(out), &nb); err != nil || len(nb.Cells) == 0 {
		t.Fatalf("inspect printed no notebook with cells (%v):\n%s", err, out)
	}

	// Compaction leaves one row per room and the notebook exactly as it was.
	compacted, _, err := run(t, append([]string{"postgres", "compact"}, pg...)...)
	if err != nil || !strings.Contains(compacted, fileID+".y: ") || !strings.Contains(compacted, "→ 1 row") {
		t.Fatalf("postgres compact = %q, %v", compacted, err)
	}
	after, _, err := run(t, append(inspect, fileID)...)
	if err != nil || after != out {
		t.Fatalf("inspect after compaction (%v):\n%s\nwant:\n%s", err, after, out)
	}
	rooms, _, err := run(t, inspect...)
	if err != nil || !regexp.MustCompile(regexp.QuoteMeta(fileID)+`\s+\S+\s+1\s+0\n`).MatchString(rooms) {
		t.Fatalf("inspect after compaction lists (%v):\n%s", err, rooms)
	}
}
