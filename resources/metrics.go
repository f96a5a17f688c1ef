package resources

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
)

// metrics are the server's own collectors, shared by the servers on one Registerer;
// the subscriber registry, the publisher, the hooks and the transport register theirs.
type metrics struct {
	publisherErrors prometheus.Counter
	refusals        *prometheus.CounterVec
	invalidCells    prometheus.Counter
	changesReads    *prometheus.CounterVec
}

// newMetrics returns the collectors registered on reg (nil: none).
func newMetrics(reg prometheus.Registerer) (metrics, error) {
	r := promreg.On(reg)
	m := metrics{
		publisherErrors: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "publisher_errors_total",
			Help: "changes the configured publisher did not accept."})),
		refusals: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "limit_refusals_total",
			Help: "2025-11-25 sessions, subscriptions, listen filter URIs, resources/read URIs and use_notebook bindings refused, by limit: sessions (initialize beyond max_sessions), uri_bytes (a subscribed, listened or read URI over max_uri_bytes), not_a_resource, withheld, subscriptions and subscription_bytes (per session), listen_uris (per filter), names, path_bytes, not_a_notebook_path."}, []string{"limit"})),
		invalidCells: promreg.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "invalid_cells_served_total",
			Help: "cells served in notebook and cell reads that are not valid nbformat 4.5 (served as the Jupyter server holds them, named in the read's _meta)."})),
		changesReads: promreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "mcp", Name: "changes_reads_total",
			Help: "Reads of notebook://{name}/changes?since=, by outcome: ok, cached (an answer already made), or why the notebook is to be read: unknown_version, malformed_version, cells_without_ids, too_large, unversioned."}, []string{"outcome"})),
	}
	if err := r.Err(); err != nil {
		return metrics{}, fmt.Errorf("register mcp metrics: %w", err)
	}
	return m, nil
}
