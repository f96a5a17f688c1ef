package publish

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres/pgtest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type local struct{ got [][]string }

func (l *local) Publish(_ context.Context, uris []string) error {
	l.got = append(l.got, uris)
	return nil
}
func (l *local) Run(ctx context.Context) error { <-ctx.Done(); return nil }

func TestNewDefaultAndErrors(t *testing.T) {
	l := &local{}
	p, err := New("", nil, Deps{Local: l})
	if err != nil || p != l {
		t.Fatalf("default publisher = %v, %v; want the local subscribers", p, err)
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
		{"pgnotify", nil, `option "dsn" is required`},
		{"pgnotify", map[string]any{"dsn": "postgres://%zz"}, "dsn"},
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
	if err := p.Publish(ctx, []string{"notebook://w", "notebook://w/cells/c1"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(bodies)
		mu.Unlock()
		// Delivered once the webhook has read the response, after the handler returned.
		if n == 1 && testutil.ToFloat64(p.(*webhook).delivered) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook never delivered (%d bodies received)", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	var got struct{ URIs []string }
	if err := json.Unmarshal([]byte(bodies[0]), &got); err != nil || strings.Join(got.URIs, ",") != "notebook://w,notebook://w/cells/c1" {
		t.Fatalf("body %s: %v", bodies[0], err)
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
		if err := p.Publish(context.Background(), []string{"notebook://w"}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := p.Publish(context.Background(), []string{"notebook://w"}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third publish = %v, want ErrQueueFull", err)
	}
	if d := testutil.ToFloat64(p.(*webhook).dropped); d != 1 {
		t.Fatalf("dropped = %v", d)
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
	w.send(context.Background(), []string{"notebook://w"})
	if f := testutil.ToFloat64(w.failed); f != 1 {
		t.Fatalf("failed = %v", f)
	}
}

func TestPayloads(t *testing.T) {
	uris := []string{"notebook://a", "notebook://a/cells/" + strings.Repeat("x", 30), "notebook://a/cells/y"}
	got, err := Payloads(uris, 70)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, p := range got {
		if len(p) > 70 {
			t.Fatalf("payload %d bytes > limit: %s", len(p), p)
		}
		var doc struct{ URIs []string }
		if err := json.Unmarshal([]byte(p), &doc); err != nil {
			t.Fatal(err)
		}
		all = append(all, doc.URIs...)
	}
	if strings.Join(all, " ") != strings.Join(uris, " ") || len(got) < 2 {
		t.Fatalf("payloads %q lose or reorder uris", got)
	}
	if _, err := Payloads([]string{strings.Repeat("z", 100)}, 70); err == nil {
		t.Fatal("an oversize uri was accepted")
	}
}

// TestPGNotify needs a real PostgreSQL: run under .ci/postgres.sh.
func TestPGNotify(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listener, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN jupyter_mcp_test"); err != nil {
		t.Fatal(err)
	}
	p, err := New("pgnotify", map[string]any{"dsn": dsn, "channel": "jupyter_mcp_test"}, Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- p.Run(runCtx) }()
	big := make([]string, 0, 400)
	for i := range 400 {
		big = append(big, "notebook://w/cells/"+strings.Repeat("c", 10)+string(rune('a'+i%26)))
	}
	if err := p.Publish(ctx, []string{"notebook://w"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, big); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 1+len(big) {
		n, err := listener.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("after %d uris: %v", len(got), err)
		}
		var doc struct{ URIs []string }
		if err := json.Unmarshal([]byte(n.Payload), &doc); err != nil {
			t.Fatal(err)
		}
		got = append(got, doc.URIs...)
	}
	stop()
	<-done
	if got[0] != "notebook://w" || got[len(got)-1] != big[len(big)-1] {
		t.Fatalf("notifications out of order: first %q last %q", got[0], got[len(got)-1])
	}
}
