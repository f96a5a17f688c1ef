package rpcerror

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// Write's body is what mcp-go encodes for the same error without an id, so that a
// client cannot tell which layer answered.
func TestWriteAsMCPGo(t *testing.T) {
	tests := []struct {
		status, code int
		msg          string
	}{
		{http.StatusInternalServerError, mcp.INTERNAL_ERROR, "internal error"},
		{http.StatusRequestEntityTooLarge, mcp.INVALID_REQUEST, "request body exceeds 10 bytes"},
		{http.StatusBadRequest, mcp.PARSE_ERROR, `quote " and <tag>`},
	}
	for _, tt := range tests {
		var want bytes.Buffer
		_ = json.NewEncoder(&want).Encode(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(nil),
			Error: mcp.NewJSONRPCErrorDetails(tt.code, tt.msg, nil)})
		rec := httptest.NewRecorder()
		Write(rec, tt.status, tt.code, tt.msg)
		if rec.Code != tt.status || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != want.String() {
			t.Errorf("Write(%d, %d, %q) = %d %q %q, want %q", tt.status, tt.code, tt.msg,
				rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(), want.String())
		}
	}
	if InternalError != mcp.INTERNAL_ERROR {
		t.Errorf("InternalError = %d, want %d", InternalError, mcp.INTERNAL_ERROR)
	}
}
