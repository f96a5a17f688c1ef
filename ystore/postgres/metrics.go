package postgres

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Wake-up causes, the values of the by label of jupyter_mcp_sidecar_postgres_wakeups_total.
const (
	wakeNotify = "notify"
	wakePoll   = "poll"
)

// readBuckets resolve catch-up reads from sub-millisecond polls to multi-second loads.
var readBuckets = []float64{100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3, 1, 10}

// tailMetrics are the Tailer's Prometheus collectors.
type tailMetrics struct {
	rows      prometheus.Counter
	read      prometheus.Histogram
	lag       prometheus.Gauge
	retries   prometheus.Counter
	wakeups   *prometheus.CounterVec
	rebuilds  prometheus.Counter
	reachable prometheus.Gauge
}

func newTailMetrics() *tailMetrics {
	m := &tailMetrics{
		rows: counter("jupyter_mcp_sidecar_postgres_rows_tailed_total",
			"Rows delivered by the Postgres Y-store tailer, loads included."),
		read: histogram("jupyter_mcp_sidecar_postgres_read_seconds",
			"Duration of each catch-up read transaction on the Postgres Y-store, begin to commit."),
		lag: gauge("jupyter_mcp_sidecar_postgres_tail_lag_seconds",
			"Age of the oldest update row read and not yet applied; 0 when caught up."),
		retries: counter("jupyter_mcp_sidecar_postgres_reconnects_total",
			"Connection or read failures of the Postgres Y-store tailer, each followed by a reconnect."),
		wakeups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jupyter_mcp_sidecar_postgres_wakeups_total",
			Help: "Catch-up reads of the Postgres Y-store tailer by cause: a NOTIFY or the poll interval.",
		}, []string{"by"}),
		rebuilds: counter("jupyter_mcp_sidecar_postgres_room_rebuilds_total",
			"Rooms rebuilt (Reset or Removed) after a reset row, or reloaded because transaction ids went backwards."),
		reachable: gauge("jupyter_mcp_sidecar_postgres_reachable", "1 while the Postgres Y-store can be read."),
	}
	for _, by := range []string{wakeNotify, wakePoll} {
		m.wakeups.WithLabelValues(by)
	}
	return m
}

func (m *tailMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.rows, m.read, m.lag, m.retries, m.wakeups, m.rebuilds, m.reachable}
}

// shipMetrics are the Shipper's Prometheus collectors.
type shipMetrics struct {
	rows    prometheus.Counter
	resets  prometheus.Counter
	batch   prometheus.Histogram
	retries prometheus.Counter
}

func newShipMetrics() *shipMetrics {
	return &shipMetrics{
		rows: counter("jupyter_mcp_sidecar_postgres_shipped_rows_total",
			"Rows appended to the Postgres Y-store by ship mode."),
		resets: counter("jupyter_mcp_sidecar_postgres_shipped_resets_total",
			"Room histories replaced or removed in the Postgres Y-store by ship mode."),
		batch: histogram("jupyter_mcp_sidecar_postgres_ship_batch_seconds",
			"Duration of each committed ship transaction."),
		retries: counter("jupyter_mcp_sidecar_postgres_ship_retries_total",
			"Ship transactions that failed and were retried."),
	}
}

func (m *shipMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.rows, m.resets, m.batch, m.retries}
}

// counter returns a new counter.
func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// gauge returns a new gauge.
func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// histogram returns a new histogram with readBuckets.
func histogram(name, help string) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: readBuckets})
}

// register adds collectors to reg, if any.
func register(reg prometheus.Registerer, cs []prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register postgres y-store metrics: %w", err)
		}
	}
	return nil
}
