package transport

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

// The writers write many outboxes' batches with one worker per core, not a goroutine
// per outbox: never more writes at once than workers, and more than one.
func TestWritersOnePerCore(t *testing.T) {
	notes := notesOf(t, "a")
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		w := newWriters()
		w.max = 2
		var inside, most, wrote atomic.Int32
		write := func([]resources.Message) {
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(100 * time.Microsecond) // a write that takes a while, well short of stuck
			inside.Add(-1)
			wrote.Add(1)
		}
		for range 100 {
			o := newOutbox(era20260728, w, write, nil, m.delivery, quietLog, time.Second)
			t.Cleanup(o.stopWait)
			o.Notify(notes["notebook://work/cells/a"])
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if wrote.Load() != 100 || most.Load() != 2 {
			t.Fatalf("%d of 100 outboxes written, at most %d at once; want all, 2 at once", wrote.Load(), most.Load())
		}
	})
}

// A client that stops reading holds up no other: a worker stuck in its write is
// replaced after stuckAfter, and the stuck batches are written once their clients
// read again.
func TestWritersStuckWriteHoldsUpNoOther(t *testing.T) {
	notes := notesOf(t, "a")
	synctest.Test(t, func(t *testing.T) {
		w := newWriters()
		w.max = 2
		var tos []*testOutbox
		for range 6 {
			tos = append(tos, newTestOutbox(t, era20260728, w))
		}
		resumes := []func(){sync.OnceFunc(tos[0].stall()), sync.OnceFunc(tos[1].stall())}
		for _, resume := range resumes {
			t.Cleanup(resume) // first: a failure leaves no write stuck
		}
		for _, to := range tos {
			to.notify(notes, "a")
		}
		time.Sleep(2 * w.stuckAfter) // both workers stuck in the first two writes meanwhile
		synctest.Wait()
		for i, to := range tos[2:] {
			if got := to.written(); len(got) != 1 || !slices.Equal(got[0], cells("a")) {
				t.Fatalf("outbox %d behind two stuck writes wrote %v after %v, want its batch", i+2, got, 2*w.stuckAfter)
			}
		}
		for _, resume := range resumes {
			resume()
		}
		synctest.Wait()
		for i, to := range tos[:2] {
			if got := to.written(); len(got) != 1 || !slices.Equal(got[0], cells("a")) {
				t.Fatalf("stuck outbox %d wrote %v once its client read, want its batch", i, got)
			}
		}
	})
}

// stopWait returns only once the batch being written is, and nothing is written
// after it.
func TestOutboxStopWaitsForItsWrite(t *testing.T) {
	notes := notesOf(t, "a")
	synctest.Test(t, func(t *testing.T) {
		to := newTestOutbox(t, era20260728, nil)
		resume := sync.OnceFunc(to.stall())
		t.Cleanup(resume)
		to.notify(notes, "a")
		synctest.Wait() // stuck writing a
		stopped := make(chan struct{})
		go func() {
			to.stopWait()
			close(stopped)
		}()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("stopWait returned while its batch was being written")
		default:
		}
		resume()
		synctest.Wait()
		select {
		case <-stopped:
		default:
			t.Fatal("stopWait did not return once the write was done")
		}
		to.notify(notes, "a")
		synctest.Wait()
		if got := to.written(); len(got) != 1 {
			t.Fatalf("wrote %v, want only the batch that was stuck", got)
		}
	})
}
