// Package transport serves the notebook surface (resources) to MCP clients:
// Streamable HTTP (http.go) with its 2025-11-25 sessions and their ids, the
// per-session replay buffer of resumable GET streams (replay.go) and the admission
// of subscriptions before the SDK sees them, or newline-delimited JSON-RPC on stdio
// (stdio.go), each configured by its own Config (config.go); and the workarounds of
// mcp-go (sdkpatch.go, and one hand-off rule of outbox.go), so that they go when the
// SDK can say these. It is built from the surface's resources.Link and is the
// surface's resources.Transport: the one seam between them (resources/seam.go). The
// HTTP endpoint is a handler: the front (sidecar/front) listens and puts the origin
// check, CORS and authentication before it.
package transport

import (
	"bytes"
	"io"
	"os"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

// HTTP returns the builder of the Streamable HTTP transport of a surface, configured
// by cfg (resources.WithTransport).
func HTTP(cfg Config) resources.NewTransport {
	return func(l resources.Link) (resources.Transport, error) {
		cfg, err := cfg.checked()
		if err != nil {
			return nil, err
		}
		return newHTTP(l, cfg)
	}
}

// Stdio returns the builder of the stdio transport on in and out (nil: os.Stdin,
// os.Stdout), configured by cfg.
func Stdio(cfg Config, in io.Reader, out io.Writer) resources.NewTransport {
	if in == nil {
		in = os.Stdin
	}
	if out == nil {
		out = os.Stdout
	}
	return func(l resources.Link) (resources.Transport, error) {
		cfg, err := cfg.checked()
		if err != nil {
			return nil, err
		}
		return newStdio(l, cfg, in, out)
	}
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
