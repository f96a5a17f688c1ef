package subscribers

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the registry's collectors: notifications sent and dropped, and
// gauges of sessions and subscriptions computed at scrape time.
type metrics struct {
	sent, dropped, ended *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "notifications_sent_total",
			Help: "notifications handed to client sessions, by protocol era.",
		}, []string{"era"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "notifications_dropped_total",
			Help: "notifications dropped because a session or listen stream could not take them (it is ended too).",
		}, []string{"era"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "undeliverable_ended_total",
			Help: "sessions (2025-11-25) and listen streams (2026-07-28) ended because they stopped taking notifications.",
		}, []string{"era"}),
	}
}

// Collectors returns the registry's metrics plus gauges computed from it.
func (r *Registry) Collectors() []prometheus.Collector {
	sessions := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "sessions",
		Help: "2025-11-25 sessions and 2026-07-28 subscription streams open.",
	}, []string{"era"})
	return []prometheus.Collector{r.m.sent, r.m.dropped, r.m.ended, gaugeCollector{r: r, sessions: sessions}}
}

// gaugeCollector computes the session and subscription gauges at scrape time.
type gaugeCollector struct {
	r        *Registry
	sessions *prometheus.GaugeVec
}

var subscriptionsDesc = prometheus.NewDesc("jupyter_mcp_sidecar_mcp_subscriptions", "resource URIs subscribed, over all sessions.", nil, nil)

func (g gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	g.sessions.Describe(ch)
	ch <- subscriptionsDesc
}

func (g gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	perEra, subs, _ := g.r.Stats()
	for era, n := range perEra {
		g.sessions.WithLabelValues(era).Set(float64(n))
	}
	g.sessions.Collect(ch)
	ch <- prometheus.MustNewConstMetric(subscriptionsDesc, prometheus.GaugeValue, float64(subs))
}
