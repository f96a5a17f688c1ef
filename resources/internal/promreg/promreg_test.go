package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegister(t *testing.T) {
	a := prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "a"})
	b := prometheus.NewCounter(prometheus.CounterOpts{Name: "b_total", Help: "b"})
	if err := Register(nil, a, b); err != nil {
		t.Fatalf("nil registerer: %v", err)
	}
	reg := prometheus.NewRegistry()
	if err := Register(reg, a, b); err != nil {
		t.Fatal(err)
	}
	if err := Register(reg, b); err == nil {
		t.Fatal("registering b twice: no error")
	}
	if n, err := reg.Gather(); err != nil || len(n) != 2 {
		t.Fatalf("gathered %d families, err %v; want 2", len(n), err)
	}
}
