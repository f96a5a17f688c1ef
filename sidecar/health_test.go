package sidecar

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/demo"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite/sqlitetest"
)

// tailSQLite runs a SQLite tailer of path, discarding what it delivers, until the test
// ends, and returns the health over its status.
func tailSQLite(t *testing.T, path string) (*sqlite.Tailer, *Health) {
	t.Helper()
	tl, err := sqlite.New(sqlite.Config{Path: path, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx, func(context.Context, []ystore.Event) error { return nil }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return tl, NewHealth(tl.Status, func() []rooms.Degradation { return nil }, nil, nil, 5*time.Second)
}

// A named pipe at the store path is not ready, and /readyz says why.
func TestHealthOfAFIFOAtTheStorePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	_, h := tailSQLite(t, path)
	testenv.Eventually(t, testenv.Wait, "the store reported unreachable", func() bool { return h.Check().LastError != "" })
	r := h.Check()
	if r.Ready || r.Reachable || !slices.Contains(r.Reasons, "store not reachable") ||
		!strings.Contains(r.LastError, "not a regular file") || !strings.Contains(r.LastError, "named pipe") {
		t.Fatalf("readiness %+v: want not reachable, saying the path is a named pipe", r)
	}
}

// A store not written yet (a server writes none until a notebook is opened) is ready,
// /readyz answering 200 with the state in its body; once written it is read, and once
// read, its disappearance is a fault (503).
func TestHealthOfAStoreNotWrittenYet(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
	tl, h := tailSQLite(t, path)
	testenv.Eventually(t, testenv.Wait, "the store awaited", func() bool { return tl.Status().Absent })
	code, r := readyz(t, h)
	if code != http.StatusOK || !r.Ready || r.State != StateWaiting || len(r.Reasons) > 0 || r.Loaded || r.Reachable {
		t.Fatalf("/readyz %d %+v of a store not written yet: want 200, ready, state %q", code, r, StateWaiting)
	}
	w := sqlitetest.Start(t, path)
	w.Do(map[string]any{"op": "write", "room": "r", "update": base64.StdEncoding.EncodeToString([]byte("new"))})
	testenv.Eventually(t, testenv.Wait, "the store read", func() bool { return h.Check().Loaded })
	if code, r := readyz(t, h); code != http.StatusOK || !r.Ready || r.State != "" {
		t.Fatalf("/readyz %d %+v once the store is read: want 200, ready, no state", code, r)
	}
	if err := os.Rename(path, path+".aside"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.Wait, "the store gone reported", func() bool { return !h.Check().Reachable })
	if code, r := readyz(t, h); code != http.StatusServiceUnavailable || r.Ready || r.State != "" || !slices.Contains(r.Reasons, "store not reachable") {
		t.Fatalf("/readyz %d %+v once the store read is gone: want 503, store not reachable", code, r)
	}
}

// readyz asks h's /readyz and returns the status code and the body.
func readyz(t *testing.T, h *Health) (int, Readiness) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.Ready().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var r Readiness
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("/readyz body %q: %v", rec.Body.String(), err)
	}
	return rec.Code, r
}

// A row stamped long ago, once applied, keeps no lag: the tailer idle and caught up is
// ready with a lag of 0.
func TestHealthOldRowAppliedIsReady(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
	w := sqlitetest.Start(t, path)
	w.Do(map[string]any{"op": "write", "room": "r", "update": base64.StdEncoding.EncodeToString([]byte("new"))})
	tl, h := tailSQLite(t, path)
	testenv.Eventually(t, testenv.Wait, "ready", func() bool { return h.Check().Ready })
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := float64(time.Now().Add(-time.Hour).UnixMicro()) / 1e6
	if _, err := db.Exec("INSERT INTO yupdates VALUES ('r', x'6f6c64', x'', ?)", old); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.Wait, "the old row applied", func() bool { return tl.Status().RowsTailed == 2 })
	if r := h.Check(); !r.Ready || r.LagSeconds != 0 {
		t.Fatalf("readiness %+v: want ready with no lag once the old row is applied", r)
	}
}

// In hub mode a user whose store is unreachable, or who is still loading (or stuck
// loading), is not counted ready; one whose store is not written yet is. The counts
// are in /metrics; /readyz, which anyone reaches through the Hub's proxy, tells none.
func TestHubReadyCountsUnreachableAndLoadingUsers(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tl, broken := tailSQLite(t, fifo)
	testenv.Eventually(t, testenv.Wait, "the store reported unreachable", func() bool { return !tl.Status().LastErrorAt.IsZero() })
	loaded := make(chan struct{})
	close(loaded)
	good := NewHealth(func() ystore.Status { return ystore.Status{Reachable: true, LastReadAt: time.Now()} },
		func() []rooms.Degradation { return nil }, nil, nil, 5*time.Second)
	_, waiting := tailSQLite(t, filepath.Join(t.TempDir(), ".jupyter_ystore.db"))
	testenv.Eventually(t, testenv.Wait, "the store awaited", func() bool { return waiting.Check().State == StateWaiting })
	h := &hub{tenants: map[string]*tenant{
		"ok":      {in: &instance{health: good}, loaded: loaded},
		"new":     {in: &instance{health: waiting}, loaded: loaded},
		"fifo":    {in: &instance{health: broken}, loaded: loaded},
		"loading": {in: &instance{health: good}, loaded: make(chan struct{})},
	}}
	reg := prometheus.NewPedanticRegistry()
	var err error
	if h.m, err = newHubMetrics(reg, h.users); err != nil {
		t.Fatal(err)
	}
	active, unready := testenv.Metric(t, reg, "jupyter_mcp_sidecar_hub_users_active"), testenv.Metric(t, reg, "jupyter_mcp_sidecar_hub_users_unready")
	if active != 4 || unready != 2 {
		t.Fatalf("hub metrics: %v users active, %v unready; want 4 active, 2 of them unready", active, unready)
	}
	rec := httptest.NewRecorder()
	h.ready().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || len(body) != 1 || body["ready"] != true {
		t.Fatalf("hub /readyz %d %s: want 200 {\"ready\":true}, no count of users", rec.Code, rec.Body.String())
	}
}

// drain returns what it waits for, or the drain deadline's error d after ctx is done
// when what it waits for never returns (a goroutine blocked in a system call).
func TestDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		boom := errors.New("boom")
		if err := drain(ctx, time.Second, func() error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("drain = %v, want what wait returned", err)
		}
		stuck := make(chan struct{})
		defer close(stuck)
		go func() { time.Sleep(time.Minute); cancel() }()
		start := time.Now()
		err := drain(ctx, 3*time.Second, func() error { <-stuck; return nil })
		if !errors.Is(err, ErrDrainTimeout) || time.Since(start) != time.Minute+3*time.Second {
			t.Fatalf("drain = %v after %v, want ErrDrainTimeout 3s after ctx ended", err, time.Since(start))
		}
	})
}

// Each cause of a degraded room is a reason of its own, and /readyz lists the rooms and why.
func TestHealthDegradedRooms(t *testing.T) {
	const (
		bad      = "rooms degraded by undecodable rows"
		diverged = "rooms whose live notebook differed from the server's saved file (served from the file)"
		gap      = "rooms waiting for updates missing from the store (served from the file)"
	)
	status := func() ystore.Status { return ystore.Status{Reachable: true, LastReadAt: time.Now()} }
	for _, tc := range []struct {
		name    string
		rooms   []rooms.Degradation
		reasons []string
	}{
		{name: "none"},
		{name: "an undecodable row", rooms: []rooms.Degradation{{Room: "a", BadRows: 1}}, reasons: []string{bad}},
		{name: "diverged", rooms: []rooms.Degradation{{Room: "a", Diverged: true}}, reasons: []string{diverged}},
		{name: "a gap", rooms: []rooms.Degradation{{Room: "a", Gaps: []rooms.Gap{{Client: 7, From: 3, To: 5}}}}, reasons: []string{gap}},
		{name: "all three", rooms: []rooms.Degradation{{Room: "a", BadRows: 2, Diverged: true}, {Room: "b", Gaps: []rooms.Gap{}}},
			reasons: []string{bad, diverged, gap}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHealth(status, func() []rooms.Degradation { return tc.rooms }, nil, nil, 5*time.Second)
			rec := httptest.NewRecorder()
			h.Ready().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			var r Readiness
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, d := range tc.rooms {
				keys = append(keys, d.Room)
			}
			if r.Ready != (len(tc.rooms) == 0) || (rec.Code == http.StatusOK) != r.Ready || !slices.Equal(r.Reasons, tc.reasons) ||
				!slices.Equal(r.DegradedRooms, keys) || len(r.Degradations) != len(tc.rooms) {
				t.Fatalf("/readyz %d %s; want reasons %q for rooms %v", rec.Code, rec.Body, tc.reasons, keys)
			}
			if len(tc.rooms) > 0 && !strings.Contains(rec.Body.String(), `"degradations":[{"room":"a"`) {
				t.Fatalf("/readyz %s does not say why each room is degraded", rec.Body)
			}
		})
	}
}

// During a cold load /readyz says the store is loading, with the rows loaded of how many
// and the rooms, rather than unreachable; once loaded it is ready. The sink is the hook:
// readiness is checked while it holds the load's rows (serve's batches) or reads them
// (ship's stream).
func TestHealthDuringColdLoad(t *testing.T) {
	const nRooms, perRoom = 3, 5
	path := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range demo.StoreSchema {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for i := range nRooms * perRoom {
		if _, err := db.Exec("INSERT INTO yupdates VALUES (?, x'00', x'', ?)", fmt.Sprintf("room-%d", i%nRooms), float64(i)); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream %v", stream), func(t *testing.T) {
			tl, err := sqlite.New(sqlite.Config{Path: path, PollInterval: 20 * time.Millisecond, ChunkRows: 2, StreamLoads: stream})
			if err != nil {
				t.Fatal(err)
			}
			h := NewHealth(tl.Status, func() []rooms.Degradation { return nil }, nil, nil, 5*time.Second)
			var during []Readiness
			first := true
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- tl.Run(ctx, func(ctx context.Context, events []ystore.Event) error {
					if !first {
						return nil
					}
					first = false
					during = append(during, h.Check())
					for _, e := range events {
						if err := e.Each(ctx, func([]ystore.Row) error { during = append(during, h.Check()); return nil }); err != nil {
							return err
						}
					}
					return nil
				})
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			testenv.Eventually(t, testenv.Wait, "ready", func() bool { return h.Check().Ready })
			if r := h.Check(); r.Loading != nil {
				t.Errorf("loaded, readiness %+v: want no loading", r)
			}
			last := during[len(during)-1]
			for _, r := range during {
				l := r.Loading
				if r.Ready || l == nil || l.TotalRows != nRooms*perRoom || l.Rooms != nRooms ||
					!slices.Contains(r.Reasons, fmt.Sprintf("store loading: %d of %d rows", l.Rows, l.TotalRows)) ||
					slices.Contains(r.Reasons, "store not reachable") {
					t.Fatalf("readiness during the load %+v (loading %+v): want not ready, loading %d rows of %d rooms, reachable", r, l, nRooms*perRoom, nRooms)
				}
			}
			if stream && last.Loading.Rows == 0 {
				t.Errorf("readiness while the stream's last chunk is read %+v: want the rows read before it counted", last.Loading)
			}
		})
	}
}
