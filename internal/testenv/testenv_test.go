package testenv

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// recorder is a testing.TB whose Fatal and Skip record instead of stopping the test.
type recorder struct {
	testing.TB
	fatal, skip, err string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Fatal(args ...any)            { r.fatal = fmt.Sprint(args...) }
func (r *recorder) Fatalf(f string, args ...any) { r.fatal = fmt.Sprintf(f, args...) }
func (r *recorder) Skipf(f string, args ...any)  { r.skip = fmt.Sprintf(f, args...) }
func (r *recorder) Skip(args ...any)             { r.skip = fmt.Sprint(args...) }
func (r *recorder) Error(args ...any)            { r.err = fmt.Sprint(args...) }

func TestEventually(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	Eventually(t, Wait, "three increments", func() bool { return n.Load() == 3 })

	r := &recorder{TB: t}
	start := time.Now()
	Eventually(r, 50*time.Millisecond, "never", func() bool { return false }, func() string { return "state" })
	if !strings.Contains(r.fatal, "never: not within 50ms: state") {
		t.Fatalf("a condition that never holds failed the test with %q", r.fatal)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before its deadline", el)
	}
}

func TestReceive(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if v := Receive(t, Wait, "a value", ch); v != 7 {
		t.Fatalf("got %d", v)
	}
	r := &recorder{TB: t}
	Receive(r, 20*time.Millisecond, "nothing", ch)
	if r.fatal == "" {
		t.Fatal("an empty channel did not fail the test")
	}
	close(ch)
	r = &recorder{TB: t}
	Receive(r, Wait, "closed", ch)
	if r.fatal == "" {
		t.Fatal("a closed channel did not fail the test")
	}
}

func TestNeed(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		Need(r, errors.New("node missing"), "npm ci")
		if got := r.fatal != ""; got != (ci == "true") {
			t.Errorf("CI=%q: failed %v, skipped %v", ci, r.fatal != "", r.skip != "")
		}
		if got := r.skip != ""; got != (ci != "true") {
			t.Errorf("CI=%q: skipped %v", ci, got)
		}
		r = &recorder{TB: t}
		Need(r, nil, "npm ci")
		if r.fatal != "" || r.skip != "" {
			t.Errorf("CI=%q: nothing missing, yet %q %q", ci, r.fatal, r.skip)
		}
	}
}

func TestLockedBuffer(t *testing.T) {
	var b LockedBuffer
	done := make(chan struct{})
	go func() { defer close(done); _, _ = b.Write([]byte("a")) }()
	_, _ = b.Write([]byte("b"))
	<-done
	if s := b.String(); len(s) != 2 || !b.Contains("a") || !b.Contains("b") {
		t.Fatalf("buffer %q", s)
	}
}

func TestMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "rows_total", Help: "rows"})
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sessions", Help: "sessions"}, []string{"era"})
	reg.MustRegister(c, v)
	c.Add(3)
	v.WithLabelValues("a").Set(1)
	v.WithLabelValues("b").Set(2)
	if got := Metric(t, reg, "rows_total"); got != 3 {
		t.Errorf("rows_total %v, want 3", got)
	}
	if got := Metric(t, reg, "sessions", "era", "b"); got != 2 {
		t.Errorf("sessions{era=b} %v, want 2", got)
	}
	for _, missing := range [][]string{{"nothing"}, {"sessions", "era", "c"}} {
		r := &recorder{TB: t}
		Metric(r, reg, missing[0], missing[1:]...)
		if r.fatal == "" {
			t.Errorf("%v: no failure", missing)
		}
	}
}

func TestScrapeAndSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "rows_total", Help: "rows"})
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sessions", Help: "sessions"}, []string{"era", "kind"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "read_seconds", Help: "reads", Buckets: []float64{0.1, 1}})
	reg.MustRegister(c, v, h)
	c.Add(3)
	v.WithLabelValues("a", "x").Set(1)
	v.WithLabelValues("b", "x").Set(2)
	v.WithLabelValues("b", "y").Set(4)
	h.Observe(0.5)
	h.Observe(2)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/bad", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "rows_total{ 3") })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	fams := Scrape(t, srv.URL+"/metrics")
	for _, tt := range []struct {
		series string
		labels []string
		want   float64
	}{
		{"rows_total", nil, 3},
		{"sessions", nil, 7},
		{"sessions", []string{"era", "b"}, 6},
		{"sessions", []string{"era", "b", "kind", "y"}, 4},
		{"sessions", []string{"era", "c"}, 0},
		{"read_seconds_sum", nil, 2.5},
		{"read_seconds_count", nil, 2},
		{"nothing", nil, 0},
		{"nothing_count", nil, 0},
	} {
		if got := Sum(fams, tt.series, tt.labels...); got != tt.want {
			t.Errorf("Sum(%s%v) = %v, want %v", tt.series, tt.labels, got, tt.want)
		}
	}
	for _, path := range []string{"/bad", "/missing"} {
		r := &recorder{TB: t}
		Scrape(r, srv.URL+path)
		if r.fatal == "" {
			t.Errorf("Scrape %s: no failure", path)
		}
	}
}

// FreeAddr hands out loopback ports below the ephemeral range (so no bind(0) of another
// process takes one before the test binds it), each once, each bindable.
func TestFreeAddrBelowEphemeral(t *testing.T) {
	low := ephemeralLow()
	seen := map[string]bool{}
	for range 200 {
		addr := FreeAddr(t)
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port < freeFloor || port >= low {
			t.Fatalf("FreeAddr = %s, want a port in [%d, %d)", addr, freeFloor, low)
		}
		if seen[addr] {
			t.Fatalf("FreeAddr handed out %s twice", addr)
		}
		seen[addr] = true
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr's %s cannot be bound: %v", addr, err)
		}
		_ = ln.Close()
	}
}

// DocBlocks returns the blocks of the fence's language only, with their opening line; a
// block left open fails the test.
func TestDocBlocks(t *testing.T) {
	got := DocBlocks(t, "yaml", "internal/testenv/testdata/blocks.md")
	want := []Block{
		{File: "internal/testenv/testdata/blocks.md", Line: 3, Text: "a: 1\n"},
		{File: "internal/testenv/testdata/blocks.md", Line: 11, Text: "b:\n  c: 2\n"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("DocBlocks = %+v, want %+v", got, want)
	}
	r := &recorder{TB: t}
	DocBlocks(r, "yaml", "internal/testenv/testdata/unclosed.md")
	if r.fatal != "internal/testenv/testdata/unclosed.md:1: the block opened here is not closed" {
		t.Errorf("an unclosed block: %q", r.fatal)
	}
}
