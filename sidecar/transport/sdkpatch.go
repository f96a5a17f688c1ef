package transport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

// Everything here works around what mcp-go cannot express yet, so it can go
// when the SDK can: a resource handler's error is always answered -32603, and
// one cache hint applies to every read. The surface's handler records the real
// outcome in the request context (resources.ReadOutcome); the transports rewrite
// the response with it.

// patchMessage rewrites one JSON-RPC response of a resources/read according
// to o: the error code and message the SDK could not set, or, for 2026-07-28,
// the per-resource ttlMs.
func patchMessage(msg []byte, o *resources.ReadOutcome) ([]byte, error) {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result,omitempty"`
		Error   json.RawMessage `json:"error,omitempty"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	switch {
	case m.Error != nil && o.Code != 0:
		e, err := json.Marshal(struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		}{o.Code, o.Message, map[string]any{"uri": o.URI}})
		if err != nil {
			return nil, err
		}
		m.Error = e
	case m.Result != nil && o.Modern && o.Code == 0:
		var r map[string]json.RawMessage
		if err := json.Unmarshal(m.Result, &r); err != nil {
			return nil, fmt.Errorf("decode result: %w", err)
		}
		r["ttlMs"] = json.RawMessage(fmt.Sprint(o.TTL.Milliseconds()))
		r["cacheScope"] = json.RawMessage(`"private"`)
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		m.Result = b
	default:
		return msg, nil
	}
	return json.Marshal(m)
}

// patchHTTP rewrites a buffered resources/read HTTP response: a JSON body, or
// the response event of an SSE body. It returns the body and the status.
func patchHTTP(body []byte, contentType string, status int, o *resources.ReadOutcome) ([]byte, int, error) {
	if o.URI == "" || (o.Code == 0 && !o.Modern) {
		return body, status, nil
	}
	if bytes.HasPrefix([]byte(contentType), []byte("text/event-stream")) {
		var out bytes.Buffer
		for line := range bytes.Lines(body) {
			data, ok := bytes.CutPrefix(line, []byte("data: "))
			if ok && (bytes.Contains(data, []byte(`"result"`)) || bytes.Contains(data, []byte(`"error"`))) {
				patched, err := patchMessage(bytes.TrimRight(data, "\r\n"), o)
				if err != nil {
					return nil, 0, err
				}
				out.WriteString("data: ")
				out.Write(patched)
				out.WriteByte('\n')
				continue
			}
			out.Write(line)
		}
		return out.Bytes(), status, nil
	}
	patched, err := patchMessage(bytes.TrimRight(body, "\n"), o)
	if err != nil {
		return nil, 0, err
	}
	if o.Modern && o.Code != 0 {
		status = http.StatusOK
		if o.Code == mcp.INVALID_PARAMS {
			status = http.StatusBadRequest
		}
	}
	return append(patched, '\n'), status, nil
}

// servePatched serves a request, buffering and patching a resources/read
// response; other requests pass through.
func servePatched(w http.ResponseWriter, r *http.Request, method string, next http.Handler, log *slog.Logger) {
	if r.Method != http.MethodPost || method != string(mcp.MethodResourcesRead) {
		next.ServeHTTP(w, r)
		return
	}
	ctx, o := resources.WithReadOutcome(r.Context())
	buf := &bufferedWriter{header: http.Header{}, status: http.StatusOK}
	next.ServeHTTP(buf, r.WithContext(ctx))
	body, status, err := patchHTTP(buf.body.Bytes(), buf.header.Get("Content-Type"), buf.status, o)
	if err != nil {
		log.Error("cannot patch resources/read response; sending it as is", "err", err)
		body, status = buf.body.Bytes(), buf.status
	}
	for k, v := range buf.header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// patchResponse patches a stdio response to a resources/read the way
// patchHTTP does; other responses are returned as they are.
func patchResponse(resp any, o *resources.ReadOutcome, log *slog.Logger) any {
	if o.URI == "" {
		return resp
	}
	b, err := json.Marshal(resp)
	if err == nil {
		b, err = patchMessage(b, o)
	}
	if err != nil {
		log.Error("cannot patch resources/read response; sending it as is", "err", err)
		return resp
	}
	return json.RawMessage(b)
}

// bufferedWriter captures a response so it can be patched; Flush is a no-op
// so the SDK treats it as a stream it can write SSE to.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header         { return b.header }
func (b *bufferedWriter) WriteHeader(status int)      { b.status = status }
func (b *bufferedWriter) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedWriter) Flush()                      {}
