package subscribers

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
)

// metrics are the registry's gauges, shared by the registries on one Registerer (hub
// mode's users), moved by each registry's own changes so that the series is the sum.
type metrics struct {
	sessions      *prometheus.GaugeVec
	subscriptions prometheus.Gauge
}

// newMetrics returns the collectors registered on reg (nil: none).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	r := promreg.On(reg)
	m := &metrics{
		sessions: promreg.Register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "sessions",
			Help: "2025-11-25 sessions and 2026-07-28 subscription streams open."}, []string{"era"})),
		subscriptions: promreg.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "subscriptions",
			Help: "resource URIs subscribed, over all sessions."})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register mcp subscriber metrics: %w", err)
	}
	for _, era := range []string{Era20251125, Era20260728} {
		m.sessions.WithLabelValues(era)
	}
	return m, nil
}
