package subscribers

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
)

// metrics are the registry's collectors, shared by the registries on one Registerer
// (hub mode's users): notifications sent and dropped, and the gauges of sessions and
// subscriptions, moved by each registry's own changes so that the series is the sum.
type metrics struct {
	sent, dropped, ended *prometheus.CounterVec
	sentTo               map[string]prometheus.Counter // sent, by era: looked up once, not per notification
	sessions             *prometheus.GaugeVec
	subscriptions        prometheus.Gauge
}

// newMetrics returns the collectors registered on reg (nil: none).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	r := promreg.On(reg)
	m := &metrics{
		sent: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "notifications_sent_total",
			Help: "notifications handed to client sessions, by protocol era."}, []string{"era"})),
		dropped: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "notifications_dropped_total",
			Help: "notifications dropped because a session or listen stream could not take them (it is ended too)."}, []string{"era"})),
		ended: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "undeliverable_ended_total",
			Help: "sessions (2025-11-25) and listen streams (2026-07-28) ended because they stopped taking notifications."}, []string{"era"})),
		sessions: promreg.Register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "sessions",
			Help: "2025-11-25 sessions and 2026-07-28 subscription streams open."}, []string{"era"})),
		subscriptions: promreg.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "subscriptions",
			Help: "resource URIs subscribed, over all sessions."})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register mcp subscriber metrics: %w", err)
	}
	m.sentTo = map[string]prometheus.Counter{}
	for _, era := range []string{Era20251125, Era20260728} {
		m.sessions.WithLabelValues(era)
		m.sentTo[era] = m.sent.WithLabelValues(era)
	}
	return m, nil
}
