package testenv

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric is the value of the counter, gauge or untyped sample of family name on g whose
// labels include labels (name, value pairs); it fails the test when g serves none.
func Metric(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				return value(m)
			}
		}
	}
	t.Fatalf("no sample of %s%v", name, labels)
	return 0
}

// maxMetricsBody bounds the /metrics body Scrape reads.
const maxMetricsBody = 16 << 20

// ParseMetrics reads a Prometheus text exposition, such as a /metrics body, with
// expfmt: the metric families by name.
func ParseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// Scrape fetches url, a /metrics endpoint, and parses its answer with ParseMetrics; it
// fails the test when there is no 200 answer or it does not parse.
func Scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
		return nil
	}
	fams, err := ParseMetrics(io.LimitReader(resp.Body, maxMetricsBody))
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
		return nil
	}
	return fams
}

// Sum is the sum of the samples of series in fams whose labels include labels (name,
// value pairs): the counter, gauge and untyped values of family series, or the sums or
// counts of histogram or summary X when series is X_sum or X_count. It is 0 when no
// sample matches (a labelled metric before its first sample).
func Sum(fams map[string]*dto.MetricFamily, series string, labels ...string) float64 {
	get := value
	if fams[series] == nil {
		if base, ok := strings.CutSuffix(series, "_sum"); ok && fams[base] != nil {
			series, get = base, func(m *dto.Metric) float64 {
				return m.GetHistogram().GetSampleSum() + m.GetSummary().GetSampleSum()
			}
		} else if base, ok := strings.CutSuffix(series, "_count"); ok && fams[base] != nil {
			series, get = base, func(m *dto.Metric) float64 {
				return float64(m.GetHistogram().GetSampleCount() + m.GetSummary().GetSampleCount())
			}
		}
	}
	total := 0.0
	for _, m := range fams[series].GetMetric() {
		if hasLabels(m, labels) {
			total += get(m)
		}
	}
	return total
}

// Gather is what g serves now, the metric families by name (for Sum); it fails the test
// when g cannot gather.
func Gather(t testing.TB, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	list, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := make(map[string]*dto.MetricFamily, len(list))
	for _, f := range list {
		fams[f.GetName()] = f
	}
	return fams
}

// Series lists the counter, gauge and untyped samples g serves of the families whose
// names contain part, "name[labels]=value" each: the state of a failing test.
func Series(g prometheus.Gatherer, part string) string {
	list, err := g.Gather()
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, f := range list {
		if !strings.Contains(f.GetName(), part) {
			continue
		}
		for _, m := range f.GetMetric() {
			out = append(out, fmt.Sprintf("%s%v=%v", f.GetName(), m.GetLabel(), value(m)))
		}
	}
	return strings.Join(out, " ")
}

// hasLabels reports whether m has every label of labels (name, value pairs).
func hasLabels(m *dto.Metric, labels []string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for i := 0; i+1 < len(labels); i += 2 {
		if have[labels[i]] != labels[i+1] {
			return false
		}
	}
	return true
}

// value is m's counter, gauge or untyped value.
func value(m *dto.Metric) float64 {
	return m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
}
