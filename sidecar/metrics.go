package sidecar

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// Metrics are the sidecar's own Prometheus collectors: rows applied, decode errors,
// apply latency, rooms, and the tailer's progress.
type Metrics struct {
	rowsApplied     prometheus.Counter
	decodeErrors    prometheus.Counter
	applySeconds    prometheus.Histogram
	commitToApplied prometheus.Histogram
	liveRooms       prometheus.Gauge
	degradedRooms   prometheus.Gauge
	changesFlushed  prometheus.Counter
}

const namespace = "jupyter_mcp_sidecar"

// NewMetrics creates the collectors and registers them, with gauges that read the
// tailer's status, on reg (which may be nil for none).
func NewMetrics(reg prometheus.Registerer, status func() ystore.Status) *Metrics {
	m := &Metrics{
		rowsApplied: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "rows_applied_total",
			Help: "Y-store rows applied to live documents.",
		}),
		decodeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "decode_errors_total",
			Help: "Y-store rows skipped because they did not decode or nested shared types too deep.",
		}),
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "apply_seconds",
			Help:    "Time to apply one row to its live document.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12),
		}),
		commitToApplied: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "commit_to_applied_seconds",
			Help:    "Delay from a row's commit in the store to its application.",
			Buckets: prometheus.ExponentialBuckets(1e-4, 2.5, 14),
		}),
		liveRooms: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "live_rooms",
			Help: "Notebook rooms held as live documents.",
		}),
		degradedRooms: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "degraded_rooms",
			Help: "Notebook rooms that skipped an undecodable row.",
		}),
		changesFlushed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "changes_flushed_total",
			Help: "Debounced notebook changes handed to the publisher.",
		}),
	}
	if reg == nil {
		return m
	}
	reg.MustRegister(m.rowsApplied, m.decodeErrors, m.applySeconds, m.commitToApplied,
		m.liveRooms, m.degradedRooms, m.changesFlushed)
	if status != nil {
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Namespace: namespace, Name: "rows_tailed_total",
				Help: "Rows the tailer read from the Y-store.",
			}, func() float64 { return float64(status().RowsTailed) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Namespace: namespace, Name: "tail_lag_seconds",
				Help: "Age of the oldest row the tailer read and has not yet applied; 0 when caught up.",
			}, func() float64 { return status().Lag.Seconds() }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Namespace: namespace, Name: "store_reachable",
				Help: "1 while the Y-store can be read.",
			}, func() float64 {
				if status().Reachable {
					return 1
				}
				return 0
			}),
		)
	}
	return m
}

func (m *Metrics) observeApply(start time.Time, committed float64) {
	now := time.Now()
	m.applySeconds.Observe(now.Sub(start).Seconds())
	if committed > 0 {
		if d := float64(now.UnixNano())/1e9 - committed; d >= 0 {
			m.commitToApplied.Observe(d)
		}
	}
}

func (m *Metrics) setRooms(n int)    { m.liveRooms.Set(float64(n)) }
func (m *Metrics) setDegraded(n int) { m.degradedRooms.Set(float64(n)) }
