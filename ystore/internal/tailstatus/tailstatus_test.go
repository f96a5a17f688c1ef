package tailstatus

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// newRecorder returns a Recorder tracked, as backend "test", on the registry returned.
func newRecorder(t *testing.T) (*Recorder, *prometheus.Registry) {
	r, reg := New(), prometheus.NewPedanticRegistry()
	if _, err := Track(reg, "test", r.Status); err != nil {
		t.Fatal(err)
	}
	return r, reg
}

// value is the value of the series name (without the namespace) on reg.
func value(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return testenv.Metric(t, reg, "jupyter_mcp_sidecar_"+name)
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
		loading   bool
	}{
		{"new", func(*Recorder) {}, false, "", 0, 0, 0, false},
		{"failed", func(r *Recorder) { r.Fail(errors.New("boom")) }, false, "boom", 0, 0, 0, false},
		{"load is not lag", func(r *Recorder) { r.Read(events(ystore.EventReset, time.Hour), 1) }, true, "", 1, 0, 1, false},
		{"a pending load is not lag", func(r *Recorder) { r.Pending(events(ystore.EventReset, time.Hour)) }, false, "", 0, 0, 0, false},
		{"pending updates are, from the oldest", func(r *Recorder) {
			r.Pending(events(ystore.EventUpdates, 3*time.Second, 5*time.Second))
		}, false, "", 0, 5 * time.Second, 0, false},
		{"applied updates are not", func(r *Recorder) {
			r.Pending(events(ystore.EventUpdates, 5*time.Second, 3*time.Second))
			r.Read(events(ystore.EventUpdates, 5*time.Second, 3*time.Second), 2)
		}, true, "", 2, 0, 2, false},
		{"an old row applied is not lag, idle or not", func(r *Recorder) {
			old := events(ystore.EventUpdates, time.Hour)
			r.Pending(old)
			r.Read(old, 1)
			r.Read(nil, 1)
		}, true, "", 1, 0, 1, false},
		{"a failed read leaves its rows pending", func(r *Recorder) {
			r.Pending(events(ystore.EventUpdates, 3*time.Second))
			r.Fail(errors.New("boom"))
		}, false, "boom", 0, 3 * time.Second, 0, false},
		{"read clears the error", func(r *Recorder) {
			r.Fail(errors.New("boom"))
			r.Read(nil, 4)
		}, true, "", 0, 0, 4, false},
		{"error after a read", func(r *Recorder) {
			r.Read(nil, 4)
			r.Fail(errors.New("boom"))
		}, false, "boom", 0, 0, 4, false},
		{"a load under way, its streamed rows counted", func(r *Recorder) {
			r.Load(ystore.LoadProgress{Active: true, Total: 3})
			r.Streamed(events(ystore.EventReset, time.Hour, time.Hour)[0].Rows)
		}, false, "", 2, 0, 0, true},
		{"a read ends the load", func(r *Recorder) {
			r.Load(ystore.LoadProgress{Active: true, Total: 3})
			r.Read(nil, 2)
		}, true, "", 0, 0, 2, false},
		{"a failure ends the load", func(r *Recorder) {
			r.Load(ystore.LoadProgress{Active: true, Total: 3})
			r.Fail(errors.New("boom"))
		}, false, "boom", 0, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, reg := newRecorder(t)
			tt.run(r)
			st := r.Status()
			if st.Reachable != tt.reachable || st.LastError != tt.lastError || st.RowsTailed != tt.rows ||
				st.Lag < tt.lagMin || st.Lag >= tt.lagMin+time.Second || (tt.lagMin == 0 && st.Lag != 0) || st.Rooms != tt.rooms || st.Load.Active != tt.loading {
				t.Fatalf("status %+v", st)
			}
			if st.LastError != "" && st.LastErrorAt.IsZero() {
				t.Errorf("LastErrorAt %v with LastError %q", st.LastErrorAt, st.LastError)
			}
			want := 0.0
			if tt.reachable {
				want = 1
			}
			for _, prefix := range []string{"", "test_"} { // the shared series and the backend's twins
				reachable := map[string]string{"": "store_reachable", "test_": "test_reachable"}[prefix]
				if got := value(t, reg, reachable); got != want {
					t.Errorf("%s %v, want %v", reachable, got, want)
				}
				if got := value(t, reg, prefix+"rows_tailed_total"); got != float64(tt.rows) {
					t.Errorf("%srows_tailed_total %v, want %v", prefix, got, tt.rows)
				}
				if got := value(t, reg, prefix+"tail_lag_seconds"); got < tt.lagMin.Seconds() || got >= (tt.lagMin+time.Second).Seconds() || (tt.lagMin == 0 && got != 0) {
					t.Errorf("%stail_lag_seconds %v, want the status's %v", prefix, got, st.Lag.Seconds())
				}
			}
		})
	}
	r := New()
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
		r, reg := newRecorder(t)
		r.Pending(events(ystore.EventUpdates, time.Second))
		time.Sleep(10 * time.Second) // the sink is slow
		if got := r.Status().Lag; got != 11*time.Second {
			t.Fatalf("lag %v while pending, want 11s", got)
		}
		if got := value(t, reg, "tail_lag_seconds"); got != 11 {
			t.Fatalf("lag gauge %v while pending, want 11", got)
		}
		r.Read(events(ystore.EventUpdates, 11*time.Second), 1)
		time.Sleep(time.Minute) // idle, caught up
		if got := r.Status().Lag; got != 0 {
			t.Fatalf("lag %v once applied and idle, want 0", got)
		}
		if got := value(t, reg, "tail_lag_seconds"); got != 0 {
			t.Fatalf("lag gauge %v once applied, want 0", got)
		}
	})
}

// FirstRead is closed by the first read recorded, failed, finding no store or not, and
// by nothing before.
func TestFirstRead(t *testing.T) {
	for name, first := range map[string]func(r *Recorder){
		"read":   func(r *Recorder) { r.Read(nil, 0) },
		"failed": func(r *Recorder) { r.Fail(errors.New("unreachable")) },
		"absent": func(r *Recorder) { r.Absent() },
	} {
		r := New()
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

// The tailers on one registry share one set of series: rows summed (an untracked
// tailer's rows stay counted), the largest lag, reachable only while every store that
// exists is, the stores not written yet counted;
// each backend's deprecated twins are over its own tailers.
func TestSeriesOverTailers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		track := func(backend string) (*Recorder, func()) {
			r := New()
			untrack, err := Track(reg, backend, r.Status)
			if err != nil {
				t.Fatal(err)
			}
			return r, untrack
		}
		a, _ := track("one")
		b, untrackB := track("one")
		c, untrackC := track("two")
		a.Read(events(ystore.EventReset, time.Hour, time.Hour), 1)
		b.Read(events(ystore.EventReset, time.Hour), 1)
		c.Read(events(ystore.EventReset, time.Hour, time.Hour, time.Hour), 1)
		b.Pending(events(ystore.EventUpdates, 4*time.Second))
		c.Pending(events(ystore.EventUpdates, 2*time.Second))
		check := func(what string, want map[string]float64) {
			t.Helper()
			for name, v := range want {
				if got := value(t, reg, name); got != v {
					t.Errorf("%s: %s %v, want %v", what, name, got, v)
				}
			}
		}
		check("all reachable", map[string]float64{
			"rows_tailed_total": 6, "tail_lag_seconds": 4, "store_reachable": 1, "stores_waiting": 0,
			"one_rows_tailed_total": 3, "one_tail_lag_seconds": 4, "one_reachable": 1,
			"two_rows_tailed_total": 3, "two_tail_lag_seconds": 2, "two_reachable": 1,
		})
		d, untrackD := track("two")
		d.Absent()
		check("one store not written yet", map[string]float64{"store_reachable": 1, "two_reachable": 1, "stores_waiting": 1})
		d.Fail(errors.New("gone"))
		check("that store failing", map[string]float64{"store_reachable": 0, "two_reachable": 0, "stores_waiting": 0})
		d.Absent()
		untrackD()
		c.Fail(errors.New("boom"))
		check("one unreachable", map[string]float64{"store_reachable": 0, "one_reachable": 1, "two_reachable": 0, "stores_waiting": 0})
		untrackC()
		untrackC() // once is enough
		untrackB()
		check("untracked", map[string]float64{
			"rows_tailed_total": 6, "tail_lag_seconds": 0, "store_reachable": 1,
			"one_rows_tailed_total": 3, "one_tail_lag_seconds": 0, "one_reachable": 1,
			"two_rows_tailed_total": 3, "two_tail_lag_seconds": 0, "two_reachable": 1,
		})
	})
}

// Untracked, a nil registry: nothing registered, nothing to undo.
func TestTrackNil(t *testing.T) {
	untrack, err := Track(nil, "one", New().Status)
	if err != nil {
		t.Fatal(err)
	}
	untrack()
}
