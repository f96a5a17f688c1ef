package sqlite

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Resync reasons, the values of the reason label of jupyter_mcp_sidecar_sqlite_resyncs_total.
const (
	reasonStart    = "start"
	reasonHistory  = "history"
	reasonReplaced = "replaced"
	reasonReopened = "reopened"
)

// metrics are the tailer's Prometheus collectors.
type metrics struct {
	rows      prometheus.Counter
	readTx    prometheus.Histogram
	readTxCPU prometheus.Histogram
	lag       prometheus.Gauge
	busy      prometheus.Counter
	resyncs   *prometheus.CounterVec
	reachable prometheus.Gauge

	decompressErrors prometheus.Counter
}

// txBuckets resolve read transactions around the 5 ms budget.
var txBuckets = []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 25e-3, 100e-3, 1}

func newMetrics() *metrics {
	m := &metrics{
		rows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jupyter_mcp_sidecar_sqlite_rows_tailed_total",
			Help: "Rows delivered by the SQLite Y-store tailer, resyncs included.",
		}),
		readTx: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "jupyter_mcp_sidecar_sqlite_read_tx_seconds",
			Help:    "Wall-clock duration of each read transaction on the SQLite Y-store, begin to commit.",
			Buckets: txBuckets,
		}),
		readTxCPU: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "jupyter_mcp_sidecar_sqlite_read_tx_cpu_seconds",
			Help:    "Thread CPU time of each read transaction on the SQLite Y-store (its own work, without scheduling delays).",
			Buckets: txBuckets,
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jupyter_mcp_sidecar_sqlite_tail_lag_seconds",
			Help: "Age of the oldest row read and not yet applied; 0 when caught up.",
		}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jupyter_mcp_sidecar_sqlite_busy_retries_total",
			Help: "Read transactions retried because the writer held its lock.",
		}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jupyter_mcp_sidecar_sqlite_resyncs_total",
			Help: "Full reads of the store: at start, after a history rewrite, after the file was replaced, after it was opened again (a failed read, a write outside SQLite).",
		}, []string{"reason"}),
		reachable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jupyter_mcp_sidecar_sqlite_reachable",
			Help: "1 while the SQLite Y-store file can be read.",
		}),
		decompressErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jupyter_mcp_sidecar_sqlite_decompress_errors_total",
			Help: "Rows or checkpoints that Config.Decompress rejected (delivered as stored).",
		}),
	}
	for _, r := range []string{reasonStart, reasonHistory, reasonReplaced, reasonReopened} {
		m.resyncs.WithLabelValues(r)
	}
	return m
}

// register adds the collectors to reg.
func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.rows, m.readTx, m.readTxCPU, m.lag, m.busy, m.resyncs, m.reachable, m.decompressErrors} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register sqlite tailer metrics: %w", err)
		}
	}
	return nil
}
