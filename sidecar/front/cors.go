package front

import (
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
)

// CORS headers of the MCP endpoint: what a browser client may send and read.
var (
	corsMethods = strings.Join([]string{http.MethodGet, http.MethodPost, http.MethodDelete}, ", ")
	corsHeaders = strings.Join([]string{
		"Authorization", "Content-Type", server.HeaderKeySessionID, server.HeaderKeyProtocolVersion, "Last-Event-ID", "Mcp-Method",
	}, ", ")
	// WWW-Authenticate: a 401's challenge names the protected-resource metadata
	// (MCP authorization), which a browser client reads to log in.
	corsExposed = server.HeaderKeySessionID + ", WWW-Authenticate"
)

// corsMaxAge is how long, in seconds, a browser may cache a preflight answer.
const corsMaxAge = "600"

// CORS lets browser pages of the allowed origins (Config.AllowedOrigins, "*"
// for any) use an MCP endpoint: it answers their preflights (OPTIONS, which
// carry no token) itself, and marks their responses readable with the session
// id header exposed. Other requests pass through untouched. Put it before the
// authentication, after the origin check.
func CORS(allowed []string, next http.Handler) http.Handler {
	policy := auth.OriginPolicy{Allowed: allowed}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || !policy.Admits(origin) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", corsHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", corsExposed)
		next.ServeHTTP(w, r)
	})
}
