package transport

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/conns"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
)

// metrics are the HTTP transport's collectors, shared by the transports on one
// Registerer (hub mode's users). Both transports register them, and the refusals
// of the MCP listener (counted by sidecar/front in single mode), so that /metrics
// names the same series whatever the transport and mode.
type metrics struct {
	resumed       prometheus.Counter
	resumeRefused prometheus.Counter
	delivery      *deliveryMetrics
}

// The protocol eras, as the delivery series label them.
const (
	era20251125 = "2025-11-25"
	era20260728 = "2026-07-28"
)

// deliveryMetrics count what the outboxes do, by era: notifications written, and
// those dropped with the sessions and streams given up on.
type deliveryMetrics struct {
	sent           map[string]prometheus.Counter // looked up once, not per notification
	dropped, ended *prometheus.CounterVec
}

// newMetrics returns the collectors registered on reg (nil: none).
func newMetrics(reg prometheus.Registerer) (metrics, error) {
	r := promreg.On(reg)
	m := metrics{
		resumed: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "streams_resumed_total",
			Help: "2025-11-25 GET streams resumed with Last-Event-ID."})),
		resumeRefused: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "streams_resume_refused_total",
			Help: "GET streams whose Last-Event-ID was past the replay buffer: their session was ended (404)."})),
	}
	sent := promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "notifications_sent_total",
		Help: "notifications handed to client sessions, by protocol era."}, []string{"era"}))
	dropped := promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "notifications_dropped_total",
		Help: "notifications dropped because a session or listen stream could not take them (it is ended too)."}, []string{"era"}))
	ended := promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "undeliverable_ended_total",
		Help: "sessions (2025-11-25) and listen streams (2026-07-28) ended because they stopped taking notifications."}, []string{"era"}))
	promreg.Register(r, conns.RefusedCounter("mcp"))
	if err := r.Err(); err != nil {
		return metrics{}, fmt.Errorf("register mcp transport metrics: %w", err)
	}
	m.delivery = &deliveryMetrics{sent: map[string]prometheus.Counter{}, dropped: dropped, ended: ended}
	for _, era := range []string{era20251125, era20260728} {
		m.delivery.sent[era] = sent.WithLabelValues(era)
	}
	return m, nil
}
