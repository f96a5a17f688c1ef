package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

const initializeBody = `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cap","version":"1"}}}`

// sdkSessions is how many 2025-11-25 sessions the registry (and so the
// jupyter_mcp_sidecar_mcp_sessions gauge) counts.
func sdkSessions(r *running) int {
	perEra, _, _ := stats(r)
	return perEra[era20251125]
}

// An initialize beyond MaxSessions is refused with 503, Retry-After and a
// JSON-RPC error, counted, and leaves no session state; ending a session lets
// the next one in; 2026-07-28 requests, which hold no session, are not refused.
func TestSessionCap(t *testing.T) {
	const max = 3
	reg := prometheus.NewRegistry()
	r := serve(t, served{Config: resources.Config{Registerer: reg}, Transport: Config{MaxSessions: max}}, newLibrary(t, testPath))
	refusals := func() float64 {
		return testenv.Sum(testenv.Gather(t, reg), "jupyter_mcp_sidecar_mcp_limit_refusals_total", "limit", limitSessions)
	}
	var sessions []string
	for range max {
		sessions = append(sessions, initialize(t, r.url))
	}
	for i := range 2 { // refused, and refused again: nothing accumulates
		resp := post(t, r.url, "", map[string]string{"Authorization": "Bearer " + testToken}, initializeBody)
		var msg struct {
			ID    float64
			Error struct {
				Code    int
				Message string
			}
		}
		_ = json.NewDecoder(resp.Body).Decode(&msg)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("initialize %d beyond the cap: %s, Retry-After %q, session %q; want 503 with Retry-After and no session",
				i+1, resp.Status, resp.Header.Get("Retry-After"), resp.Header.Get("Mcp-Session-Id"))
		}
		if msg.ID != 7 || msg.Error.Code != codeTooManySessions || !strings.Contains(msg.Error.Message, fmt.Sprint(max)) {
			t.Fatalf("initialize beyond the cap answered %+v; want id 7, code %d naming the cap", msg, codeTooManySessions)
		}
		if got := refusals(); got != float64(i+1) {
			t.Fatalf("limit_refusals_total{limit=sessions} = %v, want %d", got, i+1)
		}
		if n, ids := sdkSessions(r), liveSessions(r); n != max || ids != max {
			t.Fatalf("after a refused initialize: %d sessions, %d session ids; want %d", n, ids, max)
		}
	}
	// A 2026-07-28 request is served at the cap: it opens no session.
	modern := post(t, r.url, "", map[string]string{"Authorization": "Bearer " + testToken, "MCP-Protocol-Version": era20260728, "Mcp-Method": "tools/list"},
		`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`)
	modern.Body.Close()
	if modern.StatusCode != http.StatusOK {
		t.Fatalf("a 2026-07-28 tools/list at the session cap: %s", modern.Status)
	}
	// Ending one session frees its slot.
	if resp := do(t, http.MethodDelete, r.url, sessions[0], legacyHeaders); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %s", resp.Status)
	}
	testenv.Eventually(t, testenv.Wait, "the ended session's slot freed", func() bool { return sdkSessions(r) == max-1 })
	initialize(t, r.url)
	if got := refusals(); got != 2 {
		t.Fatalf("limit_refusals_total{limit=sessions} = %v after a session was let in, want 2", got)
	}
}

// A session idle for SessionIdleTimeout is ended: the registry and the
// sessions gauge drop it, its replay buffer is purged, its id answers 404, and
// its slot is free again.
func TestSessionIdleTimeoutReclaims(t *testing.T) {
	reg := prometheus.NewRegistry()
	lib := newLibrary(t, testPath)
	r := serve(t, served{Config: resources.Config{
		Notebooks:  map[string]string{"work": testPath},
		Registerer: reg,
	}, Transport: Config{MaxSessions: 1, SessionIdleTimeout: 300 * time.Millisecond, SessionGrace: time.Hour}}, lib)
	gauge := func() float64 {
		return testenv.Sum(testenv.Gather(t, reg), "jupyter_mcp_sidecar_mcp_sessions", "era", era20251125)
	}
	replayed := func(id string) bool {
		rs := r.tr.(*httpTransport).replay
		rs.mu.Lock()
		defer rs.mu.Unlock()
		_, ok := rs.sessions[id]
		return ok
	}
	session := initialize(t, r.url)
	if _, msg := rpc(t, r.url, session, `{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"notebook://work"}}`); msg["error"] != nil {
		t.Fatalf("subscribe: %v", msg["error"])
	}
	// An event on the GET stream fills the replay buffer; the stream closes
	// (SessionGrace is an hour) and a request arms the idle timeout.
	resp, events := openStream(t, r.url, session, "")
	waitStreams(t, r, 1)
	r.srv.NotebookChanged(testPath, ynotebook.Changes{Metadata: true}, noOrigin)
	next(t, events)
	resp.Body.Close()
	waitStreams(t, r, 0)
	if !replayed(session) || gauge() != 1 {
		t.Fatalf("before the idle timeout: replay buffer kept %v, sessions gauge %v; want true, 1", replayed(session), gauge())
	}
	if status, _ := rpc(t, r.url, session, `{"jsonrpc":"2.0","id":4,"method":"ping"}`); status != http.StatusOK {
		t.Fatalf("ping: %d", status)
	}
	testenv.Eventually(t, testenv.Wait, "the idle session reclaimed", func() bool { return sdkSessions(r) == 0 && liveSessions(r) == 0 },
		func() string { return fmt.Sprintf("%d sessions, %d ids", sdkSessions(r), liveSessions(r)) })
	if replayed(session) || gauge() != 0 {
		t.Fatalf("after the idle timeout: replay buffer kept %v, sessions gauge %v; want false, 0", replayed(session), gauge())
	}
	if _, subs, _ := stats(r); subs != 0 {
		t.Fatalf("%d subscriptions held after the idle timeout", subs)
	}
	if status, _ := rpc(t, r.url, session, `{"jsonrpc":"2.0","id":5,"method":"ping"}`); status != http.StatusNotFound {
		t.Fatalf("ping of the reclaimed session: %d, want 404", status)
	}
	initialize(t, r.url) // MaxSessions 1: the slot is free
}

// The subscribed URIs of one session are bounded in bytes as well as in
// number; a refusal is counted under its limit.
func TestSubscriptionByteBudget(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := startServer(t, resources.Config{Limits: resources.Limits{MaxSubscriptionBytes: 64}, Registerer: reg}, newLibrary(t, testPath))
	session := initialize(t, r.url)
	for _, tt := range []struct {
		method, uri string
		refused     bool
	}{
		{"resources/subscribe", "notebook://work/cells/" + strings.Repeat("a", 18), false}, // 40 bytes
		{"resources/subscribe", "notebook://work/cells/" + strings.Repeat("b", 18), true},  // 80 > 64
		{"resources/subscribe", "notebook://work", false},                                  // 55
		{"resources/subscribe", "notebook://work/cells/c1", true},                          // 79
		{"resources/unsubscribe", "notebook://work", false},                                // 40
		{"resources/subscribe", "notebook://work/cells/c1", false},                         // 64: the budget exactly
	} {
		_, msg := rpc(t, r.url, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":%q,"params":{"uri":%q}}`, tt.method, tt.uri))
		errObj, _ := msg["error"].(map[string]any)
		if refused := errObj != nil; refused != tt.refused {
			t.Errorf("%s %s: %v, want refused %v", tt.method, tt.uri, msg, tt.refused)
		}
	}
	if got := testenv.Sum(testenv.Gather(t, reg), "jupyter_mcp_sidecar_mcp_limit_refusals_total", "limit", limitSubscriptionBytes); got != 2 {
		t.Fatalf("limit_refusals_total{limit=subscription_bytes} = %v, want 2", got)
	}
}

// An initialize whose client is gone before the SDK registers its session
// leaves no id behind to hold a slot.
func TestAbandonedInitializeFreesItsSlot(t *testing.T) {
	r := serve(t, served{Transport: Config{MaxSessions: 1}}, newLibrary(t, testPath))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(initializeBody))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	r.srv.Handler().ServeHTTP(httptest.NewRecorder(), req)
	if n, ids := sdkSessions(r), liveSessions(r); n != 0 || ids != 0 {
		t.Fatalf("an abandoned initialize left %d sessions, %d ids", n, ids)
	}
	initialize(t, r.url) // MaxSessions 1: the slot is free
}

// sessionIDs keeps issued and admitted sessions within its cap: a slot whose
// initialize generated no id, or whose session the SDK never registered, is
// free again once the initialize settles.
func TestSessionIDsAdmission(t *testing.T) {
	for _, tt := range []struct {
		name     string
		generate bool
		register bool
		live     int // ids live after settle
	}{
		{"not generated", false, false, 0},
		{"generated, never registered", true, false, 0},
		{"registered", true, true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := newSessionIDs(1)
			a, ok := m.reserve()
			if !ok {
				t.Fatal("the first initialize was refused")
			}
			if _, ok := m.reserve(); ok {
				t.Fatal("a second initialize was admitted while the only slot is reserved")
			}
			if tt.generate {
				id := a.Generate()
				if !m.known(id) {
					t.Fatalf("generated id %q is not known", id)
				}
				if tt.register {
					m.registered(id)
				}
			}
			if forgotten := m.settle(a); (forgotten != "") != (tt.generate && !tt.register) {
				t.Fatalf("settle forgot %q", forgotten)
			}
			if got := m.count(); got != tt.live {
				t.Fatalf("%d ids live after settle, want %d", got, tt.live)
			}
			if _, ok := m.reserve(); ok != (tt.live == 0) {
				t.Fatalf("admitted after settle: %v, want %v", ok, tt.live == 0)
			}
		})
	}
}
