package transport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

// Every mcp-go workaround of the transport is here (but for the outbox's hand-off rule
// of mcp-go PR #969, outbox.go), so it can go when the SDK can say these
// (docs/ARCHITECTURE.md; internal/archtest checks it):
//   - a resource handler's error is always answered -32603, and one cache hint applies
//     to every read: the surface's handler records the real outcome in the request
//     context (resources.ReadOutcome); the transports rewrite the response with it;
//   - the SDK cannot bound its sessions nor forget an id it never registered: the
//     session id manager is the transport's (sessionIDs);
//   - the SDK cannot end a session itself: endSession sends it a DELETE.

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

// endSession terminates a 2025-11-25 session whose last GET stream closed, the
// way a DELETE would: the SDK drops its state and the registry its subscriptions.
func (t *httpTransport) endSession(sessionID string) {
	req, err := http.NewRequest(http.MethodDelete, t.cfg.Path, nil)
	if err != nil {
		return
	}
	req.Header.Set(server.HeaderKeySessionID, sessionID)
	t.sdk.ServeHTTP(&bufferedWriter{header: http.Header{}}, req)
}

// sessionIDs issues and validates 2025-11-25 session ids and keeps their
// number within MaxSessions. Unlike the SDK's stateful manager it keeps no
// tombstones: a terminated id is simply unknown. An initialize is admitted
// (reserve) before the SDK sees it and generates its id through the
// admission the request carries (ResolveSessionIdManager); an id whose
// session the SDK never registered (the client left before the response) is
// forgotten when its initialize returns (settle), so it holds no slot.
type sessionIDs struct {
	max int

	mu       sync.Mutex
	live     map[string]bool // issued, not terminated → registered by the SDK
	reserved int             // admitted initializes that have not generated their id yet
}

const sessionPrefix = "mcp-session-"

func newSessionIDs(max int) *sessionIDs { return &sessionIDs{max: max, live: map[string]bool{}} }

// admission is one admitted initialize: the SessionIdManager the SDK uses
// for it, so that the id it generates takes the reserved slot.
type admission struct {
	*sessionIDs
	id string // generated; "" until then
}

type admissionKey struct{}

// reserve admits an initialize if fewer than max sessions are live or admitted.
func (m *sessionIDs) reserve() (*admission, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.live)+m.reserved >= m.max {
		return nil, false
	}
	m.reserved++
	return &admission{sessionIDs: m}, true
}

// settle ends an admission once its initialize returned: a slot never used is
// released, an id the SDK did not register is forgotten and returned.
func (m *sessionIDs) settle(a *admission) (forgotten string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch registered, issued := m.live[a.id]; {
	case a.id == "":
		m.reserved--
	case issued && !registered:
		delete(m.live, a.id)
		return a.id
	}
	return ""
}

// registered records that the SDK registered the session of id.
func (m *sessionIDs) registered(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live[id]; ok {
		m.live[id] = true
	}
}

// Generate issues an id in the slot the initialize reserved.
func (a *admission) Generate() string {
	id := sessionPrefix + uuid.NewString()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.id == "" {
		a.reserved--
	}
	a.id = id
	a.live[id] = false
	return id
}

// Generate issues an id outside any admission; the SDK calls it only for an
// initialize, which track always admits first, so it is not reached in practice.
func (m *sessionIDs) Generate() string {
	id := sessionPrefix + uuid.NewString()
	m.mu.Lock()
	m.live[id] = false
	m.mu.Unlock()
	return id
}

func (m *sessionIDs) Validate(id string) (bool, error) {
	if !m.known(id) {
		return false, fmt.Errorf("unknown session id %q", id)
	}
	return false, nil
}

func (m *sessionIDs) Terminate(id string) (bool, error) {
	m.mu.Lock()
	delete(m.live, id)
	m.mu.Unlock()
	return false, nil
}

func (m *sessionIDs) known(id string) bool {
	m.mu.Lock()
	_, ok := m.live[id]
	m.mu.Unlock()
	return ok && strings.HasPrefix(id, sessionPrefix)
}

// count is the number of live sessions.
func (m *sessionIDs) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// ResolveSessionIdManager is the admission of r's initialize, if it has one.
func (m *sessionIDs) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r != nil {
		if a, ok := r.Context().Value(admissionKey{}).(*admission); ok {
			return a
		}
	}
	return m
}
