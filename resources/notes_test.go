package resources

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/subscribers"
)

// The transport writes what the registry serialised once: two sessions' noteWriters
// record the very same bytes for replay, none copied; a notification recorded while no
// stream was attached is written, with its event id, to the stream that resumes after
// the last event its client saw, before anything newer.
func TestNoteWriterSharesAndReplays(t *testing.T) {
	const uri = "notebook://work"
	subs, err := subscribers.New(slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	replay := newReplayStore(DefaultReplayEvents, DefaultReplayBytes)
	writers := map[string]*noteWriter{}
	chs := map[string]chan subscribers.Message{}
	for _, id := range []string{"a", "b"} {
		writers[id] = newNoteWriter(id, replay, nil)
		chs[id] = make(chan subscribers.Message, 8)
		subs.AddSession(id, chs[id], false, nil)
		subs.Subscribe(subscribers.SessionKey(id), uri)
	}
	publish := func() {
		_ = subs.Publish(context.Background(), []string{uri})
		for id, nw := range writers {
			nw.write(<-chs[id])
		}
	}
	publish() // the event the client saw, then two it missed: no stream attached
	seen := replay.sessions["a"].events[0]
	publish()
	publish()
	if a, b := replay.sessions["a"].events[1].msg, replay.sessions["b"].events[1].msg; &a[0] != &b[0] {
		t.Fatal("two sessions recorded copies of one notification")
	}

	rec := httptest.NewRecorder()
	sw := newStreamWriter(rec, func() {})
	writers["a"].attach(sw, fmt.Sprint(seen.seq))
	publish() // a new one, after the replay
	var ids []string
	for line := range strings.Lines(rec.Body.String()) {
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			ids = append(ids, strings.TrimSpace(id))
		}
	}
	var want []string
	for _, e := range replay.sessions["a"].events[1:] {
		want = append(want, fmt.Sprint(e.seq))
	}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("resumed stream wrote event ids %v, want %v (the two missed, then the new one):\n%s", ids, want, rec.Body)
	}
	if n := strings.Count(rec.Body.String(), `"uri":"notebook://work"`); n != 3 {
		t.Fatalf("resumed stream wrote %d notifications, want 3:\n%s", n, rec.Body)
	}
}
