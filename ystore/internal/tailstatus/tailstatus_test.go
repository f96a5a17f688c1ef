package tailstatus

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

func newRecorder() (*Recorder, Metrics) {
	m := Metrics{
		Reachable: prometheus.NewGauge(prometheus.GaugeOpts{Name: "reachable"}),
		Lag:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "lag"}),
		Rows:      prometheus.NewCounter(prometheus.CounterOpts{Name: "rows"}),
	}
	return New(m), m
}

// events returns one event of kind with rows committed ago before now.
func events(kind ystore.EventKind, ago ...time.Duration) []ystore.Event {
	e := ystore.Event{Kind: kind, Room: "r"}
	for i, d := range ago {
		e.Rows = append(e.Rows, ystore.Row{Room: "r", ID: int64(i + 1), Timestamp: float64(time.Now().Add(-d).UnixMicro()) / 1e6})
	}
	return []ystore.Event{e}
}

func TestRecorder(t *testing.T) {
	tests := []struct {
		name      string
		run       func(r *Recorder)
		reachable bool
		lastError string
		rows      uint64
		lagMin    time.Duration // the lag is in [lagMin, lagMin+time.Second); 0: exactly 0
		rooms     int
	}{
		{"new", func(*Recorder) {}, false, "", 0, 0, 0},
		{"failed", func(r *Recorder) { r.Fail(errors.New("boom")) }, false, "boom", 0, 0, 0},
		{"load is not lag", func(r *Recorder) { r.Read(events(ystore.EventReset, time.Hour), 1) }, true, "", 1, 0, 1},
		{"a pending load is not lag", func(r *Recorder) { r.Pending(events(ystore.EventReset, time.Hour)) }, false, "", 0, 0, 0},
		{"pending updates are, from the oldest", func(r *Recorder) {
			r.Pending(events(ystore.EventUpdates, 3*time.Second, 5*time.Second))
		}, false, "", 0, 5 * time.Second, 0},
		{"applied updates are not", func(r *Recorder) {
			r.Pending(events(ystore.EventUpdates, 5*time.Second, 3*time.Second))
			r.Read(events(ystore.EventUpdates, 5*time.Second, 3*time.Second), 2)
		}, true, "", 2, 0, 2},
		{"an old row applied is not lag, idle or not", func(r *Recorder) {
			old := events(ystore.EventUpdates, time.Hour)
			r.Pending(old)
			r.Read(old, 1)
			r.Read(nil, 1)
		}, true, "", 1, 0, 1},
		{"a failed read leaves its rows pending", func(r *Recorder) {
			r.Pending(events(ystore.EventUpdates, 3*time.Second))
			r.Fail(errors.New("boom"))
		}, false, "boom", 0, 3 * time.Second, 0},
		{"read clears the error", func(r *Recorder) {
			r.Fail(errors.New("boom"))
			r.Read(nil, 4)
		}, true, "", 0, 0, 4},
		{"error after a read", func(r *Recorder) {
			r.Read(nil, 4)
			r.Fail(errors.New("boom"))
		}, false, "boom", 0, 0, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, m := newRecorder()
			tt.run(r)
			st := r.Status()
			if st.Reachable != tt.reachable || st.LastError != tt.lastError || st.RowsTailed != tt.rows ||
				st.Lag < tt.lagMin || st.Lag >= tt.lagMin+time.Second || (tt.lagMin == 0 && st.Lag != 0) || st.Rooms != tt.rooms {
				t.Fatalf("status %+v", st)
			}
			if st.LastError != "" && st.LastErrorAt.IsZero() {
				t.Errorf("LastErrorAt %v with LastError %q", st.LastErrorAt, st.LastError)
			}
			want := 0.0
			if tt.reachable {
				want = 1
			}
			if got := testutil.ToFloat64(m.Reachable); got != want {
				t.Errorf("reachable gauge %v, want %v", got, want)
			}
			if got := testutil.ToFloat64(m.Rows); got != float64(tt.rows) {
				t.Errorf("rows counter %v, want %v", got, tt.rows)
			}
			if got := testutil.ToFloat64(m.Lag); got != st.Lag.Seconds() {
				t.Errorf("lag gauge %v, want %v", got, st.Lag.Seconds())
			}
		})
	}
	r, _ := newRecorder()
	r.ReadTx(2 * time.Millisecond)
	r.ReadTx(time.Millisecond)
	if got := r.Status().MaxReadTx; got != 2*time.Millisecond {
		t.Errorf("MaxReadTx = %v", got)
	}
}

// Lag is the age of what is pending now: it grows while the sink has not applied the
// rows read, and is 0 from the moment it has, however old they were.
func TestLagIsTheAgeOfWhatIsPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, m := newRecorder()
		r.Pending(events(ystore.EventUpdates, time.Second))
		time.Sleep(10 * time.Second) // the sink is slow
		if got := r.Status().Lag; got != 11*time.Second {
			t.Fatalf("lag %v while pending, want 11s", got)
		}
		if got := testutil.ToFloat64(m.Lag); got != 11 {
			t.Fatalf("lag gauge %v while pending, want 11", got)
		}
		r.Read(events(ystore.EventUpdates, 11*time.Second), 1)
		time.Sleep(time.Minute) // idle, caught up
		if got := r.Status().Lag; got != 0 {
			t.Fatalf("lag %v once applied and idle, want 0", got)
		}
		if got := testutil.ToFloat64(m.Lag); got != 0 {
			t.Fatalf("lag gauge %v once applied, want 0", got)
		}
	})
}

// FirstRead is closed by the first read recorded, failed or not, and by nothing before.
func TestFirstRead(t *testing.T) {
	for name, first := range map[string]func(r *Recorder){
		"read":   func(r *Recorder) { r.Read(nil, 0) },
		"failed": func(r *Recorder) { r.Fail(errors.New("unreachable")) },
	} {
		r, _ := newRecorder()
		r.Pending(events(ystore.EventUpdates, time.Second))
		r.ReadTx(time.Millisecond)
		select {
		case <-r.FirstRead():
			t.Fatalf("%s: closed before any read", name)
		default:
		}
		first(r)
		select {
		case <-r.FirstRead():
		default:
			t.Fatalf("%s: not closed by the first read", name)
		}
		r.Read(nil, 0) // and later reads leave it closed
		r.Fail(errors.New("again"))
	}
}
