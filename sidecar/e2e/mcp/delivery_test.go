package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// rpcStatus posts one JSON-RPC message as a 2025-11-25 client of session and returns
// the HTTP status and the response's error object, if any.
func rpcStatus(t *testing.T, url, session string, msg map[string]any) (int, map[string]any) {
	t.Helper()
	return sidecartest.RPCStatusAs(t, url, session, "Bearer "+sidecartest.Token, msg)
}

// getStatus sends a GET to the endpoint with the given session id and returns its status.
func getStatus(t *testing.T, url, session string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+sidecartest.Token)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Accept", "text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Wait)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDeliveryIsNeverSilent checks, on the real binary, that a client is either served
// or told: sessions that are not live are 404, GET streams resume without losing a
// notification, subscriptions outside the server's resources are refused, and the gate
// withholds a resource on every surface.
func TestDeliveryIsNeverSilent(t *testing.T) {
	steps := sidecartest.Session(t)
	dir := t.TempDir()
	w := sidecartest.StartPreloaded(t, filepath.Join(dir, ".jupyter_ystore.db"), steps)
	sc := sidecartest.StartSidecar(t, dir, sidecartest.Options{Extra: fmt.Sprintf("notebooks: {%s: %s}\n", sidecartest.NbName, sidecartest.NbPath)})
	sc.WaitHTTP("/readyz", http.StatusOK)

	t.Run("sessions that are not live are 404", func(t *testing.T) {
		r := sidecartest.DialRaw(t, sc.MCPURL())
		session := r.Session
		r.Close() // DELETE
		if got := getStatus(t, sc.MCPURL(), session); got != http.StatusNotFound {
			t.Errorf("GET of a deleted session: %d, want 404", got)
		}
		if got := getStatus(t, sc.MCPURL(), "mcp-session-5f0c4bde-1f3e-4a57-9d0b-0c1d2e3f4a5b"); got != http.StatusNotFound {
			t.Errorf("GET of an unknown session: %d, want 404", got)
		}
		if got, _ := rpcStatus(t, sc.MCPURL(), session, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}); got != http.StatusNotFound {
			t.Errorf("POST of a deleted session: %d, want 404", got)
		}
		before := sc.Metric("jupyter_mcp_sidecar_mcp_sessions")
		for range 200 {
			if got := getStatus(t, sc.MCPURL(), ""); got != http.StatusBadRequest {
				t.Fatalf("GET without a session id: %d, want 400", got)
			}
		}
		if after := sc.Metric("jupyter_mcp_sidecar_mcp_sessions"); after != before {
			t.Fatalf("200 GETs without a session id: sessions %v → %v", before, after)
		}
	})

	t.Run("resumed streams lose nothing", func(t *testing.T) {
		// Every notification the server hands this session must reach the client once,
		// however often its stream drops: the oracle is the server's own count of the
		// notifications it sent (the only session subscribed), not the number of edits,
		// since on a loaded machine one edit's rows may land in two debounce windows.
		r := sidecartest.DialRaw(t, sc.MCPURL())
		r.Subscribe(sidecartest.NbURI)
		_ = r.Stream.Close() // this test reads the session's stream itself
		r.Stream = nil
		const sent = "jupyter_mcp_sidecar_mcp_notifications_sent_total"
		sentBefore := sc.Metric(sent)
		got := resumingStream(t, sc.MCPURL(), r.Session)

		var edits []int
		for i := sidecartest.Preloaded; i < len(steps) && len(edits) < 12; i++ {
			if !steps[i].Changes.Empty() {
				edits = append(edits, i)
			}
		}
		resumedBefore := sc.Metric("jupyter_mcp_sidecar_mcp_streams_resumed_total")
		last := sidecartest.Preloaded
		for _, i := range edits {
			for _, s := range steps[last : i+1] {
				w.Write(s.Update)
			}
			last = i + 1
			time.Sleep(time.Second) // the pace of the edits (past the debounce), not a wait
		}
		testenv.Eventually(t, testenv.Wait, "every notification sent received", func() bool {
			n := sc.Metric(sent) - sentBefore
			return n >= float64(len(edits)) && float64(got.count()) == n
		}, func() string {
			return fmt.Sprintf("sent %v, received %d (%v), drops %d", sc.Metric(sent)-sentBefore, got.count(), got.ids(), got.drops.Load())
		})
		got.stop()
		if n, ids := sc.Metric(sent)-sentBefore, got.ids(); float64(len(ids)) != n || len(ids) != len(unique(ids)) {
			t.Fatalf("server sent %v notifications; the client received %d: ids %v", n, len(ids), ids)
		}
		if resumed := sc.Metric("jupyter_mcp_sidecar_mcp_streams_resumed_total") - resumedBefore; resumed < 1 {
			t.Fatalf("the stream resumed %v times", resumed)
		}
		t.Logf("%d edits, %d notifications, %d drops", len(edits), got.count(), got.drops.Load())
	})

	t.Run("only the server's resources can be subscribed", func(t *testing.T) {
		r := sidecartest.DialRaw(t, sc.MCPURL())
		for _, tt := range []struct {
			uri  string
			code float64
		}{
			{"file:///etc/passwd", -32002},
			{"notebook://" + sidecartest.NbName + "/" + strings.Repeat("x", 3000), -32602},
		} {
			_, e := rpcStatus(t, sc.MCPURL(), r.Session, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": map[string]any{"uri": tt.uri}})
			if e == nil || e["code"] != tt.code {
				t.Errorf("subscribe %.40q: error %v, want code %v", tt.uri, e, tt.code)
			}
		}
		if refused := sc.Metric("jupyter_mcp_sidecar_mcp_limit_refusals_total"); refused < 2 {
			t.Errorf("limit_refusals_total = %v, want ≥ 2", refused)
		}
	})
}

// TestGateOnEverySurface withholds the notebook template on the real binary: it is not
// listed, its template is not offered, and it cannot be subscribed to.
func TestGateOnEverySurface(t *testing.T) {
	steps := sidecartest.Session(t)
	dir := t.TempDir()
	sidecartest.StartPreloaded(t, filepath.Join(dir, ".jupyter_ystore.db"), steps)
	sc := sidecartest.StartSidecar(t, dir, sidecartest.Options{Extra: fmt.Sprintf("notebooks: {%s: %s}\ngate: {name: withhold, options: {templates: [\"notebook://{name}\"]}}\n", sidecartest.NbName, sidecartest.NbPath)})
	r := sidecartest.DialRaw(t, sc.MCPURL())
	list, _ := r.Call("resources/list", map[string]any{})
	if b, _ := json.Marshal(list); strings.Contains(string(b), sidecartest.NbURI) {
		t.Errorf("resources/list lists the withheld %s: %s", sidecartest.NbURI, b)
	}
	tmpl, _ := r.Call("resources/templates/list", map[string]any{})
	if b, _ := json.Marshal(tmpl); strings.Contains(string(b), `"notebook://{name}"`) {
		t.Errorf("resources/templates/list offers the withheld template: %s", b)
	}
	_, e := rpcStatus(t, sc.MCPURL(), r.Session, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": map[string]any{"uri": sidecartest.NbURI}})
	if e == nil || e["code"] != float64(-32010) {
		t.Errorf("subscribe to the withheld %s: %v, want code -32010", sidecartest.NbURI, e)
	}
	// The cell template is still served, and subscribable.
	_, e = rpcStatus(t, sc.MCPURL(), r.Session, map[string]any{"jsonrpc": "2.0", "id": 4, "method": "resources/subscribe", "params": map[string]any{"uri": sidecartest.CellURI(sidecartest.NbName, "x")}})
	if e != nil {
		t.Errorf("subscribe to a cell: %v", e)
	}
}

// resuming is a session's GET stream that a goroutine drops at random and resumes with
// Last-Event-ID, recording the ids of the notifications it receives.
type resuming struct {
	drops  atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	received []string // event ids, in arrival order
}

func resumingStream(t *testing.T, url, session string) *resuming {
	ctx, cancel := context.WithCancel(context.Background())
	r := &resuming{cancel: cancel}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		lastID := ""
		for ctx.Err() == nil {
			connCtx, drop := context.WithTimeout(ctx, time.Duration(500+rand.IntN(1500))*time.Millisecond)
			req, _ := http.NewRequestWithContext(connCtx, http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer "+sidecartest.Token)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", session)
			if lastID != "" {
				req.Header.Set("Last-Event-ID", lastID)
			}
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				if resp.StatusCode != http.StatusOK {
					t.Errorf("GET stream (Last-Event-ID %q): %s", lastID, resp.Status)
					drop()
					return
				}
				readSSE(resp.Body, func(id, data string) {
					if strings.Contains(data, `"notifications/resources/updated"`) {
						r.mu.Lock()
						r.received = append(r.received, id)
						r.mu.Unlock()
					}
					if id != "" {
						lastID = id
					}
				})
				resp.Body.Close()
			}
			drop()
			if ctx.Err() == nil {
				r.drops.Add(1)
				sleepCtx(ctx, time.Duration(20+rand.IntN(280))*time.Millisecond) // offline a while
			}
		}
	}()
	return r
}

// count returns the number of notifications received so far.
func (r *resuming) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.received)
}

// ids returns the event ids of the notifications received so far.
func (r *resuming) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.received)
}

// stop ends the stream.
func (r *resuming) stop() {
	r.cancel()
	r.wg.Wait()
}

// unique returns ids without repetitions.
func unique(ids []string) []string {
	s := slices.Clone(ids)
	slices.Sort(s)
	return slices.Compact(s)
}

// TestPublisherHealth checks on the real binary that a publisher failing every delivery
// makes /readyz not ready, with the reason, and that it is ready again once deliveries
// succeed.
func TestPublisherHealth(t *testing.T) {
	steps := sidecartest.Session(t)
	var failing atomic.Bool
	failing.Store(true)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if failing.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	dir := t.TempDir()
	w := sidecartest.StartPreloaded(t, filepath.Join(dir, ".jupyter_ystore.db"), steps)
	sc := sidecartest.StartSidecar(t, dir, sidecartest.Options{Extra: fmt.Sprintf("publisher: {name: webhook, options: {url: %q, max_retries: 1, backoff: 10ms}}\n", hook.URL)})
	sc.WaitHTTP("/readyz", http.StatusOK)
	next := sidecartest.Preloaded
	edit := func() {
		for ; next < len(steps); next++ {
			w.Write(steps[next].Update)
			if !steps[next].Changes.Empty() {
				next++
				return
			}
		}
		t.Fatal("no more visible edits")
	}
	edit()
	body := sc.WaitHTTP("/readyz", http.StatusServiceUnavailable)
	if !strings.Contains(body, "publisher") {
		t.Fatalf("/readyz while the webhook fails: %s", body)
	}
	if h := sc.Metric("jupyter_mcp_sidecar_publisher_healthy"); h != 0 {
		t.Fatalf("publisher_healthy = %v while failing", h)
	}
	failing.Store(false)
	edit()
	sc.WaitHTTP("/readyz", http.StatusOK)
	if h := sc.Metric("jupyter_mcp_sidecar_publisher_healthy"); h != 1 {
		t.Fatalf("publisher_healthy = %v after a delivery", h)
	}
}
