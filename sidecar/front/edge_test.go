package front

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
)

// panicVerifier panics on every token, as a verifier with a defect would.
type panicVerifier struct{ v any }

func (p panicVerifier) Verify(context.Context, string) (auth.Principal, error) { panic(p.v) }

// A panic in the edge's layers or in the endpoint behind them is answered as the
// transport answers one of its own: a logged 500 with the JSON-RPC internal error, not
// a connection dropped by net/http. http.ErrAbortHandler still drops it.
func TestEdgeAnswersPanics(t *testing.T) {
	var want bytes.Buffer // what sidecar/transport writes (rpcerror.Write(w, 500, mcp.INTERNAL_ERROR, "internal error"))
	_ = json.NewEncoder(&want).Encode(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(nil),
		Error: mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, "internal error", nil)})
	endpoint := func(v any) http.Handler {
		return http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(v) })
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	tests := []struct {
		name     string
		verifier auth.Verifier
		endpoint http.Handler
		dropped  bool
	}{
		{"verifier panics", panicVerifier{"verifier defect"}, ok, false},
		{"endpoint panics", nil, endpoint("router defect"), false},
		{"abort still drops", panicVerifier{http.ErrAbortHandler}, ok, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			h, err := Edge{AllowedOrigins: []string{"https://hub.example.org"}, Verifier: tt.verifier,
				Guard: auth.Guard{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}}.Wrap(tt.endpoint)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			req.Header.Set("Authorization", "Bearer t")
			req.Header.Set("Origin", "https://hub.example.org") // through the origin policy and CORS
			resp, err := srv.Client().Do(req)
			if tt.dropped {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("answered %d, want the connection dropped", resp.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Content-Type") != "application/json" || string(body) != want.String() {
				t.Errorf("answered %d %q %q, want 500 application/json %q", resp.StatusCode, resp.Header.Get("Content-Type"), body, want.String())
			}
			if !strings.Contains(logs.String(), `"msg":"panic serving mcp request"`) || !strings.Contains(logs.String(), `"method":"POST"`) {
				t.Errorf("panic not logged on the guard's logger:\n%s", logs.String())
			}
		})
	}
}
