package transport

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/jsonenc"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unsafe"

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

// servePatched serves a request, patching a resources/read response (readWriter);
// other requests pass through. limit bounds what a read's response may buffer
// before its result's contents when it streams (readWriter.limit).
func servePatched(w http.ResponseWriter, r *http.Request, method string, next http.Handler, limit int64, log *slog.Logger) {
	if r.Method != http.MethodPost || method != string(mcp.MethodResourcesRead) {
		next.ServeHTTP(w, r)
		return
	}
	ctx, o := resources.WithReadOutcome(r.Context())
	ctx, st := resources.WithStreamedText(ctx, rand.Text())
	tw := &textWriter{ResponseWriter: w, st: st, mark: []byte(`"` + st.Placeholder + `"`)}
	serveRead(tw, r.WithContext(ctx), o, next, limit, log)
	tw.close()
}

// textWriter writes a read's text (resources.StreamedText) where the SDK's answer holds
// its placeholder, as the JSON string the SDK would have written, straight to the
// connection: the SDK encodes only the answer around it, and nothing holds the text a
// second time (mcp-go's encoding of a notebook of 60 MB built buffers of 3 times that).
type textWriter struct {
	http.ResponseWriter
	st   *resources.StreamedText
	mark []byte // the placeholder, quoted
	held []byte // the end of what was written that may begin the mark
	done bool   // the text is written
}

func (tw *textWriter) Write(p []byte) (int, error) {
	if tw.done || tw.st.Text == nil && len(tw.held) == 0 {
		return tw.ResponseWriter.Write(p)
	}
	data := p
	if len(tw.held) > 0 {
		data = append(tw.held, p...)
		tw.held = nil
	}
	if i := bytes.Index(data, tw.mark); i >= 0 && tw.st.Text != nil {
		if _, err := tw.ResponseWriter.Write(data[:i]); err != nil {
			return 0, err
		}
		bw := bufio.NewWriterSize(tw.ResponseWriter, 64<<10)
		jsonenc.WriteString(bw, unsafe.String(unsafe.SliceData(tw.st.Text), len(tw.st.Text)))
		if err := bw.Flush(); err != nil {
			return 0, err
		}
		tw.done = true
		if _, err := tw.ResponseWriter.Write(data[i+len(tw.mark):]); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	keep := markPrefix(data, tw.mark)
	if _, err := tw.ResponseWriter.Write(data[:len(data)-keep]); err != nil {
		return 0, err
	}
	tw.held = bytes.Clone(data[len(data)-keep:])
	return len(p), nil
}

// markPrefix is the length of the longest end of data that begins mark.
func markPrefix(data, mark []byte) int {
	for n := min(len(data), len(mark)-1); n > 0; n-- {
		if bytes.HasPrefix(mark, data[len(data)-n:]) {
			return n
		}
	}
	return 0
}

// Flush flushes what was written through; a held end that may begin the mark waits for
// what follows it.
func (tw *textWriter) Flush() {
	if f, ok := tw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// close writes what was held once the SDK has answered.
func (tw *textWriter) close() {
	if len(tw.held) > 0 {
		_, _ = tw.ResponseWriter.Write(tw.held)
		tw.held = nil
	}
}

// serveRead serves the resources/read r whose handler records its outcome in o.
func serveRead(w http.ResponseWriter, r *http.Request, o *resources.ReadOutcome, next http.Handler, limit int64, log *slog.Logger) {
	rw := &readWriter{w: w, o: o, status: http.StatusOK, limit: int(limit) + readHeadBytes, log: log}
	next.ServeHTTP(rw, r)
	rw.finish()
}

// readHeadBytes bounds, beyond the request's own limit (which bounds its id), the
// bytes of a read's response before its result's contents: the envelope, the
// result's small members and, in an SSE body, the events before the response.
const readHeadBytes = 64 << 10

// How a readWriter handles the bytes the SDK writes.
const (
	readUndecided = iota // nothing written yet
	readPass             // straight through: nothing to patch, or the head is patched
	readHead             // buffering the response's head until its contents
	readWhole            // buffering the rest of the body for patchHTTP
)

// readWriter is the ResponseWriter the SDK answers a resources/read with. The
// outcome is known when the response itself is written (the handler has
// returned), so it decides then: nothing to patch passes straight through; a
// 2026-07-28 success buffers only the response's head, up to the result's
// "contents", patches its ttlMs and cacheScope there and streams the rest; an
// error (a small body whose status may change) is buffered whole for patchHTTP,
// as is a head not found within limit (logged). In an SSE body, which the SDK
// may start while the handler still runs (notifications), every event before
// the response passes through once its line is whole.
type readWriter struct {
	w      http.ResponseWriter
	o      *resources.ReadOutcome
	status int
	limit  int
	log    *slog.Logger

	mode   int
	sse    bool
	sent   bool   // the status is written to w
	buf    []byte // readHead: unsent bytes; readWhole: the rest of the body
	tried  int    // len(buf) when the head was last looked for in vain
	reason string // why a success is buffered whole
}

func (rw *readWriter) Header() http.Header { return rw.w.Header() }

func (rw *readWriter) WriteHeader(status int) {
	if rw.sent || rw.mode != readUndecided {
		return
	}
	rw.status = status
	if strings.HasPrefix(rw.w.Header().Get("Content-Type"), "text/event-stream") {
		rw.sse, rw.mode = true, readHead
		rw.send()
	}
}

func (rw *readWriter) Write(p []byte) (int, error) {
	if rw.mode == readUndecided {
		rw.decide()
	}
	switch rw.mode {
	case readPass:
		return rw.w.Write(p)
	case readHead:
		if len(rw.buf) > 0 {
			rw.buf = append(rw.buf, p...)
			if len(rw.buf) >= 2*rw.tried || len(rw.buf) > rw.limit {
				rw.head(false)
			}
			return len(p), nil
		}
		// Nothing held: look in p itself, keeping a copy only of what is left.
		rw.buf = p
		rw.head(false)
		rw.buf = bytes.Clone(rw.buf)
		return len(p), nil
	}
	rw.buf = append(rw.buf, p...)
	return len(p), nil
}

// Flush flushes what was written through, so SSE events before the response
// reach the client as the SDK sends them.
func (rw *readWriter) Flush() {
	if f, ok := rw.w.(http.Flusher); ok && rw.sent {
		f.Flush()
	}
}

// decide chooses the mode at the body's first byte: an SSE body looks for its
// response among its events; a JSON body is the response, written once the
// handler has returned and recorded the outcome.
func (rw *readWriter) decide() {
	if strings.HasPrefix(rw.w.Header().Get("Content-Type"), "text/event-stream") {
		rw.sse, rw.mode = true, readHead
		rw.send()
		return
	}
	switch o := rw.o; {
	case o.URI == "" || (o.Code == 0 && !o.Modern):
		rw.mode = readPass
		rw.send()
	case o.Code == 0:
		rw.mode = readHead
		rw.send()
	default:
		rw.mode = readWhole
	}
}

// send writes the status to w once.
func (rw *readWriter) send() {
	if !rw.sent {
		rw.w.Header().Del("Content-Length")
		rw.w.WriteHeader(rw.status)
		rw.sent = true
	}
}

// head looks for the response's head in the buffered bytes and, found, writes
// them (patched) and passes the rest through; the body has ended if final.
func (rw *readWriter) head(final bool) {
	for len(rw.buf) > 0 && rw.mode == readHead {
		if !rw.sse {
			if rw.headOf(rw.buf, 0, final) {
				return
			}
			break
		}
		line, whole := rw.buf, false
		if i := bytes.IndexByte(rw.buf, '\n'); i >= 0 {
			line, whole = rw.buf[:i+1], true
		}
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok && rw.headOf(data, len("data: "), whole || final) {
			return
		}
		if !whole {
			break
		}
		_, _ = rw.w.Write(line)
		rw.buf, rw.tried = rw.buf[len(line):], 0
	}
	switch {
	case rw.mode != readHead:
	case final && len(rw.buf) > 0:
		rw.whole(bodyEnded)
	case len(rw.buf) > rw.limit:
		rw.whole("no result's contents within the limit")
	default:
		rw.tried = len(rw.buf)
	}
}

// headOf looks for the head of a response in data, which starts at rw.buf[at:]
// and is whole if ended. It returns whether it left readHead; false means data
// is not a response (in an SSE body: an event before it) or not whole yet.
func (rw *readWriter) headOf(data []byte, at int, ended bool) bool {
	h, err := scanHead(data)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) && !ended:
		return false
	case errors.Is(err, errNotResponse) && rw.sse:
		return false
	case errors.Is(err, io.ErrUnexpectedEOF):
		rw.whole(bodyEnded)
		return true
	case err != nil:
		rw.whole(err.Error())
		return true
	}
	switch o := rw.o; {
	case o.URI == "" || (o.Code == 0 && !o.Modern):
		_, _ = rw.w.Write(rw.buf)
	case o.Code == 0:
		_, _ = rw.w.Write(h.patch(rw.buf[:at+h.contents], at, o))
		_, _ = rw.w.Write(rw.buf[at+h.contents:])
	default:
		rw.whole("")
		return true
	}
	rw.mode, rw.buf = readPass, nil
	return true
}

// bodyEnded is why a body that ends before its result's contents is buffered whole.
const bodyEnded = "the body ended before the result's contents"

// whole buffers the rest of the body for patchHTTP; why is logged for a success.
func (rw *readWriter) whole(why string) {
	rw.mode = readWhole
	if rw.o.Code == 0 {
		rw.reason = why
	}
}

// finish ends the response once the SDK has returned.
func (rw *readWriter) finish() {
	if rw.mode == readHead {
		rw.head(true)
	}
	if rw.mode != readWhole {
		rw.send()
		return
	}
	if rw.reason != "" {
		rw.log.Warn("resources/read response buffered whole to patch it", "reason", rw.reason, "bytes", len(rw.buf))
	}
	body, status, err := patchHTTP(rw.buf, rw.w.Header().Get("Content-Type"), rw.status, rw.o)
	if err != nil {
		rw.log.Error("cannot patch resources/read response; sending it as is", "err", err)
		body, status = rw.buf, rw.status
	}
	rw.status = status
	rw.send()
	_, _ = rw.w.Write(body)
}

// Why a message has no head to patch: errNotResponse for a message that is not
// a response (in an SSE body, an event before it), errNoContents for a response
// without a result's contents (an error).
var (
	errNotResponse = errors.New("not a JSON-RPC response")
	errNoContents  = errors.New("no result's contents")
)

// responseHead is the start of a JSON-RPC response to a resources/read, up to
// its result's "contents" (offsets in the bytes scanned).
type responseHead struct {
	open     int      // just after the result's '{'
	members  []member // the result's members before "contents"
	contents int      // the "contents" key
}

// member is one member of a JSON object: its key and its bytes, key to value.
type member struct {
	key        string
	start, end int
}

// scanHead finds the head of the response data starts with: io.ErrUnexpectedEOF
// if data ends first.
func scanHead(data []byte) (responseHead, error) {
	var h responseHead
	dec := json.NewDecoder(bytes.NewReader(data))
	var skip json.RawMessage
	if err := expectDelim(dec, '{'); err != nil {
		return h, err
	}
	for {
		key, err := dec.Token()
		if err != nil {
			return h, headErr(err)
		}
		switch key {
		case "jsonrpc", "id":
			if err := dec.Decode(&skip); err != nil {
				return h, headErr(err)
			}
			continue
		case "result":
		case "error":
			return h, errNoContents
		default:
			return h, errNotResponse
		}
		if err := expectDelim(dec, '{'); err != nil {
			return h, err
		}
		h.open = int(dec.InputOffset())
		for dec.More() {
			start := skipSeparators(data, int(dec.InputOffset()))
			key, err := dec.Token()
			if err != nil {
				return h, headErr(err)
			}
			if key == "contents" {
				h.contents = start
				return h, nil
			}
			if err := dec.Decode(&skip); err != nil {
				return h, headErr(err)
			}
			k, _ := key.(string)
			h.members = append(h.members, member{k, start, int(dec.InputOffset())})
		}
		if _, err := dec.Token(); err != nil {
			return h, headErr(err)
		}
		return h, errNoContents
	}
}

// expectDelim reads the delimiter d.
func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return headErr(err)
	}
	if tok != d {
		return errNotResponse
	}
	return nil
}

// headErr is io.ErrUnexpectedEOF for data that ends early, errNotResponse otherwise.
func headErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %w", errNotResponse, err)
}

// skipSeparators returns the offset of the first byte at or after i that is
// not white space or a comma.
func skipSeparators(data []byte, i int) int {
	for i < len(data) && bytes.IndexByte([]byte(" \t\r\n,"), data[i]) >= 0 {
		i++
	}
	return i
}

// patch returns head (the bytes before the result's contents, the response
// starting at head[at:]) with the result's ttlMs and cacheScope set from o:
// the SDK's own members (it sets one hint for every read) replaced in place,
// added if it has none.
func (h responseHead) patch(head []byte, at int, o *resources.ReadOutcome) []byte {
	ttl := []byte(`"ttlMs":` + strconv.FormatInt(o.TTL.Milliseconds(), 10))
	scope := []byte(`"cacheScope":"private"`)
	out := append([]byte(nil), head[:at+h.open]...)
	for _, m := range h.members {
		b := head[at+m.start : at+m.end]
		switch m.key {
		case "ttlMs":
			b, ttl = ttl, nil
		case "cacheScope":
			b, scope = scope, nil
		}
		out = append(append(out, b...), ',')
	}
	for _, b := range [][]byte{ttl, scope} {
		if b != nil {
			out = append(append(out, b...), ',')
		}
	}
	return out
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
