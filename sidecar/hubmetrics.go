package sidecar

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// hubMetrics are hub mode's own metrics plus the sum, over its users, of what each
// user's instance measures (rows applied, notifications, sessions, …): one series per
// metric and label set, never a user name in a label. The counters of released users
// stay in the sums. It is an unchecked collector: the tenants' metrics are known only
// at scrape time.
type hubMetrics struct {
	loads, releases prometheus.Counter
	loadSeconds     prometheus.Histogram
	tenants         func() []*prometheus.Registry

	mu      sync.Mutex
	retired map[string]*series // counters and histograms of released tenants
}

// series is one metric and label set, summed.
type series struct {
	name, help string
	typ        dto.MetricType
	labels     []*dto.LabelPair
	value      float64
	count      uint64
	buckets    map[float64]uint64
}

func newHubMetrics(tenants func() []*prometheus.Registry) *hubMetrics {
	return &hubMetrics{
		loads: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "hub", Name: "user_loads_total",
			Help: "Users whose store was loaded because they made a request while not active."}),
		releases: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "hub", Name: "user_releases_total",
			Help: "Users released after hub.idle_timeout without a session or request."}),
		loadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "hub", Name: "user_load_seconds",
			Help: "Time from a user's first request to their store's first read.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		tenants: tenants,
		retired: map[string]*series{},
	}
}

// Describe describes nothing: the collector is unchecked.
func (m *hubMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect sends the hub's metrics and the users' sums.
func (m *hubMetrics) Collect(ch chan<- prometheus.Metric) {
	ch <- m.loads
	ch <- m.releases
	ch <- m.loadSeconds
	sums := map[string]*series{}
	m.mu.Lock()
	for k, s := range m.retired {
		c := *s
		c.buckets = maps.Clone(s.buckets)
		sums[k] = &c
	}
	m.mu.Unlock()
	for _, reg := range m.tenants() {
		add(sums, reg, true)
	}
	for _, k := range slices.Sorted(maps.Keys(sums)) {
		if metric, err := sums[k].metric(); err == nil {
			ch <- metric
		}
	}
}

// retire keeps a released tenant's counters and histograms in the sums.
func (m *hubMetrics) retire(reg *prometheus.Registry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	add(m.retired, reg, false)
}

// add sums reg's samples into sums; gauges only when withGauges.
func add(sums map[string]*series, reg *prometheus.Registry, withGauges bool) {
	fams, err := reg.Gather()
	if err != nil {
		return
	}
	for _, f := range fams {
		typ := f.GetType()
		if !withGauges && typ != dto.MetricType_COUNTER && typ != dto.MetricType_HISTOGRAM {
			continue
		}
		for _, mt := range f.GetMetric() {
			key := f.GetName() + labelKey(mt.GetLabel())
			s := sums[key]
			if s == nil {
				s = &series{name: f.GetName(), help: f.GetHelp(), typ: typ, labels: mt.GetLabel(), buckets: map[float64]uint64{}}
				sums[key] = s
			}
			switch typ {
			case dto.MetricType_COUNTER:
				s.value += mt.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.value += mt.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				s.value += mt.GetUntyped().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := mt.GetHistogram()
				s.value += h.GetSampleSum()
				s.count += h.GetSampleCount()
				for _, b := range h.GetBucket() {
					s.buckets[b.GetUpperBound()] += b.GetCumulativeCount()
				}
			}
		}
	}
}

// metric is the summed series as a constant metric.
func (s *series) metric() (prometheus.Metric, error) {
	names := make([]string, len(s.labels))
	values := make([]string, len(s.labels))
	for i, l := range s.labels {
		names[i], values[i] = l.GetName(), l.GetValue()
	}
	desc := prometheus.NewDesc(s.name, s.help, names, nil)
	switch s.typ {
	case dto.MetricType_COUNTER:
		return prometheus.NewConstMetric(desc, prometheus.CounterValue, s.value, values...)
	case dto.MetricType_HISTOGRAM:
		return prometheus.NewConstHistogram(desc, s.count, s.value, s.buckets, values...)
	case dto.MetricType_GAUGE:
		return prometheus.NewConstMetric(desc, prometheus.GaugeValue, s.value, values...)
	default:
		return prometheus.NewConstMetric(desc, prometheus.UntypedValue, s.value, values...)
	}
}

func labelKey(ls []*dto.LabelPair) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString("\xff" + l.GetName() + "=" + l.GetValue())
	}
	return b.String()
}
