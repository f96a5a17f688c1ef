package promreg

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func counterOpts(help string) prometheus.CounterOpts {
	return prometheus.CounterOpts{Namespace: Namespace, Name: "rows_total", Help: help}
}

// Instances registering identical collectors on one Registerer share the first one:
// what each counts adds up in one series.
func TestRegisterShares(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	var counters []prometheus.Counter
	for range 2 {
		r := On(reg)
		c := Register(r, prometheus.NewCounter(counterOpts("rows")))
		v := Register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "rooms", Help: "rooms"}, []string{"era"}))
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		c.Add(2)
		v.WithLabelValues("a").Inc()
		counters = append(counters, c)
	}
	if counters[0] != counters[1] {
		t.Fatal("the second instance got a collector of its own")
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP jupyter_mcp_sidecar_rooms rooms
# TYPE jupyter_mcp_sidecar_rooms gauge
jupyter_mcp_sidecar_rooms{era="a"} 2
# HELP jupyter_mcp_sidecar_rows_total rows
# TYPE jupyter_mcp_sidecar_rows_total counter
jupyter_mcp_sidecar_rows_total 4
`)); err != nil {
		t.Fatal(err)
	}
}

func TestRegisterErrors(t *testing.T) {
	tests := []struct {
		name     string
		register func(r *Registrar) bool // registers after rows_total (help "rows"), true when handed back its own collector
	}{
		{"same name, other help", func(r *Registrar) bool {
			c := prometheus.NewCounter(counterOpts("other"))
			return Register(r, c) == c
		}},
		{"same series, a gauge", func(r *Registrar) bool {
			c := prometheus.NewGauge(prometheus.GaugeOpts(counterOpts("rows")))
			return Register(r, c) == c
		}},
		{"invalid name", func(r *Registrar) bool {
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: "", Help: "x"})
			return Register(r, c) == c
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := On(prometheus.NewRegistry())
			Register(r, prometheus.NewCounter(counterOpts("rows")))
			if !tt.register(r) || r.Err() == nil {
				t.Fatalf("err %v; want an error and the collector given back", r.Err())
			}
			later := prometheus.NewCounter(prometheus.CounterOpts{Name: "later_total", Help: "later"})
			if Register(r, later) != later || r.Err() == nil {
				t.Fatal("registered after an error, or forgot it")
			}
		})
	}
}

// A nil Registerer registers nothing: metrics off, every collector still usable.
func TestRegisterNil(t *testing.T) {
	r := On(nil)
	c := prometheus.NewCounter(counterOpts("rows"))
	if Register(r, c) != c || r.Err() != nil {
		t.Fatalf("nil registerer: %v", r.Err())
	}
	c.Inc()
}
