package resources

import (
	"bytes"
	"context"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/subscribers"
)

// mcpTransport serves the MCP server to its clients: Streamable HTTP (httpTransport)
// or newline-delimited JSON-RPC on stdio (stdioTransport).
type mcpTransport interface {
	// serve serves, with beside on an HTTP listener of its own, until ctx is done,
	// then drains within Config.DrainTimeout.
	serve(ctx context.Context, beside []Route) error
	// sessionStarted records a new SDK session with the subscriber registry.
	sessionStarted(sess server.ClientSession)
	// sessionEnded is told that the SDK dropped a session.
	sessionEnded(sessionID string)
	// handler is the MCP endpoint; nil for stdio.
	handler() http.Handler
}

// rpcError is a JSON-RPC error response with a null id: an answer to a
// message that could not be read far enough to know its id.
func rpcError(code int, msg string) mcp.JSONRPCError {
	return mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(nil),
		Error: mcp.NewJSONRPCErrorDetails(code, msg, nil)}
}

// errBatch answers a JSON-RPC batch, which MCP dropped in 2025-06-18: the SDK would call
// it a parse error.
var errBatch = rpcError(mcp.INVALID_REQUEST, "JSON-RPC batches are not supported: send one message per request")

// isBatch reports whether msg is a JSON array, a JSON-RPC batch.
func isBatch(msg []byte) bool {
	trimmed := bytes.TrimLeft(msg, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '['
}

type endKey struct{}

// withEnd records in a listen request's context how its transport ends the
// request when it stops taking notifications.
func withEnd(ctx context.Context, end func()) context.Context {
	return context.WithValue(ctx, endKey{}, end)
}

// endFrom returns the end function recorded in ctx, or nil.
func endFrom(ctx context.Context) func() {
	end, _ := ctx.Value(endKey{}).(func())
	return end
}

type notesKey struct{}

// withNotes records in a listen request's context the channel its transport
// writes the registry's notifications from.
func withNotes(ctx context.Context, ch chan<- subscribers.Message) context.Context {
	return context.WithValue(ctx, notesKey{}, ch)
}

// notesFrom returns the channel recorded in ctx, or nil.
func notesFrom(ctx context.Context) chan<- subscribers.Message {
	ch, _ := ctx.Value(notesKey{}).(chan<- subscribers.Message)
	return ch
}
