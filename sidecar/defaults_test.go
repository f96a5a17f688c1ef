package sidecar

import (
	"reflect"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
)

// The daemon's defaults (config.Default, which configs/sidecar.yaml documents) are the
// ones the MCP server runs with: filling the server's own defaults changes nothing the
// daemon configures, and the metrics hook is on.
func TestServerRunsWithTheDocumentedDefaults(t *testing.T) {
	sc := serverConfig(config.Default(), "v")
	filled := sc.Defaults()
	for name, pair := range map[string][2]any{
		"transport":         {sc.Transport, filled.Transport},
		"listen":            {sc.Listen, filled.Listen},
		"path":              {sc.Path, filled.Path},
		"max_request_bytes": {sc.MaxRequestBytes, filled.MaxRequestBytes},
		"drain_timeout":     {sc.DrainTimeout, filled.DrainTimeout},
		"hooks":             {sc.Hooks, filled.Hooks},
		"verifier":          {sc.Verifier, filled.Verifier},
		"limits": {[]int{sc.MaxURIBytes, sc.MaxSubscriptions, sc.MaxSubscriptionBytes, sc.MaxSessions, sc.MaxListenURIs, sc.ReplayEvents, sc.ReplayBytes},
			[]int{filled.MaxURIBytes, filled.MaxSubscriptions, filled.MaxSubscriptionBytes, filled.MaxSessions, filled.MaxListenURIs, filled.ReplayEvents, filled.ReplayBytes}},
		"session_idle_timeout": {sc.SessionIdleTimeout, filled.SessionIdleTimeout},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s: the daemon configures %v, the server's default is %v", name, pair[0], pair[1])
		}
	}
	if _, ok := sc.Hooks["metrics"]; !ok {
		t.Errorf("default hooks %v: the metrics hook is off", sc.Hooks)
	}
}
