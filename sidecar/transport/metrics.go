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
	promreg.Register(r, conns.RefusedCounter("mcp"))
	if err := r.Err(); err != nil {
		return metrics{}, fmt.Errorf("register mcp transport metrics: %w", err)
	}
	return m, nil
}
