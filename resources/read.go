package resources

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/gate"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/hooks"
)

// Errors a read answers with, and the JSON-RPC codes they map to.
var (
	// ErrNotFound: no such notebook, cell or output (the Library wraps it too).
	ErrNotFound = errors.New("resource not found")
	// ErrWithheld: the resource gate withholds this resource's template.
	ErrWithheld = errors.New("resource withheld")
)

// CodeWithheld is the JSON-RPC error code of a withheld resource, in both
// eras. Not-found is -32002 at 2025-11-25 and -32602 (invalid params) at
// 2026-07-28, as each revision specifies.
const CodeWithheld = -32010

// readOutcome carries what the SDK cannot express from a resource handler
// (it reports every handler error as -32603 and applies one cache hint to
// all reads) from the handler to the transport, which patches the response.
type readOutcome struct {
	code    int    // JSON-RPC error code to answer with; 0 for success
	message string // error message
	uri     string
	ttl     time.Duration
	modern  bool // 2026-07-28 request
}

type outcomeKey struct{}

func withOutcome(ctx context.Context) (context.Context, *readOutcome) {
	o := &readOutcome{}
	return context.WithValue(ctx, outcomeKey{}, o), o
}

func outcomeFrom(ctx context.Context) *readOutcome {
	o, _ := ctx.Value(outcomeKey{}).(*readOutcome)
	return o
}

// readResource is the SDK handler of all three templates and of the bound
// notebooks' static resources.
func (s *Server) readResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	ref, perr := ParseURI(uri)
	call := hooks.Call{Kind: hooks.KindResource, Name: uri, Template: ref.Template(), Session: sessionIDFrom(ctx)}
	if perr != nil {
		call.Template = ""
	}
	var contents []mcp.ResourceContents
	ttl := s.cfg.NotebookTTL
	if perr == nil && ref.Output >= 0 {
		ttl = s.cfg.OutputTTL
	}
	err := s.hooks.Observe(ctx, call, func(ctx context.Context) error {
		if perr != nil {
			return fmt.Errorf("%w: %w", ErrNotFound, perr)
		}
		var err error
		contents, err = s.read(ctx, ref, ttl)
		return err
	})
	modern := mcp.IsModernProtocol(server.RequestProtocolVersion(ctx))
	if o := outcomeFrom(ctx); o != nil {
		*o = readOutcome{uri: uri, ttl: ttl, modern: modern}
		switch {
		case errors.Is(err, ErrWithheld):
			o.code, o.message = CodeWithheld, err.Error()
		case errors.Is(err, ErrNotFound):
			o.code, o.message = mcp.RESOURCE_NOT_FOUND, err.Error()
			if modern {
				o.code = mcp.INVALID_PARAMS
			}
		case err != nil:
			o.code, o.message = mcp.INTERNAL_ERROR, err.Error()
		}
	}
	return contents, err
}

// read resolves ref against the bindings and the library.
func (s *Server) read(ctx context.Context, ref Ref, ttl time.Duration) ([]mcp.ResourceContents, error) {
	if !gate.Decide(ctx, s.gate, ref.Template(), s.log) {
		return nil, fmt.Errorf("%w: %s is not served here (%s)", ErrWithheld, ref, ref.Template())
	}
	path, ok := s.names.Path(ref.Name)
	if !ok {
		return nil, fmt.Errorf("%w: no notebook is bound to the name %q (use_notebook binds one)", ErrNotFound, ref.Name)
	}
	snap, err := s.lib.Notebook(path)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%w: notebook %q (%s) is not in the store: %w", ErrNotFound, ref.Name, path, err)
		}
		return nil, fmt.Errorf("load notebook %q (%s): %w", ref.Name, path, err)
	}
	meta := map[string]any{"cacheScope": string(mcp.CacheScopePrivate), "ttlMs": ttl.Milliseconds()}
	uri := ref.String()
	if ref.CellID == "" {
		body, err := snap.JSON()
		if err != nil {
			return nil, err
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{Meta: meta, URI: uri, MIMEType: MIMENotebook, Text: string(body)}}, nil
	}
	cell, index, ok := findCell(snap, ref.CellID)
	if !ok {
		return nil, fmt.Errorf("%w: notebook %q has no cell with id %q", ErrNotFound, ref.Name, ref.CellID)
	}
	if ref.Output < 0 {
		body, err := json.Marshal(NewCellDoc(ref.Name, index, cell))
		if err != nil {
			return nil, fmt.Errorf("encode cell: %w", err)
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{Meta: meta, URI: uri, MIMEType: MIMECell, Text: string(body)}}, nil
	}
	if ref.Output >= len(cell.Outputs) {
		return nil, fmt.Errorf("%w: cell %q of notebook %q has %d outputs, no index %d", ErrNotFound, ref.CellID, ref.Name, len(cell.Outputs), ref.Output)
	}
	out, err := RenderOutput(cell.Outputs[ref.Output])
	if err != nil {
		return nil, err
	}
	meta["audience"] = []string{string(mcp.RoleAssistant)}
	if out.Blob != "" || binaryMIME[out.MIME] {
		return []mcp.ResourceContents{mcp.BlobResourceContents{Meta: meta, URI: uri, MIMEType: out.MIME, Blob: out.Blob}}, nil
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{Meta: meta, URI: uri, MIMEType: out.MIME, Text: out.Text}}, nil
}

// patchMessage rewrites one JSON-RPC response of a resources/read according
// to o: the error code and message the SDK could not set, or, for 2026-07-28,
// the per-resource ttlMs.
func patchMessage(msg []byte, o *readOutcome) ([]byte, error) {
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
	case m.Error != nil && o.code != 0:
		e, err := json.Marshal(struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		}{o.code, o.message, map[string]any{"uri": o.uri}})
		if err != nil {
			return nil, err
		}
		m.Error = e
	case m.Result != nil && o.modern && o.code == 0:
		var r map[string]json.RawMessage
		if err := json.Unmarshal(m.Result, &r); err != nil {
			return nil, fmt.Errorf("decode result: %w", err)
		}
		r["ttlMs"] = json.RawMessage(fmt.Sprint(o.ttl.Milliseconds()))
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
func patchHTTP(body []byte, contentType string, status int, o *readOutcome) ([]byte, int, error) {
	if o.uri == "" || (o.code == 0 && !o.modern) {
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
	if o.modern && o.code != 0 {
		status = http.StatusOK
		if o.code == mcp.INVALID_PARAMS {
			status = http.StatusBadRequest
		}
	}
	return append(patched, '\n'), status, nil
}
