package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// fakeSession is a 2025-11-25 session registered with the SDK without a client: the
// surface records it and the transport gives it an outbox, as for a real one.
type fakeSession struct{ id string }

func (*fakeSession) Initialize()                                         {}
func (*fakeSession) Initialized() bool                                   { return true }
func (*fakeSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return nil }
func (s *fakeSession) SessionID() string                                 { return s.id }

// The transport writes what the surface serialised once: two sessions' outboxes
// record the very same bytes for replay, none copied; a notification recorded while no
// stream was attached is written, with its event id, to the stream that resumes after
// the last event its client saw, before anything newer.
func TestOutboxSharesAndReplays(t *testing.T) {
	const uri = "notebook://work"
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}}, newLibrary(t, testPath))
	tr := r.tr.(*httpTransport)
	for _, id := range []string{"a", "b"} {
		if err := r.link.MCP().RegisterSession(context.Background(), &fakeSession{id: id}); err != nil {
			t.Fatal(err)
		}
		if ref := r.link.AdmitSubscribe(context.Background(), id, resources.URIParams{URI: uri}); ref != nil {
			t.Fatalf("subscribe %s: %+v", id, ref)
		}
		tr.outboxes.get(id).streamOpened() // open, no stream attached: recorded for replay only
	}
	events := func(id string) []replayEvent {
		tr.replay.mu.Lock()
		defer tr.replay.mu.Unlock()
		if l := tr.replay.sessions[id]; l != nil {
			return slices.Clone(l.events)
		}
		return nil
	}
	published := 0
	publish := func() {
		r.srv.NotebookChanged(testPath, ynotebook.Changes{Metadata: true}, noOrigin)
		published++
		testenv.Eventually(t, testenv.Wait, "both sessions recorded the notification", func() bool {
			return len(events("a")) == published && len(events("b")) == published
		})
	}
	publish() // the event the client saw, then two it missed: no stream attached
	seen := events("a")[0]
	publish()
	publish()
	if a, b := events("a")[1].msg, events("b")[1].msg; &a[0] != &b[0] {
		t.Fatal("two sessions recorded copies of one notification")
	}

	rec := httptest.NewRecorder()
	sw := newStreamWriter(rec, nil)
	tr.outboxes.get("a").out.attach(sw, fmt.Sprint(seen.seq))
	publish()               // a new one, after the replay
	body := func() string { // as the outbox writes it, whole events under the stream's lock
		sw.mu.Lock()
		defer sw.mu.Unlock()
		return rec.Body.String()
	}
	testenv.Eventually(t, testenv.Wait, "the new notification written", func() bool {
		return strings.Count(body(), `"uri":"notebook://work"`) >= 3
	})
	var ids []string
	for line := range strings.Lines(body()) {
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			ids = append(ids, strings.TrimSpace(id))
		}
	}
	var want []string
	for _, e := range events("a")[1:] {
		want = append(want, fmt.Sprint(e.seq))
	}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("resumed stream wrote event ids %v, want %v (the two missed, then the new one):\n%s", ids, want, body())
	}
	if n := strings.Count(body(), `"uri":"notebook://work"`); n != 3 {
		t.Fatalf("resumed stream wrote %d notifications, want 3:\n%s", n, body())
	}
}

// The SDK's heartbeat pings and the transport's notifications share a GET stream:
// each event is written whole, whichever writes it, and both arrive.
func TestHeartbeatsAndNotificationsShareTheStream(t *testing.T) {
	r := serve(t, served{Config: resources.Config{Notebooks: map[string]string{"work": testPath}}, Transport: Config{HeartbeatInterval: 5 * time.Millisecond}}, newLibrary(t, testPath))
	session := initialize(t, r.url)
	for _, uri := range []string{"notebook://work", "notebook://work/cells/c1"} {
		if _, msg := rpc(t, r.url, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":%q}}`, uri)); msg["error"] != nil {
			t.Fatal(msg["error"])
		}
	}
	resp := do(t, http.MethodGet, r.url, session, legacyHeaders)
	defer resp.Body.Close()
	waitStreams(t, r, 1)
	const changes = 200
	go func() {
		for range changes {
			r.srv.NotebookChanged(testPath, ynotebook.Changes{Metadata: true}, noOrigin)
			time.Sleep(100 * time.Microsecond) // the pace of the changes, a stimulus: pings fall between them
		}
		r.srv.NotebookChanged(testPath, ynotebook.Changes{Cells: map[string]ynotebook.CellChange{"c1": {Source: true}}}, noOrigin)
	}()
	sc := bufio.NewScanner(resp.Body)
	var pings, updates int
	var event []string // the lines of the event being read
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			event = append(event, line)
			continue
		}
		var data []string
		for _, l := range event {
			switch {
			case strings.HasPrefix(l, "data: "):
				data = append(data, strings.TrimPrefix(l, "data: "))
			case strings.HasPrefix(l, "id: "), l == "event: message":
			default:
				t.Fatalf("a line of no SSE field, two events mixed: %q in %q", l, event)
			}
		}
		event = event[:0]
		if len(data) != 1 {
			t.Fatalf("an event with %d data lines: %q", len(data), data)
		}
		var m struct {
			Method string
			Params struct{ URI string }
		}
		if err := json.Unmarshal([]byte(data[0]), &m); err != nil {
			t.Fatalf("event data %q: %v", data[0], err)
		}
		switch m.Method {
		case string(mcp.MethodPing):
			pings++
		case string(mcp.MethodNotificationResourceUpdated):
			updates++
		}
		if m.Params.URI == "notebook://work/cells/c1" {
			break // the barrier: the last change
		}
	}
	if pings == 0 || updates < 2 {
		t.Fatalf("%d pings and %d notifications on the stream, want both", pings, updates)
	}
}
