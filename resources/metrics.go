package resources

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/conns"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/promreg"
)

// metrics are the server's own collectors, shared by the servers on one Registerer;
// the subscriber registry, the publisher and the hooks register theirs.
type metrics struct {
	publisherErrors    prometheus.Counter
	refusals           *prometheus.CounterVec
	resumed            prometheus.Counter
	resumeRefused      prometheus.Counter
	connectionsRefused prometheus.Counter
}

// newMetrics returns the collectors registered on reg (nil: none).
func newMetrics(reg prometheus.Registerer) (metrics, error) {
	r := promreg.On(reg)
	m := metrics{
		publisherErrors: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "publisher_errors_total",
			Help: "changes the configured publisher did not accept."})),
		refusals: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "limit_refusals_total",
			Help: "2025-11-25 sessions, subscriptions, listen filter URIs and use_notebook bindings refused, by limit: sessions (initialize beyond max_sessions), uri_bytes, not_a_resource, withheld, subscriptions and subscription_bytes (per session), listen_uris (per filter), names, path_bytes, not_a_notebook_path."}, []string{"limit"})),
		resumed: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "streams_resumed_total",
			Help: "2025-11-25 GET streams resumed with Last-Event-ID."})),
		resumeRefused: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "streams_resume_refused_total",
			Help: "GET streams whose Last-Event-ID was past the replay buffer: their session was ended (404)."})),
		connectionsRefused: promreg.Register(r, conns.RefusedCounter("mcp")),
	}
	if err := r.Err(); err != nil {
		return metrics{}, fmt.Errorf("register mcp metrics: %w", err)
	}
	return m, nil
}
