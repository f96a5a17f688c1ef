package front

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The probes are where each mode serves them: single mode on the MCP listener or, with
// a metrics listener, only there; hub mode's /healthz and /readyz also under the
// service prefix on the MCP listener, whatever the metrics listener.
func TestProbesPlacement(t *testing.T) {
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) })
	}
	p := Probes{Live: named("live"), Ready: named("ready"), Metrics: named("metrics")}
	all := map[string]string{"/healthz": "live", "/readyz": "ready", "/metrics": "metrics"}
	tests := []struct {
		name      string
		cfg       Config
		main      map[string]string // path → the probe answering it on the MCP listener ("": 404)
		onMetrics map[string]string // nil: no metrics listener
	}{
		{"single", Config{Listen: "127.0.0.1:0", Name: "mcp"}, all, nil},
		{"single, metrics listener", Config{Listen: "127.0.0.1:0", Name: "mcp", MetricsListen: "127.0.0.1:0"},
			map[string]string{"/healthz": "", "/readyz": "", "/metrics": ""}, all},
		{"hub", Config{Listen: "127.0.0.1:0", Name: "hub", ProbePrefixes: []string{"", "/services/mcp"}},
			map[string]string{"/healthz": "live", "/readyz": "ready", "/metrics": "metrics", "/services/mcp/healthz": "live", "/services/mcp/readyz": "ready", "/services/mcp/metrics": ""}, nil},
		{"hub, metrics listener", Config{Listen: "127.0.0.1:0", Name: "hub", MetricsListen: "127.0.0.1:0", ProbePrefixes: []string{"", "/services/mcp"}},
			map[string]string{"/healthz": "live", "/readyz": "ready", "/metrics": "", "/services/mcp/healthz": "live", "/services/mcp/readyz": "ready"}, all},
		{"stdio, metrics listener", Config{Name: "mcp", MetricsListen: "127.0.0.1:0"}, nil, all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Logger, tt.cfg.Registerer = slog.New(slog.DiscardHandler), prometheus.NewRegistry()
			f, err := New(tt.cfg, p)
			if err != nil {
				t.Fatal(err)
			}
			check := func(listener string, mux http.Handler, want map[string]string) {
				t.Helper()
				for path, probe := range want {
					rec := httptest.NewRecorder()
					mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
					switch got := rec.Body.String(); {
					case probe == "" && rec.Code != http.StatusNotFound:
						t.Errorf("%s listener, GET %s = %d %q, want 404", listener, path, rec.Code, got)
					case probe != "" && got != probe:
						t.Errorf("%s listener, GET %s = %d %q, want %s", listener, path, rec.Code, got, probe)
					}
				}
			}
			check("MCP", f.mux, tt.main)
			if (f.probes != nil) != (tt.onMetrics != nil) {
				t.Fatalf("metrics listener: %v, want %v", f.probes != nil, tt.onMetrics != nil)
			}
			if f.probes != nil {
				check("metrics", f.probes, tt.onMetrics)
			}
			if (f.refused != nil) != (tt.cfg.Listen != "") {
				t.Errorf("MCP listener's refusals counted: %v, want %v", f.refused != nil, tt.cfg.Listen != "")
			}
		})
	}
}
