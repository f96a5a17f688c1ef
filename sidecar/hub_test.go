package sidecar

import (
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite/sqlitetest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

// testHub is a hub of the SQLite stores {dir}/{username}/.jupyter_ystore.db, closed
// when the test ends.
func testHub(t *testing.T, dir string) *hub {
	cfg := config.Default()
	cfg.Hub.Enabled = true
	cfg.Hub.Stores = config.HubStores{Backend: config.BackendSQLite,
		SQLitePath: filepath.Join(dir, config.Placeholder, ".jupyter_ystore.db"),
		FileIDDB:   filepath.Join(dir, config.Placeholder, "file_id_manager.db"),
		RootDir:    filepath.Join(dir, config.Placeholder)}
	cfg.Hub.StateDir = dir
	h := &hub{cfg: cfg, log: slog.New(slog.DiscardHandler), tenants: map[string]*tenant{}, shared: shared{hub: true}}
	h.m = newHubMetrics(h.registries)
	t.Cleanup(h.closeAll)
	return h
}

// A user's first request is answered once the store's first read is done: the
// notebooks are served by then; a store that cannot be read is answered too (with
// its error in /readyz), rather than left waiting.
func TestHubTenantWaitsForTheFirstRead(t *testing.T) {
	dir := t.TempDir()
	h := testHub(t, dir)
	if err := os.MkdirAll(filepath.Join(dir, "ada"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := sqlitetest.Start(t, filepath.Join(dir, "ada", ".jupyter_ystore.db"))
	for _, u := range ysessions.Load(t, "s0001.json.gz").UpdateBytes() {
		w.Do(map[string]any{"op": "write", "room": "json:notebook:a.ipynb", "update": base64.StdEncoding.EncodeToString(u)})
	}
	ada, err := h.tenant(t.Context(), "ada")
	if err != nil {
		t.Fatal(err)
	}
	if got := ada.in.rooms.Paths(); !slices.Equal(got, []string{"a.ipynb"}) {
		t.Fatalf("served when first asked: %v; want the store's notebook", got)
	}

	if err := os.MkdirAll(filepath.Join(dir, "bob"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "bob", ".jupyter_ystore.db"), 0o600); err != nil {
		t.Fatal(err)
	}
	bob, err := h.tenant(t.Context(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if r := bob.in.health.Check(); r.Reachable || r.LastError == "" {
		t.Fatalf("readiness %+v: want the store's error", r)
	}
}

// closeAll returns only once the releases under way have finished: the released
// tenants stopped and their counters folded into the hub's.
func TestHubCloseWaitsForRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hub{tenants: map[string]*tenant{}}
		h.m = newHubMetrics(h.registries)
		reg := prometheus.NewRegistry()
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "rows_total", Help: "rows"})
		c.Add(3)
		reg.MustRegister(c)
		// A released tenant whose instance stops when the test says.
		stopped := make(chan struct{})
		h.release([]*tenant{{reg: reg, done: stopped, cancel: func() {}}})
		closed := make(chan struct{})
		go func() { h.closeAll(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("closeAll returned while a released tenant was still stopping")
		default:
		}
		close(stopped)
		<-closed
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		if s := h.m.retired["rows_total"]; s == nil || s.value != 3 {
			t.Fatalf("retired %v: want the released tenant's counter", h.m.retired)
		}
	})
}
