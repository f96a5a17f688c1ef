package publishers

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish/publishtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres/pgtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// event is a change of notebook path: cell c1's source.
func event(path string) publish.Event {
	return publish.NewEvent(path, ynotebook.Changes{Cells: map[string]ynotebook.CellChange{"c1": {Source: true}}},
		publish.Origin{Room: ".notebook:id-" + path + ".y", FileID: "id-" + path})
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		opts map[string]any
		want string
	}{
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
	}
	for _, tt := range tests {
		_, err := publish.New(tt.name, tt.opts, publish.Deps{Logger: quiet})
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
	p, err := publish.New("webhook", map[string]any{"url": srv.URL, "backoff": "1ms", "headers": map[string]any{"X-Token": "t"}},
		publish.Deps{Logger: quiet, Registerer: reg})
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
	var got publish.Event
	publishtest.Validate(t, []byte(bodies[0]), &got)
	if got.Path != "w.ipynb" || got.Seq != 1 || got.FileID != "id-w.ipynb" || len(got.Changes.Cells) != 1 {
		t.Fatalf("body %s", bodies[0])
	}
	if calls != 3 {
		t.Fatalf("calls = %d, want 2 failures then 1 success", calls)
	}
}

func TestWebhookQueueFullDropsAndCounts(t *testing.T) {
	p, err := publish.New("webhook", map[string]any{"url": "http://127.0.0.1:1", "queue_size": 2}, publish.Deps{Logger: quiet})
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
	p, err := publish.New("pgnotify", map[string]any{"dsn": "postgres://x", "scope": "bound"}, publish.Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	bound := event("a.ipynb")
	bound.URIs = []string{"notebook://a"}
	for _, ev := range []publish.Event{event("b.ipynb"), bound} {
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
	p, err := publish.New("webhook", map[string]any{"url": srv.URL, "backoff": "1ms", "max_retries": 2}, publish.Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	w := p.(*webhook)
	w.send(context.Background(), event("w.ipynb"))
	if f := promtest.ToFloat64(w.failed); f != 1 {
		t.Fatalf("failed = %v", f)
	}
}

// TestPGNotify needs a real PostgreSQL: run under .ci/postgres.sh.
func TestPGNotify(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listener := publishtest.Listen(t, ctx, dsn, "jupyter_mcp_test")
	p, err := publish.New("pgnotify", map[string]any{"dsn": dsn, "channel": "jupyter_mcp_test"}, publish.Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- p.Run(runCtx) }()
	big := publishtest.BigEvent(400)
	big.Path = "w.ipynb"
	for _, ev := range []publish.Event{event("w.ipynb"), big, event("w.ipynb")} {
		if err := p.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	var got []publish.Event
	for {
		payload, err := listener.Next(ctx)
		if err != nil {
			t.Fatalf("after %d notifications: %v", len(got), err)
		}
		if len(payload) > MaxNotifyPayload {
			t.Fatalf("payload of %d bytes", len(payload))
		}
		ev := publishtest.Event(t, payload)
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
	merged := publishtest.Union(t, got[1:len(got)-1])
	if merged.Seq != 2 || len(merged.Changes.Cells) != 400 || len(merged.URIs) != 400 {
		t.Fatalf("big event arrived as %d parts with %d cells, %d uris", len(got)-2, len(merged.Changes.Cells), len(merged.URIs))
	}
}
