package sidecar

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite/sqlitetest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

// testHub is a hub of the SQLite stores {dir}/{username}/.jupyter_ystore.db, its
// metrics on a registry of its own (h.obs.Registerer), closed when the test ends.
func testHub(t *testing.T, dir string) *hub {
	cfg := config.Default()
	cfg.Hub.Enabled = true
	cfg.Hub.Stores = config.HubStores{Backend: config.BackendSQLite,
		SQLitePath: filepath.Join(dir, config.Placeholder, ".jupyter_ystore.db"),
		FileIDDB:   filepath.Join(dir, config.Placeholder, "file_id_manager.db"),
		RootDir:    filepath.Join(dir, config.Placeholder)}
	cfg.Hub.StateDir = dir
	h := &hub{cfg: cfg, obs: config.Obs{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewPedanticRegistry()}, tenants: map[string]*tenant{}, shared: shared{hub: true}}
	var err error
	if h.m, err = newHubMetrics(h.obs.Registerer, h.users); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.closeAll)
	return h
}

// writeStore writes updates into the room of notebook path in user's store, as Jupyter does.
func writeStore(t *testing.T, dir, user, path string, updates [][]byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, user), 0o755); err != nil {
		t.Fatal(err)
	}
	w := sqlitetest.Start(t, filepath.Join(dir, user, ".jupyter_ystore.db"))
	for _, u := range updates {
		w.Do(map[string]any{"op": "write", "room": "json:notebook:" + path, "update": base64.StdEncoding.EncodeToString(u)})
	}
}

// A user's first request is answered once the store's first read is done: the
// notebooks are served by then; a store that cannot be read is answered too (with
// its error in /readyz), rather than left waiting.
func TestHubTenantWaitsForTheFirstRead(t *testing.T) {
	dir := t.TempDir()
	h := testHub(t, dir)
	writeStore(t, dir, "ada", "a.ipynb", ysessions.Load(t, "s0001.json.gz").UpdateBytes())
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
// tenants stopped (and took their share out of the shared gauges).
func TestHubCloseWaitsForRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hub{tenants: map[string]*tenant{}}
		// A released tenant whose instance stops when the test says.
		stopped := make(chan struct{})
		h.release([]*tenant{{done: stopped, cancel: func() {}}})
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
	})
}

// Hub mode's users share one set of series on the process's registry: the store is
// reachable (1, not one per user), rows tailed add up, the room gauges are the sums and
// a released user's share of them goes back to 0 (their counters stay counted), and
// /metrics names no user.
func TestHubMetrics(t *testing.T) {
	dir := t.TempDir()
	h := testHub(t, dir)
	const ada, bob = "user-ada-7f3e", "user-bob-91c2"
	writeStore(t, dir, ada, "a.ipynb", ysessions.Load(t, "s0001.json.gz").UpdateBytes())
	writeStore(t, dir, bob, "b.ipynb", append(ysessions.Load(t, "s0002.json.gz").UpdateBytes(), []byte{0x01, 0xff, 0xff})) // degraded
	var tenants []*tenant
	for _, user := range []string{ada, bob} {
		tn, err := h.tenant(t.Context(), user)
		if err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, tn)
	}
	rows := float64(tenants[0].in.tailer.Status().RowsTailed + tenants[1].in.tailer.Status().RowsTailed)
	reg := h.obs.Registerer.(prometheus.Gatherer)
	series := func(name string) float64 { t.Helper(); return testenv.Metric(t, reg, "jupyter_mcp_sidecar_"+name) }
	check := func(what string, want map[string]float64) {
		t.Helper()
		for name, v := range want {
			if got := series(name); got != v {
				t.Errorf("%s: %s = %v, want %v", what, name, got, v)
			}
		}
	}
	// The rooms are applied before the first read is recorded: the gauges are settled.
	check("two users", map[string]float64{
		"store_reachable": 1, "sqlite_reachable": 1, "rows_tailed_total": rows, "sqlite_rows_tailed_total": rows,
		"live_rooms": 2, "degraded_rooms": 1, "hub_user_loads_total": 2,
	})
	if rows == 0 || series("rows_applied_total") != rows-1 || series("decode_errors_total") != 1 {
		t.Errorf("rows tailed %v, applied %v, decode errors %v: want every row but the bad one applied",
			rows, series("rows_applied_total"), series("decode_errors_total"))
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, user := range []string{ada, bob, fileName(ada), fileName(bob)} {
		if strings.Contains(rec.Body.String(), user) {
			t.Fatalf("/metrics names %q:\n%s", user, rec.Body.String())
		}
	}

	// bob is released as the reaper does; ada stays.
	h.mu.Lock()
	delete(h.tenants, bob)
	h.mu.Unlock()
	h.release(tenants[1:])
	<-tenants[1].done
	check("bob released", map[string]float64{
		"store_reachable": 1, "rows_tailed_total": rows, "sqlite_rows_tailed_total": rows,
		"live_rooms": 1, "degraded_rooms": 0, "tail_lag_seconds": 0,
	})
}

// A user whose store or file id database leads outside their home (a link to another
// user's), or is not theirs (another owner: made as root), is refused: the tenant ends
// with a *refusal the user is told (no path), the operator gets one error line, and
// bob, whose files they point at, is served as ever. No log line names a user: each
// carries the pseudonym of the tenant, and the user's paths read {username}.
func TestHubRefusesFilesNotTheUsers(t *testing.T) {
	dir := t.TempDir()
	h := testHub(t, dir)
	var logs testenv.LockedBuffer
	h.obs.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	const bob = "user-b0b"
	writeStore(t, dir, bob, "b.ipynb", ysessions.Load(t, "s0001.json.gz").UpdateBytes())
	link := func(user, file, target string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, user), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, user, file)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		user, tell string
		make       func(user string)
	}{
		{"user-m4ll", "your Y-store cannot be served: it leads outside your home directory", func(u string) {
			link(u, ".jupyter_ystore.db", filepath.Join("..", bob, ".jupyter_ystore.db"))
		}},
		{"user-d4n", "your file id database cannot be served: it leads outside your home directory", func(u string) {
			writeStore(t, dir, u, "d.ipynb", ysessions.Load(t, "s0002.json.gz").UpdateBytes())
			link(u, "file_id_manager.db", filepath.Join(dir, bob, ".jupyter_ystore.db"))
		}},
	}
	if os.Getuid() == 0 {
		cases = append(cases, struct {
			user, tell string
			make       func(user string)
		}{"user-c4r4", "your Y-store cannot be served: it is not owned by you", func(u string) {
			writeStore(t, dir, u, "c.ipynb", ysessions.Load(t, "s0002.json.gz").UpdateBytes())
			if err := os.Chown(filepath.Join(dir, u, ".jupyter_ystore.db"), 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}})
	}
	for _, c := range cases {
		c.make(c.user)
		_, err := h.tenant(t.Context(), c.user)
		var r *refusal
		if !errors.As(err, &r) || r.ForUser() != c.tell {
			t.Fatalf("%s: tenant = %v, want the refusal %q", c.user, err, c.tell)
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/services/mcp/mcp", nil)
		h.ServeHTTP(rec, req.WithContext(auth.WithPrincipal(req.Context(), auth.Principal{User: c.user})))
		if body := rec.Body.String(); rec.Code != http.StatusForbidden || strings.TrimSpace(body) != c.tell {
			t.Fatalf("%s: answered %d %q, want 403 %q", c.user, rec.Code, body, c.tell)
		}
		id := LogID(h.idKey, c.user)
		if n := strings.Count(logs.String(), `"msg":"a user's notebooks are not served: their files are refused","tenant":"`+id+`"`); n != 1 {
			t.Fatalf("%s: %d refusal lines for tenant %s, want 1:\n%s", c.user, n, id, logs.String())
		}
	}
	b, err := h.tenant(t.Context(), bob)
	if err != nil || !slices.Equal(b.in.rooms.Paths(), []string{"b.ipynb"}) {
		t.Fatalf("bob: %v; want his notebook served", err)
	}
	for _, c := range append(cases, struct {
		user, tell string
		make       func(user string)
	}{user: bob}) {
		if strings.Contains(logs.String(), c.user) {
			t.Fatalf("the logs name %s:\n%s", c.user, logs.String())
		}
	}
}

// A tenant's log lines name the user nowhere, their paths included; at level debug one
// line, the tenant's first, maps the pseudonym to the user.
func TestTenantLogNamesNoUser(t *testing.T) {
	dir := t.TempDir()
	h := testHub(t, dir)
	var logs testenv.LockedBuffer
	h.obs.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const user = "user-ev3"
	l := h.tenantLog(user)
	store := filepath.Join(dir, user, ".jupyter_ystore.db")
	l.With("store", store).Warn("reading y-store", "err", fmt.Errorf("open %s: %w", store, os.ErrNotExist), "quoted", strconv.Quote(user))
	line := logs.String()
	if strings.Contains(line, user) || !strings.Contains(line, filepath.Join(dir, config.Placeholder, ".jupyter_ystore.db")) ||
		!strings.Contains(line, `"tenant":"`+LogID(h.idKey, user)+`"`) {
		t.Fatalf("tenant log line %s: want the pseudonym and {username} in place of %s", line, user)
	}
	if _, err := h.tenant(t.Context(), user); err != nil {
		t.Fatal(err)
	}
	var naming []string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, user) {
			naming = append(naming, l)
		}
	}
	if len(naming) != 1 || !strings.Contains(naming[0], `"msg":"tenant started"`) || !strings.Contains(naming[0], `"level":"DEBUG"`) {
		t.Fatalf("lines naming %s: %q, want the one debug line of the tenant's start", user, naming)
	}
}

// TestHubUserStoreBound: a user's rooms take hub.max_rooms_per_user,
// hub.max_store_bytes_per_user and hub.max_memory_per_user (issue 39, B-F3 and pass 5
// F1), not single mode's store.max_rooms, store.max_bytes and store.max_memory,
// whichever the backend: a Postgres user's owner-filtered rooms go through the same
// rooms.Set.
func TestHubUserStoreBound(t *testing.T) {
	for _, backend := range []config.Backend{config.BackendSQLite, config.BackendPostgres} {
		for _, tt := range []struct {
			rooms         int
			bytes, memory int64
		}{{rooms.DefaultMaxRooms, rooms.DefaultMaxBytes, rooms.DefaultMaxMemory}, {7, 1234, 5678}} {
			h := testHub(t, t.TempDir())
			h.cfg.Hub.Stores.Backend = backend
			h.cfg.Store.MaxRooms, h.cfg.Store.MaxBytes, h.cfg.Store.MaxMemory = 0, 0, 0 // single mode's: none
			if tt.rooms != rooms.DefaultMaxRooms {
				h.cfg.Hub.MaxRoomsPerUser, h.cfg.Hub.MaxStoreBytesPerUser, h.cfg.Hub.MaxMemoryPerUser = tt.rooms, tt.bytes, tt.memory
			}
			cfg, err := h.userConfig("alice")
			if err != nil {
				t.Fatal(err)
			}
			if rc := cfg.RoomsConfig(config.Obs{}); rc.MaxRooms != tt.rooms || rc.MaxBytes != tt.bytes || rc.MaxMemory != tt.memory {
				t.Errorf("%s: alice's rooms bounded by %d rooms, %d bytes, %d of memory; want %d, %d, %d",
					backend, rc.MaxRooms, rc.MaxBytes, rc.MaxMemory, tt.rooms, tt.bytes, tt.memory)
			}
			if sc := cfg.ServerConfig("v", config.Obs{}); sc.MaxReadBytes != tt.memory {
				t.Errorf("%s: alice's reads build %d bytes at once, want her memory bound %d", backend, sc.MaxReadBytes, tt.memory)
			}
			// Her store's reader follows the rooms the Set may hold (part 2).
			if sc, pc := cfg.Store.SQLiteTailer(config.Obs{}), cfg.Store.PostgresTailer(config.Obs{}); sc.MaxRooms != tt.rooms || pc.MaxRooms != tt.rooms {
				t.Errorf("%s: alice's store read bounded by %d rooms (sqlite), %d (postgres); want %d", backend, sc.MaxRooms, pc.MaxRooms, tt.rooms)
			}
		}
	}
}

// TestHubUserSessionsShare: a user's server takes her share of sessions (issue 39,
// item 9): hub.max_connections_per_user, else an eighth of server.max_connections, or
// server.limits.max_sessions if lower.
func TestHubUserSessionsShare(t *testing.T) {
	for _, tt := range []struct {
		perUser, maxConns, maxSessions, want int
	}{
		{0, 1024, 1024, 128},
		{0, 64, 1024, 8},
		{20, 64, 1024, 20},
		{20, 64, 5, 5},
	} {
		h := testHub(t, t.TempDir())
		h.cfg.Hub.MaxConnectionsPerUser, h.cfg.Server.MaxConnections, h.cfg.Server.Limits.MaxSessions = tt.perUser, tt.maxConns, tt.maxSessions
		cfg, err := h.userConfig("alice")
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Server.Limits.MaxSessions; got != tt.want {
			t.Errorf("per user %d, max_connections %d, max_sessions %d: alice's max_sessions %d, want %d",
				tt.perUser, tt.maxConns, tt.maxSessions, got, tt.want)
		}
	}
}

// A tenant slow to answer (its health asked while a huge notebook file of its user's is
// being read holds its rooms: red team of issue 39, pass 5) holds up no other user: while
// the hub's users gauge (asked by each /metrics scrape) and its reaper wait for it,
// another user's first request is served.
func TestHubSlowTenantHoldsUpNoOne(t *testing.T) {
	dir := t.TempDir()
	h := testHub(t, dir)
	writeStore(t, dir, "bob", "b.ipynb", ysessions.Load(t, "s0001.json.gz").UpdateBytes())
	stuck, asked := make(chan struct{}), make(chan struct{}, 1)
	defer close(stuck)
	loaded := make(chan struct{})
	close(loaded)
	slow := &tenant{user: "mallory", loaded: loaded, done: make(chan struct{}), cancel: func() {},
		in: &instance{health: &Health{status: func() ystore.Status { return ystore.Status{Reachable: true} },
			degraded: func() []rooms.Degradation { asked <- struct{}{}; <-stuck; return nil }}}}
	h.mu.Lock()
	h.tenants["mallory"] = slow
	h.mu.Unlock()
	go h.users() // a scrape of /metrics
	testenv.Receive(t, testenv.Wait, "mallory's tenant asked for its health", asked)
	served := make(chan error, 1)
	go func() { _, err := h.tenant(t.Context(), "bob"); served <- err }()
	if err := testenv.Receive(t, testenv.Wait, "bob's first request while mallory's tenant is slow to answer", served); err != nil {
		t.Fatal(err)
	}
}
