package resources

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/conns"
)

// metrics are the server's own collectors; the subscriber registry, the
// publisher and the hooks register theirs.
type metrics struct {
	publisherErrors    prometheus.Counter
	refusals           *prometheus.CounterVec
	resumed            prometheus.Counter
	resumeRefused      prometheus.Counter
	connectionsRefused prometheus.Counter
}

func newMetrics() metrics {
	return metrics{
		publisherErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "publisher_errors_total",
			Help: "changes the configured publisher did not accept.",
		}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "limit_refusals_total",
			Help: "2025-11-25 sessions, subscriptions, listen filter URIs and use_notebook bindings refused, by limit: sessions (initialize beyond max_sessions), uri_bytes, not_a_resource, withheld, subscriptions and subscription_bytes (per session), listen_uris (per filter), names, path_bytes, not_a_notebook_path.",
		}, []string{"limit"}),
		resumed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "streams_resumed_total",
			Help: "2025-11-25 GET streams resumed with Last-Event-ID.",
		}),
		resumeRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "streams_resume_refused_total",
			Help: "GET streams whose Last-Event-ID was past the replay buffer: their session was ended (404).",
		}),
		connectionsRefused: conns.RefusedCounter("mcp"),
	}
}

func (m metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.publisherErrors, m.refusals, m.resumed, m.resumeRefused, m.connectionsRefused}
}
