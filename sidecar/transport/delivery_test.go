//lint:file-ignore SA1019 the 2025-11-25 era (resources/subscribe, the GET stream) is served and tested on purpose; mcp-go deprecates its client API

package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

var legacyHeaders = map[string]string{"Authorization": "Bearer " + testToken, "MCP-Protocol-Version": era20251125}

// do sends a request with the given verb (and no body) to the endpoint.
func do(t *testing.T, method, url, session string, headers map[string]string) *http.Response {
	t.Helper()
	return send(t, method, url, session, headers, "")
}

// rpc posts one JSON-RPC request of a 2025-11-25 session and returns the decoded
// response message (from a JSON body or the response event of an SSE body).
func rpc(t *testing.T, url, session, body string) (status int, msg map[string]any) {
	t.Helper()
	resp := post(t, url, session, legacyHeaders, body)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		if json.Unmarshal([]byte(line), &msg) == nil && msg["id"] != nil {
			return resp.StatusCode, msg
		}
	}
	return resp.StatusCode, nil
}

func TestSessionsNotLiveAre404OnEveryVerb(t *testing.T) {
	r := startServer(t, resources.Config{}, newLibrary(t, testPath))
	session := initialize(t, r.url)
	if resp := do(t, http.MethodDelete, r.url, session, legacyHeaders); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE of a live session: %s", resp.Status)
	}
	for _, id := range []string{session, "mcp-session-00000000-0000-0000-0000-000000000000", "made-up"} {
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			resp := do(t, method, r.url, id, legacyHeaders)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s with session %q: %s, want 404", method, id, resp.Status)
			}
		}
		if status, _ := rpc(t, r.url, id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); status != http.StatusNotFound {
			t.Errorf("POST with session %q: %d, want 404", id, status)
		}
	}
	// A GET without a session id is refused and leaves no session behind.
	before := liveSessions(r)
	for range 50 {
		resp := do(t, http.MethodGet, r.url, "", legacyHeaders)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("GET without a session id: %s, want 400", resp.Status)
		}
	}
	if after := liveSessions(r); after != before {
		t.Fatalf("GETs without a session id left %d session ids (had %d)", after, before)
	}
}

// sseEvent is one event read from a GET stream.
type sseEvent struct {
	id  string
	uri string
}

// openStream opens a GET stream (resuming after lastID when set) and sends its
// resources/updated events to the returned channel until the body ends.
func openStream(t *testing.T, url, session, lastID string) (*http.Response, <-chan sseEvent) {
	t.Helper()
	h := map[string]string{}
	for k, v := range legacyHeaders {
		h[k] = v
	}
	if lastID != "" {
		h["Last-Event-ID"] = lastID
	}
	resp := do(t, http.MethodGet, url, session, h)
	events := make(chan sseEvent, 1000)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		var id string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				var m struct {
					Method string
					Params struct{ URI string }
				}
				if json.Unmarshal([]byte(v), &m) == nil && m.Method == string(mcp.MethodNotificationResourceUpdated) {
					events <- sseEvent{id: id, uri: m.Params.URI}
				}
				id = ""
			}
		}
	}()
	return resp, events
}

func next(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("stream ended")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return sseEvent{}
}

// waitStreams waits until n GET streams are open.
func waitStreams(t *testing.T, r *running, n int) {
	t.Helper()
	testenv.Eventually(t, testenv.Wait, fmt.Sprintf("%d GET streams open", n), func() bool { _, _, streams := stats(r); return streams == n })
}

func TestGetStreamResumesWithLastEventID(t *testing.T) {
	lib := newLibrary(t, testPath)
	r := serve(t, served{Config: resources.Config{Notebooks: map[string]string{"work": testPath}}, Transport: Config{ReplayEvents: 3}}, lib)
	session := initialize(t, r.url)
	for _, uri := range []string{"notebook://work", "capabilities://"} {
		if _, msg := rpc(t, r.url, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":%q}}`, uri)); msg["error"] != nil {
			t.Fatalf("subscribe %s: %v", uri, msg["error"])
		}
	}
	change := func() { r.srv.NotebookChanged(testPath, ynotebook.Changes{Metadata: true}, noOrigin) }

	resp, events := openStream(t, r.url, session, "")
	waitStreams(t, r, 1)
	change()
	first := next(t, events)
	if first.id == "" || first.uri != "notebook://work" {
		t.Fatalf("first event %+v: want an id and notebook://work", first)
	}
	// The stream drops; changes made meanwhile arrive when it resumes.
	resp.Body.Close()
	waitStreams(t, r, 0)
	change()
	resp, events = openStream(t, r.url, session, first.id)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resume: %s", resp.Status)
	}
	if ev := next(t, events); ev.uri != "notebook://work" || ev.id == "" {
		t.Fatalf("after resuming: %+v", ev)
	}
	// Past the replay buffer (3 events), a resume ends the session with 404.
	for range 5 {
		change()
		next(t, events)
	}
	resp.Body.Close()
	waitStreams(t, r, 0)
	resp, _ = openStream(t, r.url, session, first.id)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("resume from an evicted event: %s, want 404", resp.Status)
	}
	if status, _ := rpc(t, r.url, session, `{"jsonrpc":"2.0","id":4,"method":"ping"}`); status != http.StatusNotFound {
		t.Fatalf("the session after a refused resume: %d, want 404", status)
	}
}

// TestChangeBeforeTheFirstGetStream: a change after resources/subscribe and before the
// session's GET stream opens reaches that stream. The SDK starts a session's stream pump
// before it attaches the first connection, and a notification the pump takes in between
// is recorded for replay only: handed to the SDK before the stream answered 200, the
// change was lost (under -race within a few rounds).
func TestChangeBeforeTheFirstGetStream(t *testing.T) {
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}}, newLibrary(t, testPath))
	for round := range 200 {
		session := initialize(t, r.url)
		if _, msg := rpc(t, r.url, session, `{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"notebook://work"}}`); msg["error"] != nil {
			t.Fatalf("subscribe: %v", msg["error"])
		}
		r.srv.NotebookChanged(testPath, ynotebook.Changes{Metadata: true}, noOrigin)
		resp, events := openStream(t, r.url, session, "")
		if ev := next(t, events); ev.uri != "notebook://work" {
			t.Fatalf("round %d: %+v, want notebook://work", round, ev)
		}
		resp.Body.Close()
		if resp := do(t, http.MethodDelete, r.url, session, legacyHeaders); resp.StatusCode != http.StatusOK {
			t.Fatalf("round %d: DELETE: %s", round, resp.Status)
		}
	}
}

func TestSubscriptionLimits(t *testing.T) {
	r := startServer(t, resources.Config{
		Limits: resources.Limits{MaxSubscriptions: 3, MaxURIBytes: 64, MaxListenURIs: 3},
		Gate:   resources.Seam{Name: "withhold", Options: map[string]any{"templates": []any{"notebook://{name}/cells/{cell_id}/outputs/{index}"}}},
	}, newLibrary(t, testPath))
	session := initialize(t, r.url)
	subscribe := func(uri string) map[string]any {
		_, msg := rpc(t, r.url, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{"uri":%q}}`, uri))
		return msg
	}
	for _, tt := range []struct {
		uri  string
		code float64
	}{
		{"file:///etc/passwd", mcp.RESOURCE_NOT_FOUND},
		{"notebook://work/" + strings.Repeat("x", 100), mcp.INVALID_PARAMS},
		{"notebook://work/cells/c1/outputs/0", codeWithheld},
		{"notebook://work", 0},
		{"notebook://work", 0}, // again: not a new subscription
		{"notebook://work/cells/c1", 0},
		{"capabilities://", 0},
		{"notebook://other", mcp.INVALID_PARAMS}, // a fourth
	} {
		msg := subscribe(tt.uri)
		errObj, _ := msg["error"].(map[string]any)
		switch {
		case tt.code == 0 && errObj != nil:
			t.Errorf("subscribe %q: %v, want success", tt.uri, errObj)
		case tt.code != 0 && (errObj == nil || errObj["code"] != tt.code):
			t.Errorf("subscribe %q: %v, want error code %v", tt.uri, msg, tt.code)
		}
	}
	if _, subs, _ := stats(r); subs != 3 {
		t.Fatalf("%d subscriptions held, want 3", subs)
	}

	// A listen filter is cut to what will be served, and acknowledged so.
	headers := map[string]string{"Authorization": "Bearer " + testToken, "MCP-Protocol-Version": era20260728, "Mcp-Method": "subscriptions/listen"}
	body := `{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},` +
		`"notifications":{"resourceSubscriptions":["file:///etc/passwd","notebook://work/cells/c1/outputs/0","notebook://work","notebook://x"]}}}`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m struct {
			Method string
			Params struct {
				Notifications struct{ ResourceSubscriptions []string }
			}
		}
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatal(err)
		}
		if m.Method != string(mcp.MethodNotificationSubscriptionsAcknowledged) {
			t.Fatalf("first message %s", data)
		}
		// Only the first three URIs are considered; of them one is served.
		if got := m.Params.Notifications.ResourceSubscriptions; len(got) != 1 || got[0] != "notebook://work" {
			t.Fatalf("acknowledged %v, want [notebook://work]", got)
		}
		return
	}
	t.Fatalf("no acknowledgement: %v", sc.Err())
}

func TestGateGovernsEverySurface(t *testing.T) {
	lib := newLibrary(t, testPath)
	withhold := func(templates ...any) resources.Config {
		return resources.Config{Notebooks: map[string]string{"work": testPath}, Gate: resources.Seam{Name: "withhold", Options: map[string]any{"templates": templates}}}
	}
	t.Run("notebook", func(t *testing.T) {
		r := startServer(t, withhold("notebook://{name}"), lib)
		c := dialGo(t, r.url, false)
		res, err := c.ListResources(context.Background(), mcp.ListResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range res.Resources {
			if strings.HasPrefix(res.URI, "notebook://") {
				t.Errorf("a withheld notebook is listed: %s", res.URI)
			}
		}
		tmpl, err := c.ListResourceTemplates(context.Background(), mcp.ListResourceTemplatesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range tmpl.ResourceTemplates {
			if tt.URITemplate.Raw() == "notebook://{name}" {
				t.Error("a withheld template is listed")
			}
		}
		if len(tmpl.ResourceTemplates) != 2 {
			t.Errorf("%d templates listed, want the 2 served", len(tmpl.ResourceTemplates))
		}
	})
	t.Run("outputs", func(t *testing.T) {
		r := startServer(t, withhold("notebook://{name}/cells/{cell_id}/outputs/{index}"), lib)
		c := dialGo(t, r.url, false)
		cell := readText(t, c, "notebook://work/cells/c1")
		if strings.Contains(cell, "/outputs/") || !strings.Contains(cell, `"mimeType"`) {
			t.Fatalf("a cell links withheld outputs (or lists none): %s", cell)
		}
		// No notification names a withheld URI.
		sub := mcp.SubscribeRequest{}
		sub.Params.URI = "notebook://work/cells/c1"
		if err := c.Subscribe(context.Background(), sub); err != nil {
			t.Fatal(err)
		}
		r.srv.NotebookChanged(testPath, lib.edit(t, testPath, "output-c1-0"), noOrigin)
		c.waitUpdated(t, testenv.Wait, "notebook://work/cells/c1")
	})
}

// notReading starts a server whose send timeout is sendTimeout, and a session of it
// subscribed to "notebook://work" and 400 long cell URIs, on a GET stream whose client
// never reads; it returns the running server, the session, and the change of those
// cells, whose notifications soon fill the stream's buffers.
func notReading(t *testing.T, sendTimeout time.Duration, reg prometheus.Registerer) (*running, string, ynotebook.Changes) {
	t.Helper()
	r := serve(t, served{Config: resources.Config{
		Limits:     resources.Limits{MaxSubscriptions: 10000, MaxSubscriptionBytes: 1 << 20},
		Notebooks:  map[string]string{"work": testPath},
		Registerer: reg,
	}, Transport: Config{SendTimeout: sendTimeout}}, newLibrary(t, testPath))
	session := initialize(t, r.url)
	long := strings.Repeat("x", 1000) // cell ids as long as a URI names (nbview.MaxCellIDBytes): big notifications
	cells := ynotebook.Changes{Cells: map[string]ynotebook.CellChange{}}
	uris := []string{"notebook://work"}
	for i := range 400 {
		id := fmt.Sprintf("%s%d", long, i)
		cells.Cells[id] = ynotebook.CellChange{Source: true}
		uris = append(uris, "notebook://work/cells/"+id)
	}
	for _, uri := range uris {
		if _, msg := rpc(t, r.url, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":6,"method":"resources/subscribe","params":{"uri":%q}}`, uri)); msg["error"] != nil {
			t.Fatal(msg["error"])
		}
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(r.url, "/mcp"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /mcp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer %s\r\nMcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n", testToken, session)
	waitStreams(t, r, 1)
	return r, session, cells
}

// A session whose client stops reading its GET stream is ended, visibly: the
// client's next request is 404, and /metrics counts it.
func TestUndeliverableSessionIsEnded(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, session, cells := notReading(t, 300*time.Millisecond, reg)
	// Changes keep coming until the server gives up on the session that does not read.
	testenv.Eventually(t, testenv.Wait, "a session that does not read ended", func() bool {
		r.srv.NotebookChanged(testPath, cells, noOrigin)
		return counterValue(t, reg, "jupyter_mcp_sidecar_mcp_undeliverable_ended_total", era20251125) > 0
	})
	testenv.Eventually(t, testenv.Wait, "the ended session is 404", func() bool {
		status, _ := rpc(t, r.url, session, `{"jsonrpc":"2.0","id":7,"method":"ping"}`)
		return status == http.StatusNotFound
	})
}

// A client that opens a new GET stream while its session's writer is stuck on the old
// one (a connection that stopped reading, its buffers full) is served on the new one at
// once: the superseded stream is cut, not waited for until the session is given up on.
func TestNewStreamReplacesAStuckOne(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, session, cells := notReading(t, 3*time.Second, reg)
	o := r.tr.(*httpTransport).outboxes.get(session)
	testenv.Eventually(t, testenv.Wait, "the writer stuck on the old stream", func() bool {
		r.srv.NotebookChanged(testPath, cells, noOrigin)
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.writing && !o.stalled.IsZero() && time.Since(o.stalled) > 300*time.Millisecond
	})

	resp, events := openStream(t, r.url, session, "")
	defer resp.Body.Close()
	r.srv.NotebookChanged(testPath, ynotebook.Changes{Metadata: true}, noOrigin)
	if ev := next(t, events); ev.uri == "" {
		t.Fatalf("the new stream got %+v", ev)
	}
	if status, _ := rpc(t, r.url, session, `{"jsonrpc":"2.0","id":7,"method":"ping"}`); status != http.StatusOK {
		t.Fatalf("the session answers %d after its new stream opened, want 200", status)
	}
	if n := counterValue(t, reg, "jupyter_mcp_sidecar_mcp_undeliverable_ended_total", era20251125); n != 0 {
		t.Fatalf("%v sessions given up on, want none", n)
	}
}
