package publish_test

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish/publishtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// notifyLimit is the payload limit the split serves: pgnotify's (MaxNotifyPayload of
// sidecar/builtin/publishers).
const notifyLimit = 7900

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type local struct{ got [][]string }

func (l *local) Publish(_ context.Context, uris []string, _ string) error {
	l.got = append(l.got, uris)
	return nil
}
func (l *local) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// event is a change of notebook path: cell c1's source.
func event(path string) publish.Event {
	return publish.NewEvent(path, ynotebook.Changes{Cells: map[string]ynotebook.CellChange{"c1": {Source: true}}},
		publish.Origin{Room: ".notebook:id-" + path + ".y", FileID: "id-" + path})
}

func TestNewDefaultAndErrors(t *testing.T) {
	l := &local{}
	p, err := publish.New("", nil, publish.Deps{Local: l})
	if err != nil {
		t.Fatal(err)
	}
	bound := event("a.ipynb")
	bound.URIs = []string{"notebook://a", "notebook://a/cells/c1"}
	for _, ev := range []publish.Event{event("b.ipynb"), bound} {
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
		{"subscribers", map[string]any{"scope": "bound"}, `scope: unknown key (known: none)`},
	}
	for _, tt := range tests {
		_, err := publish.New(tt.name, tt.opts, publish.Deps{Local: l, Logger: quiet})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%q, %v) = %v, want error containing %q", tt.name, tt.opts, err, tt.want)
		}
	}
}

func TestEventPayloads(t *testing.T) {
	small := event("a.ipynb")
	small.Seq = 1
	one, err := small.Payloads(notifyLimit)
	if err != nil || len(one) != 1 {
		t.Fatalf("small event: %d payloads, %v", len(one), err)
	}
	if got := publishtest.Event(t, one[0]); got.Part != nil {
		t.Fatalf("a whole event has a part: %s", one[0])
	}

	ev := publishtest.BigEvent(300)
	payloads, err := ev.Payloads(notifyLimit)
	if err != nil {
		t.Fatal(err)
	}
	var parts []publish.Event
	for _, p := range payloads {
		if len(p) > notifyLimit {
			t.Fatalf("payload of %d bytes", len(p))
		}
		parts = append(parts, publishtest.Event(t, p))
	}
	if len(parts) < 5 {
		t.Fatalf("%d parts for a %d-cell event", len(parts), 300)
	}
	got := publishtest.Union(t, parts)
	ev.Time = got.Time // the round trip keeps the instant, not the location
	if !reflect.DeepEqual(got, ev) {
		t.Fatalf("the parts do not add up to the event:\n got %+v\nwant %+v", got, ev)
	}

	// An item that fits no part is left out, and the part says so.
	huge := event("h.ipynb")
	huge.Seq = 1
	huge.URIs = []string{"notebook://h", "notebook://h/cells/" + strings.Repeat("z", 9000)}
	payloads, err = huge.Payloads(notifyLimit)
	if err != nil || len(payloads) != 1 {
		t.Fatalf("huge item: %d payloads, %v", len(payloads), err)
	}
	if got := publishtest.Event(t, payloads[0]); !got.Changes.Incomplete || len(got.URIs) != 1 {
		t.Fatalf("huge item not flagged: %s", payloads[0])
	}
}
