// Package promreg names and registers the Prometheus collectors of every layer: one
// namespace, and one set of series for all the instances on a Registerer. Hub mode runs
// an instance (tailer, rooms, MCP server) per active user on the process's registry; an
// instance registering a collector identical to one already there is handed that one,
// so every user feeds the same series and /metrics names no user.
package promreg

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every series the sidecar exports (prometheus.Opts.Namespace,
// prometheus.BuildFQName).
const Namespace = "jupyter_mcp_sidecar"

// Registrar registers collectors on one Registerer and keeps the first error.
type Registrar struct {
	reg prometheus.Registerer
	err error
}

// On returns a Registrar of reg; with reg nil it registers nothing (metrics off).
func On(reg prometheus.Registerer) *Registrar { return &Registrar{reg: reg} }

// Register registers c and returns the collector to use in its place: c, or the
// identical collector already registered (prometheus.AlreadyRegisteredError), so that
// every instance on the Registerer feeds the same series. After an error it registers
// nothing more (Registrar.Err).
func Register[T prometheus.Collector](r *Registrar, c T) T {
	if r.reg == nil || r.err != nil {
		return c
	}
	err := r.reg.Register(c)
	if err == nil {
		return c
	}
	var dup prometheus.AlreadyRegisteredError
	if !errors.As(err, &dup) {
		r.err = err
		return c
	}
	existing, ok := dup.ExistingCollector.(T)
	if !ok {
		r.err = fmt.Errorf("a %T serves the series of a %T: %w", dup.ExistingCollector, c, err)
		return c
	}
	return existing
}

// Err is the first registration error, nil if there was none.
func (r *Registrar) Err() error { return r.err }
