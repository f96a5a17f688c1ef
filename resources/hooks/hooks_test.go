package hooks

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type recorder struct {
	mu     sync.Mutex
	events []string
	panics bool
}

func (r *recorder) Before(_ context.Context, c Call) {
	r.mu.Lock()
	r.events = append(r.events, "before "+c.Name)
	r.mu.Unlock()
	if r.panics {
		panic("before")
	}
}

func (r *recorder) After(_ context.Context, c Call, _ time.Duration, err error) {
	r.mu.Lock()
	r.events = append(r.events, "after "+c.Name+" "+errString(err))
	r.mu.Unlock()
	if r.panics {
		panic("after")
	}
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

var testRecorders = map[string]*recorder{"t-rec": {}, "t-panic": {panics: true}}

func init() {
	for name, r := range testRecorders {
		Register(name, func(map[string]any, Deps) (Hook, error) { return r, nil })
	}
	Register("t-broken", func(map[string]any, Deps) (Hook, error) { return nil, errors.New("cannot build") })
}

func TestChainObservesAndSurvivesPanics(t *testing.T) {
	rec := testRecorders["t-rec"]
	rec.mu.Lock()
	rec.events = nil // registered once per process; -count reruns the test
	rec.mu.Unlock()
	var logs bytes.Buffer
	c, err := Build(map[string]map[string]any{"t-rec": nil, "t-panic": nil},
		Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	want := errors.New("read failed")
	got := c.Observe(context.Background(), Call{Kind: KindResource, Name: "notebook://w"}, func(context.Context) error { return want })
	if got != want {
		t.Fatalf("Observe returned %v, want the call's own error", got)
	}
	if err := c.Observe(context.Background(), Call{Kind: KindTool, Name: "list_notebooks"}, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("a panicking hook failed the call: %v", err)
	}
	wantEvents := []string{"before notebook://w", "after notebook://w read failed", "before list_notebooks", "after list_notebooks ok"}
	if strings.Join(rec.events, "|") != strings.Join(wantEvents, "|") {
		t.Fatalf("events = %q, want %q", rec.events, wantEvents)
	}
	if !strings.Contains(logs.String(), "hook panicked") {
		t.Fatalf("panic not logged: %s", logs.String())
	}
}

func TestBuildErrors(t *testing.T) {
	if _, err := Build(map[string]map[string]any{"nope": nil}, Deps{}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown hook: %v", err)
	}
	if _, err := Build(map[string]map[string]any{"t-broken": nil}, Deps{}); err == nil || !strings.Contains(err.Error(), `"t-broken"`) {
		t.Fatalf("broken hook: %v", err)
	}
	if _, err := Build(map[string]map[string]any{"audit": {"level": "loud"}}, Deps{}); err == nil {
		t.Fatal("audit with an invalid level built")
	}
}

func TestBuiltins(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	c, err := Build(map[string]map[string]any{"audit": {"level": "warn"}, "metrics": nil},
		Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	call := Call{Kind: KindResource, Name: "notebook://w/cells/c1", Template: "notebook://{name}/cells/{cell_id}", Session: "s1"}
	_ = c.Observe(context.Background(), call, func(context.Context) error { return errors.New("nope") })
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "name=notebook://w/cells/c1") {
		t.Fatalf("audit line missing: %s", logs.String())
	}
	m := c.hooks[1].(metrics)
	if got := testutil.ToFloat64(m.errors.WithLabelValues("resource", call.Template)); got != 1 {
		t.Fatalf("errors = %v", got)
	}
	if got := testutil.ToFloat64(m.calls.WithLabelValues("resource", call.Template)); got != 1 {
		t.Fatalf("calls = %v", got)
	}
}
