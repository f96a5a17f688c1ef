// Package promreg registers the collectors of the MCP surface's packages.
package promreg

import "github.com/prometheus/client_golang/prometheus"

// Register registers every collector on reg, stopping at the first error; a nil
// reg registers nothing (metrics off).
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if reg == nil {
			return nil
		}
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
