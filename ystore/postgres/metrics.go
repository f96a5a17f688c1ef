package postgres

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
)

// subsystem names the Postgres Y-store's series (postgres_*).
const subsystem = "postgres"

// Wake-up causes, the values of the by label of postgres_wakeups_total.
const (
	wakeNotify = "notify"
	wakePoll   = "poll"
)

// readBuckets resolve catch-up reads from sub-millisecond polls to multi-second loads.
var readBuckets = []float64{100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3, 1, 10}

// tailMetrics are the Tailer's Prometheus collectors, shared by the tailers on one
// Registerer; its status series are tailstatus's.
type tailMetrics struct {
	read     prometheus.Histogram
	retries  prometheus.Counter
	wakeups  *prometheus.CounterVec
	rebuilds prometheus.Counter
	skipped  prometheus.Counter
}

// newTailMetrics returns the Tailer's collectors registered on reg (nil: none).
func newTailMetrics(reg prometheus.Registerer) (*tailMetrics, error) {
	r := promreg.On(reg)
	m := &tailMetrics{
		read: promreg.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "read_seconds",
			Help: "Duration of each catch-up read transaction on the Postgres Y-store, begin to commit.", Buckets: readBuckets})),
		retries: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "reconnects_total",
			Help: "Connection or read failures of the Postgres Y-store tailer, each followed by a reconnect."})),
		wakeups: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "wakeups_total",
			Help: "Catch-up reads of the Postgres Y-store tailer by cause: a NOTIFY or the poll interval."}, []string{"by"})),
		rebuilds: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "room_rebuilds_total",
			Help: "Rooms rebuilt (Reset or Removed) after a reset row, or reloaded because transaction ids went backwards."})),
		skipped: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "rows_skipped_total",
			Help: "Rows of rooms past Config.MaxRooms (hub.max_rooms_per_user), neither read nor delivered: counted at each load, and as they are committed."})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register postgres y-store metrics: %w", err)
	}
	for _, by := range []string{wakeNotify, wakePoll} {
		m.wakeups.WithLabelValues(by)
	}
	return m, nil
}

// shipMetrics are the Shipper's Prometheus collectors.
type shipMetrics struct {
	rows    prometheus.Counter
	resets  prometheus.Counter
	batch   prometheus.Histogram
	retries prometheus.Counter
}

// newShipMetrics returns the Shipper's collectors registered on reg (nil: none).
func newShipMetrics(reg prometheus.Registerer) (*shipMetrics, error) {
	r := promreg.On(reg)
	m := &shipMetrics{
		rows: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "shipped_rows_total",
			Help: "Rows appended to the Postgres Y-store by ship mode."})),
		resets: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "shipped_resets_total",
			Help: "Room histories replaced or removed in the Postgres Y-store by ship mode."})),
		batch: promreg.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "ship_batch_seconds",
			Help: "Duration of each committed ship transaction.", Buckets: readBuckets})),
		retries: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: subsystem, Name: "ship_retries_total",
			Help: "Ship transactions that failed and were retried."})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register postgres y-store metrics: %w", err)
	}
	return m, nil
}
