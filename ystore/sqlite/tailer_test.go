package sqlite

import (
	"context"
	"database/sql"
	"fmt"
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

const (
	roomA = ".notebook:0f3c3a4e-6c0f-4a8e-9f3e-2b7d3c1a9e11.y"
	roomB = ".notebook:7b1d2c3e-1111-4a8e-9f3e-2b7d3c1a9e22.y"
	roomC = ".file:93e0aa4e-2222-4a8e-9f3e-2b7d3c1a9e33.y"
)

// env is one scenario's store, tailer and sink.
type env struct {
	t    *testing.T
	path string
	tl   *Tailer
	s    *sink
}

func (e *env) writer() *model { return newModel(startWriter(e.t, e.path)) }

func (e *env) run() { runTailer(e.t, e.tl, e.s.deliver) }

// loaded applies a fresh Load to token documents.
func (e *env) loaded() string {
	e.t.Helper()
	events, err := e.tl.Load(context.Background())
	if err != nil {
		e.t.Fatalf("Load: %v", err)
	}
	s := newSink()
	for _, ev := range events {
		if ev.Kind != ystore.EventReset {
			e.t.Fatalf("Load delivered %v for %s, want reset", ev.Kind, ev.Room)
		}
	}
	s.deliver(context.Background(), events)
	return s.String()
}

func TestScenarios(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(e *env)
	}{
		{"steady", func(e *env) {
			m := e.writer()
			for i := range 10 {
				m.write([]string{roomA, roomB, roomC}[i%3], "s"+string(rune('a'+i)))
			}
			e.run()
			converge(e.t, e.s, m)
			for _, room := range []string{roomA, roomB, roomC} {
				if e.s.events[0].Kind != ystore.EventReset || e.s.kinds(room)[ystore.EventReset] != 1 {
					e.t.Fatalf("room %s: want one reset first, got %v", room, e.s.kinds(room))
				}
			}
			for i := range 30 {
				m.write([]string{roomA, roomB}[i%2], "t"+string(rune('a'+i)))
			}
			converge(e.t, e.s, m)
			// Status is recorded once the sink has returned: caught up, the lag is 0.
			testenv.Eventually(e.t, testenv.Wait, "40 rows tailed", func() bool { return e.tl.Status().RowsTailed == 40 })
			st := e.tl.Status()
			if !st.Reachable || st.RowsTailed != 40 || st.Rooms != 3 || st.LastError != "" ||
				st.LastRowAt.IsZero() || st.Lag != 0 || st.MaxReadTx <= 0 {
				e.t.Fatalf("status %+v", st)
			}
		}},
		{"store appears later", func(e *env) {
			e.run()
			testenv.Eventually(e.t, testenv.Wait, "the store awaited", func() bool {
				st := e.tl.Status()
				return !st.Reachable && st.Absent && st.LastError == ""
			})
			m := e.writer()
			m.write(roomA, "a1")
			m.write(roomB, "b1")
			converge(e.t, e.s, m)
			testenv.Eventually(e.t, testenv.Wait, "reachable status", func() bool {
				st := e.tl.Status()
				return st.Reachable && !st.Absent
			})
		}},
		{"checkpoint", func(e *env) {
			m := e.writer()
			for _, tok := range []string{"a1", "a2", "a3"} {
				m.write(roomA, tok)
			}
			m.write(roomB, "b1")
			e.run()
			converge(e.t, e.s, m)
			state := m.docs.merged(roomA)
			m.docs.apply(roomA, tokens("a4"))
			m.w.Do(map[string]any{"op": "checkpoint", "room": roomA, "state": b64(state), "update": b64(tokens("a4"))})
			m.write(roomA, "a5")
			converge(e.t, e.s, m)
			events, err := e.tl.Load(context.Background())
			if err != nil {
				e.t.Fatal(err)
			}
			a := events[0]
			if a.Room != roomA || a.Rows[0].ID != 0 || string(a.Rows[0].Update) != string(state) || len(a.Rows) != 3 {
				e.t.Fatalf("load of %s = %+v, want the checkpoint then a4, a5", roomA, a)
			}
			if got := e.loaded(); got != m.docs.String() {
				e.t.Fatalf("Load = %s, want %s", got, m.docs.String())
			}
		}},
		{"squash", func(e *env) {
			m := e.writer()
			var cutoff float64
			for i, tok := range []string{"a1", "a2", "a3"} {
				r := m.write(roomA, tok)
				m.write(roomB, "b"+tok)
				if i == 1 {
					cutoff = r.TS
				}
			}
			e.run()
			converge(e.t, e.s, m)
			m.docs.apply(roomA, tokens("a4"))
			m.w.Do(map[string]any{"op": "squash", "room": roomA, "merged": b64(tokens("a1", "a2")), "cutoff": cutoff, "update": b64(tokens("a4"))})
			m.write(roomB, "b9")
			converge(e.t, e.s, m)
			if got := e.loaded(); got != m.docs.String() {
				e.t.Fatalf("Load = %s, want %s", got, m.docs.String())
			}
		}},
		{"rowid reuse", func(e *env) {
			m := e.writer()
			m.write(roomB, "b1")
			var top reply
			for _, tok := range []string{"a1", "a2", "a3", "a4", "a5"} {
				top = m.write(roomA, tok)
			}
			e.run()
			converge(e.t, e.s, m)
			m.docs.apply(roomA, tokens("a6"))
			r := m.w.Do(map[string]any{"op": "squash", "room": roomA, "merged": b64(m.docs.merged(roomA)), "cutoff": 1e12, "update": b64(tokens("a6"))})
			if r.MergedRowID > top.RowID || r.RowID > top.RowID {
				e.t.Fatalf("squash did not reuse rowids: merged %d, update %d, old top %d", r.MergedRowID, r.RowID, top.RowID)
			}
			converge(e.t, e.s, m)
			if n := promtest.ToFloat64(e.tl.m.resyncs.WithLabelValues(reasonHistory)); n < 1 {
				e.t.Fatalf("history resyncs = %v, want at least 1", n)
			}
			if n := e.s.kinds(roomB)[ystore.EventUpdates]; n != 0 {
				e.t.Fatalf("unchanged room %s re-delivered %d times", roomB, n)
			}
			m.write(roomA, "a7")
			m.write(roomB, "b2")
			converge(e.t, e.s, m)
		}},
		{"cleanup", func(e *env) {
			m := e.writer()
			m.write(roomA, "a1")
			m.w.Do(map[string]any{"op": "checkpoint", "room": roomA, "state": b64(m.docs.merged(roomA))})
			for _, tok := range []string{"b1", "b2", "b3"} {
				m.write(roomB, tok)
			}
			e.run()
			converge(e.t, e.s, m)
			m.w.Do(map[string]any{"op": "cleanup", "room": roomB, "merged": b64(m.docs.merged(roomB))})
			m.write(roomB, "b4")
			converge(e.t, e.s, m)
			events, err := e.tl.Load(context.Background())
			if err != nil {
				e.t.Fatal(err)
			}
			for _, ev := range events {
				if ev.Rows[0].ID == 0 {
					e.t.Fatalf("room %s still loads a checkpoint after cleanup", ev.Room)
				}
			}
			if got := e.loaded(); got != m.docs.String() {
				e.t.Fatalf("Load = %s, want %s", got, m.docs.String())
			}
		}},
		{"rename", func(e *env) {
			m := e.writer()
			m.write(roomA, "a1")
			m.write(roomB, "b1")
			e.run()
			converge(e.t, e.s, m)
			m.w.Do(map[string]any{"op": "rename"})
			m.docs = docs{}
			converge(e.t, e.s, m)
			m.write(roomC, "c1")
			m.write(roomA, "new-a1")
			converge(e.t, e.s, m)
			if n := e.s.kinds(roomB)[ystore.EventRemoved]; n != 1 {
				e.t.Fatalf("room %s removed %d times, want 1", roomB, n)
			}
			if _, err := os.Stat(strings.TrimSuffix(e.path, ".db") + "(1).db"); err != nil {
				e.t.Fatalf("renamed store: %v", err)
			}
		}},
		{"delete and recreate", func(e *env) {
			m := e.writer()
			m.write(roomA, "a1")
			e.run()
			converge(e.t, e.s, m)
			m.w.Do(map[string]any{"op": "delete"})
			testenv.Eventually(e.t, testenv.Wait, "unreachable status", func() bool { return !e.tl.Status().Reachable })
			converge(e.t, e.s, m) // the last state stays served
			m.docs = docs{}
			m.write(roomB, "b1")
			converge(e.t, e.s, m)
			testenv.Eventually(e.t, testenv.Wait, "reachable status", func() bool { return e.tl.Status().Reachable })
			if n := e.s.kinds(roomA)[ystore.EventRemoved]; n != 1 {
				e.t.Fatalf("room %s removed %d times, want 1", roomA, n)
			}
		}},
	}
	for _, mode := range modes {
		for _, sc := range scenarios {
			t.Run(mode.name+"/"+sc.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
				cfg := mode.cfg(path)
				cfg.Registerer = prometheus.NewRegistry()
				sc.run(&env{t: t, path: path, tl: newTailer(t, cfg), s: newSink()})
			})
		}
	}
}

// TestChunks reads a store through tiny row chunks, rows larger than a chunk's byte
// budget, and a checkpoint read in several pieces.
func TestChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".jupyter_ystore.db")
	m := newModel(startWriter(t, path))
	big := func(tag string) string { return tag + strings.Repeat("x", chunkBytes+1000) }
	for i := range 7 {
		m.write(roomA, fmt.Sprintf("a%d", i))
		m.write(roomB, big(fmt.Sprintf("b%d", i)))
	}
	state := m.docs.merged(roomA)
	m.docs.apply(roomA, tokens(big("ckpt")))
	state = append(state, tokens("", big("ckpt"))...)
	m.w.Do(map[string]any{"op": "checkpoint", "room": roomA, "state": b64(state), "update": b64(tokens("a7"))})
	m.docs.apply(roomA, tokens("a7"))
	// Loaded whole, and streamed to the sink.
	var tl *Tailer
	var sinks []*sink
	for _, stream := range []bool{false, true} {
		tl = newTailer(t, Config{Path: path, ChunkRows: 2, StreamLoads: stream})
		sinks = append(sinks, newSink())
		runTailer(t, tl, sinks[len(sinks)-1].deliver)
		converge(t, sinks[len(sinks)-1], m)
	}
	for i := range 5 {
		m.write(roomB, big(fmt.Sprintf("c%d", i)))
		m.write(roomA, fmt.Sprintf("d%d", i))
	}
	for _, s := range sinks {
		converge(t, s, m)
	}
	events, err := tl.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ck := events[0].Rows[0]; ck.ID != 0 || len(ck.Update) != len(state) {
		t.Fatalf("checkpoint of %d bytes loaded as %d bytes (id %d)", len(state), len(ck.Update), ck.ID)
	}
	loaded := newSink()
	loaded.deliver(context.Background(), events)
	if loaded.String() != m.docs.String() {
		t.Fatal("Load differs from the writer's documents")
	}
}

// insertRow appends a row stamped ts through a connection of its own, as a writer whose
// clock is behind, or an import of old updates, would.
func insertRow(t *testing.T, path, room string, update []byte, ts time.Time) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("INSERT INTO yupdates VALUES (?, ?, ?, ?)", room, update, []byte{}, float64(ts.UnixMicro())/1e6); err != nil {
		t.Fatal(err)
	}
}

// A row stamped an hour ago, once tailed and applied, is no lag: the tailer idle and
// caught up reports 0, not the row's age until the next row.
func TestOldRowAppliedIsNoLag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	m := newModel(startWriter(t, path))
	m.write(roomA, "a1")
	tl, s := tailing(t, modes[0].cfg(path), m)
	insertRow(t, path, roomA, tokens("old"), time.Now().Add(-time.Hour))
	m.docs.apply(roomA, tokens("old"))
	converge(t, s, m)
	testenv.Eventually(t, testenv.Wait, "the old row tailed", func() bool { return tl.Status().RowsTailed == 2 })
	if st := tl.Status(); st.Lag != 0 || !st.Reachable {
		t.Fatalf("status %+v: want lag 0 once the old row is applied", st)
	}
}
