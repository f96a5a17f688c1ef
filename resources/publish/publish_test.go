package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish/publishtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres/pgtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type local struct{ got [][]string }

func (l *local) Publish(_ context.Context, uris []string) error {
	l.got = append(l.got, uris)
	return nil
}
func (l *local) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// event is a change of notebook path: cell c1's source.
func event(path string) Event {
	return NewEvent(path, ynotebook.Changes{Cells: map[string]ynotebook.CellChange{"c1": {Source: true}}},
		Origin{Room: ".notebook:id-" + path + ".y", FileID: "id-" + path})
}

func TestNewDefaultAndErrors(t *testing.T) {
	l := &local{}
	p, err := New("", nil, Deps{Local: l})
	if err != nil {
		t.Fatal(err)
	}
	bound := event("a.ipynb")
	bound.URIs = []string{"notebook://a", "notebook://a/cells/c1"}
	for _, ev := range []Event{event("b.ipynb"), bound} {
		if err := p.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.got) != 1 || strings.Join(l.got[0], " ") != "notebook://a notebook://a/cells/c1" {
		t.Fatalf("local subscribers heard %v; want only the bound notebook's URIs", l.got)
	}
	tests := []struct {
		name string
		opts map[string]any
		want string
	}{
		{"nope", nil, `unknown publisher "nope"`},
		{"webhook", nil, `option "url" is required`},
		{"webhook", map[string]any{"url": "ftp://x"}, "http(s) URL"},
		{"webhook", map[string]any{"url": "http://x", "queue_size": 0}, "queue_size"},
		{"webhook", map[string]any{"url": "http://x", "backoff": "soon"}, "backoff"},
		{"webhook", map[string]any{"url": "http://x", "scope": "some"}, `"scope" must be "all" or "bound"`},
		{"pgnotify", nil, `option "dsn" is required`},
		{"pgnotify", map[string]any{"dsn": "postgres://%zz"}, "dsn"},
		{"webhook", map[string]any{"url": "http://x", "max_retry": 3}, `max_retry: unknown key (known: backoff, headers, max_retries, queue_size, scope, timeout, url)`},
		{"webhook", map[string]any{"url": "http://x", "headers": map[string]any{"X": 1}}, `headers[X]: `},
		{"webhook", map[string]any{"url": "http://x", "queue_size": 1.5}, `queue_size: want a whole number`},
		{"pgnotify", map[string]any{"dsn": "postgres://x/y", "max_retry": 3}, `max_retry: unknown key (known: backoff, channel, dsn, max_retries, queue_size, scope)`},
		{"subscribers", map[string]any{"scope": "bound"}, `scope: unknown key (known: none)`},
	}
	for _, tt := range tests {
		_, err := New(tt.name, tt.opts, Deps{Local: l, Logger: quiet})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%q, %v) = %v, want error containing %q", tt.name, tt.opts, err, tt.want)
		}
	}
}

func TestWebhookDeliversWithRetries(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("X-Token") != "t" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad headers", http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	p, err := New("webhook", map[string]any{"url": srv.URL, "backoff": "1ms", "headers": map[string]any{"X-Token": "t"}},
		Deps{Logger: quiet, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	if err := p.Publish(ctx, event("w.ipynb")); err != nil {
		t.Fatal(err)
	}
	// Delivered once the webhook has read the response, after the handler returned.
	testenv.Eventually(t, testenv.Wait, "one webhook delivery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(bodies) == 1 && promtest.ToFloat64(p.(*webhook).delivered) == 1
	})
	cancel()
	<-done
	var got Event
	publishtest.Validate(t, []byte(bodies[0]), &got)
	if got.Path != "w.ipynb" || got.Seq != 1 || got.FileID != "id-w.ipynb" || len(got.Changes.Cells) != 1 {
		t.Fatalf("body %s", bodies[0])
	}
	if calls != 3 {
		t.Fatalf("calls = %d, want 2 failures then 1 success", calls)
	}
}

func TestWebhookQueueFullDropsAndCounts(t *testing.T) {
	p, err := New("webhook", map[string]any{"url": "http://127.0.0.1:1", "queue_size": 2}, Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// Not running: the queue fills.
	for i := range 2 {
		if err := p.Publish(context.Background(), event("w.ipynb")); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := p.Publish(context.Background(), event("w.ipynb")); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third publish = %v, want ErrQueueFull", err)
	}
	w := p.(*webhook)
	if d := promtest.ToFloat64(w.dropped); d != 1 {
		t.Fatalf("dropped = %v", d)
	}
	// The dropped event used its number: a receiver sees the gap.
	<-w.ch
	<-w.ch
	if err := p.Publish(context.Background(), event("w.ipynb")); err != nil {
		t.Fatal(err)
	}
	if ev := <-w.ch; ev.Seq != 4 {
		t.Fatalf("seq after a drop = %d, want 4", ev.Seq)
	}
}

func TestScopeBoundSkipsUnboundNotebooks(t *testing.T) {
	p, err := New("pgnotify", map[string]any{"dsn": "postgres://x", "scope": "bound"}, Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	bound := event("a.ipynb")
	bound.URIs = []string{"notebook://a"}
	for _, ev := range []Event{event("b.ipynb"), bound} {
		if err := p.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	q := p.(*pgnotify)
	if got := <-q.ch; got.Path != "a.ipynb" || len(q.ch) != 0 || promtest.ToFloat64(q.skipped) != 1 {
		t.Fatalf("queued %+v (+%d more), skipped %v", got, len(q.ch), promtest.ToFloat64(q.skipped))
	}
}

func TestWebhookGivesUp(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer srv.Close()
	p, err := New("webhook", map[string]any{"url": srv.URL, "backoff": "1ms", "max_retries": 2}, Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	w := p.(*webhook)
	w.send(context.Background(), event("w.ipynb"))
	if f := promtest.ToFloat64(w.failed); f != 1 {
		t.Fatalf("failed = %v", f)
	}
}

// bigEvent has n added cells, n changed cells and their URIs: far over a NOTIFY.
func bigEvent(n int) Event {
	ch := ynotebook.Changes{Metadata: true, Cells: map[string]ynotebook.CellChange{}}
	for i := range n {
		id := fmt.Sprintf("cell-%04d-%s", i, strings.Repeat("x", 20))
		ch.Added = append(ch.Added, "new-"+id)
		ch.Cells[id] = ynotebook.CellChange{Source: true, Outputs: true, OutputIndexes: []int{0, 1}}
	}
	ev := NewEvent("big.ipynb", ch, Origin{Room: ".notebook:big.y", FileID: "big"})
	for _, id := range ch.Added {
		ev.URIs = append(ev.URIs, "notebook://big/cells/"+id)
	}
	ev.Seq = 7
	return ev
}

func validate(t *testing.T, payload []byte) Event {
	t.Helper()
	var ev Event
	publishtest.Validate(t, payload, &ev)
	return ev
}

// union merges the parts of a split event back into one.
func union(t *testing.T, parts []Event) Event {
	t.Helper()
	out := parts[0]
	out.Part = nil
	out.Changes.Cells = map[string]CellChange{}
	out.Changes.Added, out.URIs = nil, nil
	for i, p := range parts {
		if p.Part == nil || p.Part.Index != i || p.Part.Count != len(parts) || p.Seq != out.Seq || p.Path != out.Path {
			t.Fatalf("part %d: %+v", i, p.Part)
		}
		out.Changes.Metadata = out.Changes.Metadata || p.Changes.Metadata
		out.Changes.Added = append(out.Changes.Added, p.Changes.Added...)
		out.URIs = append(out.URIs, p.URIs...)
		maps.Copy(out.Changes.Cells, p.Changes.Cells)
	}
	return out
}

func TestEventPayloads(t *testing.T) {
	small := event("a.ipynb")
	small.Seq = 1
	one, err := small.Payloads(MaxNotifyPayload)
	if err != nil || len(one) != 1 {
		t.Fatalf("small event: %d payloads, %v", len(one), err)
	}
	if got := validate(t, one[0]); got.Part != nil {
		t.Fatalf("a whole event has a part: %s", one[0])
	}

	ev := bigEvent(300)
	payloads, err := ev.Payloads(MaxNotifyPayload)
	if err != nil {
		t.Fatal(err)
	}
	var parts []Event
	for _, p := range payloads {
		if len(p) > MaxNotifyPayload {
			t.Fatalf("payload of %d bytes", len(p))
		}
		parts = append(parts, validate(t, p))
	}
	if len(parts) < 5 {
		t.Fatalf("%d parts for a %d-cell event", len(parts), 300)
	}
	got := union(t, parts)
	ev.Time = got.Time // the round trip keeps the instant, not the location
	if !reflect.DeepEqual(got, ev) {
		t.Fatalf("the parts do not add up to the event:\n got %+v\nwant %+v", got, ev)
	}

	// An item that fits no part is left out, and the part says so.
	huge := event("h.ipynb")
	huge.Seq = 1
	huge.URIs = []string{"notebook://h", "notebook://h/cells/" + strings.Repeat("z", 9000)}
	payloads, err = huge.Payloads(MaxNotifyPayload)
	if err != nil || len(payloads) != 1 {
		t.Fatalf("huge item: %d payloads, %v", len(payloads), err)
	}
	if got := validate(t, payloads[0]); !got.Changes.Incomplete || len(got.URIs) != 1 {
		t.Fatalf("huge item not flagged: %s", payloads[0])
	}
}

// TestPGNotify needs a real PostgreSQL: run under .ci/postgres.sh.
func TestPGNotify(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listener := publishtest.Listen(t, ctx, dsn, "jupyter_mcp_test")
	p, err := New("pgnotify", map[string]any{"dsn": dsn, "channel": "jupyter_mcp_test"}, Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- p.Run(runCtx) }()
	big := bigEvent(400)
	big.Path = "w.ipynb"
	for _, ev := range []Event{event("w.ipynb"), big, event("w.ipynb")} {
		if err := p.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	var got []Event
	for {
		payload, err := listener.Next(ctx)
		if err != nil {
			t.Fatalf("after %d notifications: %v", len(got), err)
		}
		if len(payload) > MaxNotifyPayload {
			t.Fatalf("payload of %d bytes", len(payload))
		}
		ev := validate(t, payload)
		got = append(got, ev)
		if ev.Seq == 3 {
			break
		}
	}
	stop()
	<-done
	if got[0].Seq != 1 || got[0].Part != nil || got[len(got)-1].Part != nil || len(got) < 4 {
		t.Fatalf("notifications: %d, first %+v", len(got), got[0])
	}
	merged := union(t, got[1:len(got)-1])
	if merged.Seq != 2 || len(merged.Changes.Cells) != 400 || len(merged.URIs) != 400 {
		t.Fatalf("big event arrived as %d parts with %d cells, %d uris", len(got)-2, len(merged.Changes.Cells), len(merged.URIs))
	}
}
