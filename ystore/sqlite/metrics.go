package sqlite

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
)

// subsystem names the tailer's series (sqlite_*).
const subsystem = "sqlite"

// Resync reasons, the values of the reason label of sqlite_resyncs_total.
const (
	reasonStart    = "start"
	reasonHistory  = "history"
	reasonReplaced = "replaced"
	reasonReopened = "reopened"
	reasonReload   = "reload"
)

// metrics are the tailer's Prometheus collectors, shared by the tailers on one
// Registerer; its status series are tailstatus's.
type metrics struct {
	readTx    prometheus.Histogram
	readTxCPU prometheus.Histogram
	busy      prometheus.Counter

	decompressErrors prometheus.Counter
	resyncs          *prometheus.CounterVec
	resyncSeconds    prometheus.Counter
	skipped          prometheus.Counter
}

// txBuckets resolve read transactions around the 5 ms budget.
var txBuckets = []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 25e-3, 100e-3, 1}

// newMetrics returns the collectors registered on reg (nil: none).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	r := promreg.On(reg)
	m := &metrics{
		readTx: promreg.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "read_tx_seconds",
			Help: "Wall-clock duration of each read transaction on the SQLite Y-store, begin to commit.", Buckets: txBuckets})),
		readTxCPU: promreg.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "read_tx_cpu_seconds",
			Help: "Thread CPU time of each read transaction on the SQLite Y-store (its own work, without scheduling delays).", Buckets: txBuckets})),
		busy: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "busy_retries_total",
			Help: "Read transactions retried because the writer held its lock."})),
		decompressErrors: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "decompress_errors_total",
			Help: "Rows or checkpoints that Config.Decompress rejected (delivered as stored)."})),
		resyncs: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "resyncs_total",
			Help: "Full reads of the store: at start, after a history rewrite, after the file was replaced, after it was opened again (a failed read, a write outside SQLite), to deliver rooms asked for again (Reload)."}, []string{"reason"})),
		resyncSeconds: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "resync_seconds_total",
			Help: "Wall-clock seconds spent in full reads of the store (sqlite_resyncs_total), their delivery included; one after another are spaced so that they take at most a fifth of the time."})),
		skipped: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "rows_skipped_total",
			Help: "Rows of rooms past Config.MaxRooms (hub.max_rooms_per_user), neither read nor delivered: counted at each read of the whole store, and as they are committed."})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register sqlite tailer metrics: %w", err)
	}
	for _, reason := range []string{reasonStart, reasonHistory, reasonReplaced, reasonReopened, reasonReload} {
		m.resyncs.WithLabelValues(reason)
	}
	return m, nil
}
