package tailstatus

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// Track counts status, until the returned untrack is called, in the series every
// tailer on reg shares: rows_tailed_total (the sum over the tailers, the rows of those
// untracked included), tail_lag_seconds (the largest lag) and store_reachable (1 while
// every tailer's store can be read); and in the deprecated twins of one backend, named
// after its subsystem (<subsystem>_rows_tailed_total, <subsystem>_tail_lag_seconds,
// <subsystem>_reachable), served over that backend's tailers for one more release. With
// reg nil nothing is counted.
func Track(reg prometheus.Registerer, subsystem string, status func() ystore.Status) (untrack func(), err error) {
	if reg == nil {
		return func() {}, nil
	}
	r := promreg.On(reg)
	all := promreg.Register(r, newSeries(""))
	backend := promreg.Register(r, newSeries(subsystem))
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register tailer status metrics: %w", err)
	}
	t := &tailer{status: status}
	all.add(t)
	backend.add(t)
	var once sync.Once
	return func() { once.Do(func() { all.remove(t); backend.remove(t) }) }, nil
}

// tailer is one tracked tailer.
type tailer struct{ status func() ystore.Status }

// series is a collector of the status series over the tailers tracked on one
// Registerer: it computes them at scrape time from each tailer's status.
type series struct {
	rows, lag, reachable *prometheus.Desc
	waiting              *prometheus.Desc // nil in the deprecated twins

	mu      sync.Mutex
	tailers map[*tailer]struct{}
	retired uint64 // rows of the tailers untracked
}

// newSeries returns the shared series, subsystem "", or a backend's deprecated twins.
func newSeries(subsystem string) *series {
	s := &series{tailers: map[*tailer]struct{}{}}
	rows := prometheus.BuildFQName(promreg.Namespace, "", "rows_tailed_total")
	lag := prometheus.BuildFQName(promreg.Namespace, "", "tail_lag_seconds")
	reachable := prometheus.BuildFQName(promreg.Namespace, "", "store_reachable")
	if subsystem == "" {
		s.rows = prometheus.NewDesc(rows, "Rows the tailers delivered from the Y-store, loads and resyncs included (the sum over the tailers, released ones included).", nil, nil)
		s.lag = prometheus.NewDesc(lag, "Age of the oldest row a tailer read and has not yet applied, the largest over the tailers; 0 when caught up.", nil, nil)
		s.reachable = prometheus.NewDesc(reachable, "1 while every tailer's Y-store that exists can be read.", nil, nil)
		s.waiting = prometheus.NewDesc(prometheus.BuildFQName(promreg.Namespace, "", "stores_waiting"),
			"Tailers whose Y-store does not exist yet (no notebook opened since the server started): nothing to serve, nothing wrong.", nil, nil)
		return s
	}
	deprecated := func(name, use string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(promreg.Namespace, subsystem, name), "Deprecated: use "+use+" (this name is served until the next release).", nil, nil)
	}
	s.rows = deprecated("rows_tailed_total", rows)
	s.lag = deprecated("tail_lag_seconds", lag)
	s.reachable = deprecated("reachable", reachable)
	return s
}

func (s *series) add(t *tailer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tailers[t] = struct{}{}
}

// remove stops tracking t; its rows stay counted.
func (s *series) remove(t *tailer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retired += t.status().RowsTailed
	delete(s.tailers, t)
}

// Describe sends the series' descriptions.
func (s *series) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.rows
	ch <- s.lag
	ch <- s.reachable
	if s.waiting != nil {
		ch <- s.waiting
	}
}

// Collect sends the series over the tailers tracked now.
func (s *series) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	rows, lag, reachable, waiting := s.retired, 0.0, 1.0, 0
	for t := range s.tailers {
		st := t.status()
		rows += st.RowsTailed
		lag = max(lag, st.Lag.Seconds())
		switch {
		case st.Absent:
			waiting++
		case !st.Reachable:
			reachable = 0
		}
	}
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(s.rows, prometheus.CounterValue, float64(rows))
	ch <- prometheus.MustNewConstMetric(s.lag, prometheus.GaugeValue, lag)
	ch <- prometheus.MustNewConstMetric(s.reachable, prometheus.GaugeValue, reachable)
	if s.waiting != nil {
		ch <- prometheus.MustNewConstMetric(s.waiting, prometheus.GaugeValue, float64(waiting))
	}
}
