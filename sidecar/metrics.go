package sidecar

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
)

// Metrics are the sidecar's own Prometheus collectors, shared by the instances on one
// Registerer (hub mode's users): rows applied, decode errors, apply latency, rooms and
// changes flushed. The tailers' progress is the store's (ystore/internal/tailstatus).
type Metrics struct {
	rowsApplied     prometheus.Counter
	decodeErrors    prometheus.Counter
	applySeconds    prometheus.Histogram
	commitToApplied prometheus.Histogram
	liveRooms       prometheus.Gauge // moved by each instance's changes: the sum over them
	degradedRooms   prometheus.Gauge // the same
	divergences     prometheus.Counter
	storeGaps       prometheus.Counter
	changesFlushed  prometheus.Counter
	versionsKept    prometheus.Gauge // moved by each instance's changes: the sum over them
	roomsRefused    *prometheus.CounterVec
}

// NewMetrics returns the collectors registered on reg (nil: none).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := promreg.On(reg)
	m := &Metrics{
		rowsApplied: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Name: "rows_applied_total",
			Help: "Y-store rows applied to live documents."})),
		decodeErrors: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Name: "decode_errors_total",
			Help: "Y-store rows skipped because they did not decode or nested shared types too deep."})),
		applySeconds: promreg.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: promreg.Namespace, Name: "apply_seconds",
			Help: "Time to apply one row to its live document.", Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12)})),
		commitToApplied: promreg.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: promreg.Namespace, Name: "commit_to_applied_seconds",
			Help: "Delay from a row's commit in the store to its application.", Buckets: prometheus.ExponentialBuckets(1e-4, 2.5, 14)})),
		liveRooms: promreg.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: promreg.Namespace, Name: "live_rooms",
			Help: "Notebook rooms held as live documents."})),
		degradedRooms: promreg.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: promreg.Namespace, Name: "degraded_rooms",
			Help: "Notebook rooms degraded: an undecodable row skipped, a live document that differed from the server's saved file, or updates missing from the store."})),
		divergences: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Name: "divergences_total",
			Help: "Live notebooks found different from the file the Jupyter server saved, with no row changing their content after the save."})),
		storeGaps: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Name: "store_gaps_total",
			Help: "Rooms whose updates waited store.gap_after for one missing from the store (a lost write)."})),
		changesFlushed: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Name: "changes_flushed_total",
			Help: "Debounced notebook changes handed to the publisher."})),
		versionsKept: promreg.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: promreg.Namespace, Name: "versions_kept",
			Help: "Notebook versions the rooms keep to answer what changed since them (changes.max_versions, changes.max_age per room)."})),
		roomsRefused: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Name: "rooms_refused_total",
			Help: "Rooms not loaded, or dropped, because their store was past its bound: bound=rooms (store.max_rooms, hub.max_rooms_per_user), bytes (store.max_bytes, hub.max_store_bytes_per_user) or memory (store.max_memory, hub.max_memory_per_user)."}, []string{"bound"})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register sidecar metrics: %w", err)
	}
	for _, bound := range []string{rooms.BoundRooms, rooms.BoundBytes} {
		m.roomsRefused.WithLabelValues(bound) // exported at 0 from the start
	}
	return m, nil
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

// hubMetrics are hub mode's own collectors; its users' instances feed the shared ones.
type hubMetrics struct {
	loads, releases, swaps prometheus.Counter
	loadSeconds            prometheus.Histogram
}

// newHubMetrics returns the collectors registered on reg (nil: none); users counts the
// active users and those of them not ready, read at each scrape (the unauthenticated
// /readyz tells no count).
func newHubMetrics(reg prometheus.Registerer, users func() (active, unready int)) (*hubMetrics, error) {
	r := promreg.On(reg)
	promreg.Register(r, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: promreg.Namespace, Subsystem: "hub", Name: "users_active",
		Help: "Users whose store is loaded or loading (a tenant each)."}, func() float64 { a, _ := users(); return float64(a) }))
	promreg.Register(r, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: promreg.Namespace, Subsystem: "hub", Name: "users_unready",
		Help: "Active users not served yet or not ready: a store still loading, unreachable, behind or degraded, or files refused."}, func() float64 { _, u := users(); return float64(u) }))
	m := &hubMetrics{
		loads: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "hub", Name: "user_loads_total",
			Help: "Users whose store was loaded because they made a request while not active."})),
		releases: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "hub", Name: "user_releases_total",
			Help: "Users released after hub.idle_timeout without a session or request."})),
		swaps: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "hub", Name: "directory_swaps_total",
			Help: "Users' directories found replaced (renamed, or a link put in their place) after the user's tenant opened them; the user is refused until the tenant is released."})),
		loadSeconds: promreg.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: promreg.Namespace, Subsystem: "hub", Name: "user_load_seconds",
			Help: "Time from a user's first request to their store's first read.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register hub metrics: %w", err)
	}
	return m, nil
}
