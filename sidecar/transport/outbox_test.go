package transport

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// testOutbox is an outbox (1 s send timeout, stopped when the test ends) whose writer
// records each batch's URIs, and blocks while the client is stuck (a channel: synctest
// sees it blocked).
type testOutbox struct {
	*outbox
	m *deliveryMetrics

	mu      sync.Mutex
	batches [][]string
	stuck   chan struct{} // non-nil: the client does not read, writes block until it is closed
	ended   chan struct{}
}

// newTestOutbox returns a testOutbox written by w (nil: writers of its own).
func newTestOutbox(t *testing.T, era string, w *writers) *testOutbox {
	t.Helper()
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	to := &testOutbox{m: m.delivery, ended: make(chan struct{})}
	if w == nil {
		w = newWriters()
	}
	to.outbox = newOutbox(era, w, func(batch []resources.Message) {
		to.mu.Lock()
		stuck := to.stuck
		to.mu.Unlock()
		if stuck != nil {
			<-stuck
		}
		var uris []string
		for _, n := range batch {
			uris = append(uris, n.Note.URI)
		}
		to.mu.Lock()
		to.batches = append(to.batches, uris)
		to.mu.Unlock()
	}, func() { close(to.ended) }, m.delivery, quietLog, time.Second)
	t.Cleanup(to.stopWait)
	return to
}

// written returns the batches written so far and forgets them.
func (to *testOutbox) written() [][]string {
	to.mu.Lock()
	defer to.mu.Unlock()
	b := to.batches
	to.batches = nil
	return b
}

// stall makes the client stop reading; the returned function makes it read again.
func (to *testOutbox) stall() (resume func()) {
	to.mu.Lock()
	defer to.mu.Unlock()
	ch := make(chan struct{})
	to.stuck = ch
	return func() {
		to.mu.Lock()
		to.stuck = nil
		to.mu.Unlock()
		close(ch)
	}
}

// notesOf returns the notification of a change of each cell of the notebook bound to
// "work", by URI, as the surface hands it to a session's Sink.
func notesOf(t *testing.T, cells ...string) map[string]resources.Message {
	t.Helper()
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}}, newLibrary(t, testPath))
	if err := r.link.MCP().RegisterSession(context.Background(), &fakeSession{id: "m"}); err != nil {
		t.Fatal(err)
	}
	ch := ynotebook.Changes{Cells: map[string]ynotebook.CellChange{}}
	for _, c := range cells {
		ch.Cells[c] = ynotebook.CellChange{Source: true}
		if ref := r.link.AdmitSubscribe(context.Background(), "m", resources.URIParams{URI: "notebook://work/cells/" + c}); ref != nil {
			t.Fatalf("subscribe: %+v", ref)
		}
	}
	r.srv.NotebookChanged(testPath, ch, noOrigin)
	o := r.tr.(*httpTransport).outboxes.get("m") // no GET stream: they wait in its outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	got := map[string]resources.Message{}
	for _, m := range o.pending {
		got[m.Note.URI] = m
	}
	if len(got) != len(cells) {
		t.Fatalf("%d notifications for %d cells", len(got), len(cells))
	}
	return got
}

// notify hands the outbox the notification of each cell in turn.
func (to *testOutbox) notify(notes map[string]resources.Message, cells ...string) {
	for _, c := range cells {
		to.Notify(notes["notebook://work/cells/"+c])
	}
}

// cells is the cells' URIs.
func cells(ids ...string) []string {
	var out []string
	for _, id := range ids {
		out = append(out, "notebook://work/cells/"+id)
	}
	return out
}

// Notifications are written in order; while the writer is stuck in a write, more
// wait, one per URI; a client that takes nothing for the send timeout is given up on:
// what waits is dropped and counted, its session ended, and nothing more is taken.
func TestOutboxStalledClientIsEnded(t *testing.T) {
	notes := notesOf(t, "a", "b", "c")
	synctest.Test(t, func(t *testing.T) {
		to := newTestOutbox(t, era20251125, nil)
		to.notify(notes, "a", "b")
		synctest.Wait()
		to.notify(notes, "c")
		synctest.Wait()
		if got := slices.Concat(to.written()...); !slices.Equal(got, cells("a", "b", "c")) {
			t.Fatalf("wrote %v, want a, b, c in order", got)
		}
		resume := to.stall()
		to.notify(notes, "a")
		synctest.Wait() // the writer is stuck writing a
		for range 3 {
			to.notify(notes, "b", "c", "b")
		}
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		select {
		case <-to.ended:
			t.Fatal("ended before the send timeout")
		default:
		}
		time.Sleep(600 * time.Millisecond)
		synctest.Wait()
		select {
		case <-to.ended:
		default:
			t.Fatal("a client that stopped reading was not ended")
		}
		if d := testutil.ToFloat64(to.m.dropped.WithLabelValues(era20251125)); d != 2 {
			t.Fatalf("dropped = %v, want the 2 waiting (b and c, coalesced)", d)
		}
		if e := testutil.ToFloat64(to.m.ended.WithLabelValues(era20251125)); e != 1 {
			t.Fatalf("ended = %v, want 1", e)
		}
		to.notify(notes, "c")
		resume()
		synctest.Wait()
		if got := to.written(); len(got) != 1 || !slices.Equal(got[0], cells("a")) {
			t.Fatalf("after the end wrote %v, want only the batch that was stuck", got)
		}
		if s := testutil.ToFloat64(to.m.sent[era20251125]); s != 4 {
			t.Fatalf("sent = %v, want 4", s)
		}
	})
}

// A listen stream's outbox holds its notifications, coalesced, until the
// acknowledgement is written.
func TestOutboxHeldUntilRelease(t *testing.T) {
	notes := notesOf(t, "a")
	synctest.Test(t, func(t *testing.T) {
		to := newTestOutbox(t, era20260728, nil)
		to.held = true
		to.notify(notes, "a", "a", "a")
		synctest.Wait()
		if got := to.written(); len(got) != 0 {
			t.Fatalf("held stream wrote %v", got)
		}
		to.release()
		synctest.Wait()
		if got := to.written(); len(got) != 1 || !slices.Equal(got[0], cells("a")) {
			t.Fatalf("released stream wrote %v, want one coalesced notification", got)
		}
	})
}

// A 2025-11-25 session's notifications wait for a GET stream and for its POSTs, and
// coalesce meanwhile; a POST waits for a batch being written to be done.
func TestOutboxGatedCoalesces(t *testing.T) {
	notes := notesOf(t, "a", "b")
	synctest.Test(t, func(t *testing.T) {
		to := newTestOutbox(t, era20251125, nil)
		to.gated = true
		to.notify(notes, "a")
		synctest.Wait()
		if got := to.written(); len(got) != 0 {
			t.Fatalf("wrote without a GET stream: %v", got)
		}
		to.streamOpened()
		synctest.Wait()
		if got := to.written(); len(got) != 1 || !slices.Equal(got[0], cells("a")) {
			t.Fatalf("opening the GET stream wrote %v, want the one waiting", got)
		}
		to.postStarted(time.Millisecond)
		for range 10 {
			to.notify(notes, "a", "b")
		}
		synctest.Wait()
		if got := to.written(); len(got) != 0 {
			t.Fatalf("wrote while a POST was in flight: %v", got)
		}
		to.postEnded()
		synctest.Wait()
		if got := to.written(); len(got) != 1 || !slices.Equal(got[0], cells("a", "b")) {
			t.Fatalf("after the POST wrote %v, want one notification per URI", got)
		}

		// A POST starting while a batch is being written waits for it, at most maxWait.
		resume := to.stall()
		to.notify(notes, "a")
		synctest.Wait() // the writer is stuck writing a
		start := time.Now()
		to.postStarted(time.Second)
		if waited := time.Since(start); waited != time.Second {
			t.Fatalf("a POST behind a stuck batch waited %v, want its maxWait", waited)
		}
		to.postEnded()
		go func() {
			time.Sleep(100 * time.Millisecond) // the client reads again
			resume()
		}()
		start = time.Now()
		to.postStarted(time.Second)
		if waited := time.Since(start); waited != 100*time.Millisecond {
			t.Fatalf("a POST waited %v for the batch being written, want 100ms", waited)
		}
		to.postEnded()
		synctest.Wait()
		if got := to.written(); len(got) != 1 || !slices.Equal(got[0], cells("a")) {
			t.Fatalf("wrote %v, want the batch that was stuck", got)
		}
	})
}

// Waiting is a stall only while the writer is stuck: notifications that wait because
// the session's GET stream closed meanwhile are kept for its next stream.
func TestOutboxWaitingForAStreamIsNoStall(t *testing.T) {
	notes := notesOf(t, "a", "b")
	synctest.Test(t, func(t *testing.T) {
		to := newTestOutbox(t, era20251125, nil)
		to.gated = true
		to.streamOpened()
		resume := to.stall()
		to.notify(notes, "a")
		synctest.Wait() // the writer is stuck writing a
		to.notify(notes, "b")
		to.streamClosed() // the client went away; its write fails
		resume()
		time.Sleep(3 * time.Second) // the send timeout thrice over
		synctest.Wait()
		select {
		case <-to.ended:
			t.Fatal("a session waiting for its next GET stream was ended")
		default:
		}
		to.streamOpened()
		synctest.Wait()
		if got := slices.Concat(to.written()...); !slices.Equal(got, cells("a", "b")) {
			t.Fatalf("wrote %v, want a, then b on the next stream", got)
		}
	})
}

// Past the few a scan covers, waiting notifications still coalesce, one per URI, in the
// order they came.
func TestOutboxCoalescesMany(t *testing.T) {
	var ids []string
	for i := range 3 * scanPending {
		ids = append(ids, fmt.Sprintf("c%d", i))
	}
	notes := notesOf(t, ids...)
	synctest.Test(t, func(t *testing.T) {
		to := newTestOutbox(t, era20260728, nil)
		to.held = true
		backward := slices.Clone(ids)
		slices.Reverse(backward)
		for range 3 {
			to.notify(notes, ids...)
			to.notify(notes, backward...)
		}
		to.release()
		synctest.Wait()
		if got := slices.Concat(to.written()...); !slices.Equal(got, cells(ids...)) {
			t.Fatalf("wrote %d notifications %v, want one per URI in order", len(got), got)
		}
	})
}
