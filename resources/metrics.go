package resources

import "github.com/prometheus/client_golang/prometheus"

// metrics are the server's own collectors; the subscriber registry, the
// publisher and the hooks register theirs.
type metrics struct {
	publisherErrors prometheus.Counter
}

func newMetrics() metrics {
	return metrics{
		publisherErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "publisher_errors_total",
			Help: "changes the configured publisher did not accept.",
		}),
	}
}

func (m metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.publisherErrors}
}
