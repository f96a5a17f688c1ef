package front

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCORS(t *testing.T) {
	const page = "https://hub.example.org"
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	tests := []struct {
		name       string
		allowed    []string
		method     string
		origin     string
		preflight  bool
		wantStatus int
		wantOrigin string
	}{
		{"no origin passes", []string{page}, http.MethodPost, "", false, http.StatusTeapot, ""},
		{"allowed preflight answered", []string{page}, http.MethodOptions, page, true, http.StatusNoContent, page},
		{"any origin with *", []string{"*"}, http.MethodOptions, "https://x.example", true, http.StatusNoContent, "https://x.example"},
		{"other origin passes untouched", []string{page}, http.MethodOptions, "https://x.example", true, http.StatusTeapot, ""},
		{"allowed request marked readable", []string{page}, http.MethodPost, page, false, http.StatusTeapot, page},
		{"OPTIONS without a request method is no preflight", []string{page}, http.MethodOptions, page, false, http.StatusTeapot, page},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "/mcp", nil)
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			if tt.preflight {
				req.Header.Set("Access-Control-Request-Method", http.MethodPost)
			}
			rec := httptest.NewRecorder()
			CORS(tt.allowed, next).ServeHTTP(rec, req)
			h := rec.Header()
			if rec.Code != tt.wantStatus || h.Get("Access-Control-Allow-Origin") != tt.wantOrigin {
				t.Fatalf("status %d, headers %v; want %d, origin %q", rec.Code, h, tt.wantStatus, tt.wantOrigin)
			}
			if rec.Code == http.StatusNoContent && (h.Get("Access-Control-Allow-Methods") != corsMethods || h.Get("Access-Control-Allow-Headers") != corsHeaders) {
				t.Fatalf("preflight headers %v", h)
			}
			if rec.Code == http.StatusTeapot && tt.wantOrigin != "" && h.Get("Access-Control-Expose-Headers") != "Mcp-Session-Id, WWW-Authenticate" {
				t.Fatalf("Access-Control-Expose-Headers = %q", h.Get("Access-Control-Expose-Headers"))
			}
		})
	}
}
