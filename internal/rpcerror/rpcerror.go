// Package rpcerror is how the HTTP layers of the MCP endpoint answer with a JSON-RPC
// error instead of their reply: Write, and Recover, a panic answered as the internal
// error (500) rather than a connection net/http drops. The front (sidecar/front) and the
// transport (sidecar/transport) both answer so.
package rpcerror

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"net/http"
)

// InternalError is the JSON-RPC code of an internal error.
const InternalError = -32603

// response is a JSON-RPC error response without an id: the request was not read, or
// not as JSON-RPC (mcp-go's mcp.JSONRPCError with a nil id encodes the same).
type response struct {
	JSONRPC string  `json:"jsonrpc"`
	ID      *string `json:"id"` // always null
	Error   details `json:"error"`
}

type details struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Write answers the request with status and the JSON-RPC error code and message.
func Write(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(response{JSONRPC: "2.0", Error: details{Code: code, Message: msg}})
}

// Recover serves next, answering a panic in it with a 500 JSON-RPC internal error,
// logged on log (nil: slog.Default()) with the request's method and the panic's value.
// http.ErrAbortHandler is panicked on: it asks net/http to drop the connection.
func Recover(log *slog.Logger, next http.Handler) http.Handler {
	log = cmp.Or(log, slog.Default())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.Error("panic serving mcp request", "method", r.Method, "panic", p)
				Write(w, http.StatusInternalServerError, InternalError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}
