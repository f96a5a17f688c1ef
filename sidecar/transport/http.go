package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/rpcerror"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

// sessionRetryAfter is the Retry-After of an initialize refused for
// MaxSessions.
const sessionRetryAfter = 10 * time.Second

// postDrainWait bounds how long a 2025-11-25 POST waits for a batch of its session's
// notifications being written before it proceeds.
const postDrainWait = time.Second

// httpTransport serves Streamable HTTP: the SDK's handler wrapped in the
// endpoint's middleware, and the bookkeeping of 2025-11-25 sessions and
// long-lived streams.
type httpTransport struct {
	link     resources.Link
	cfg      Config
	log      *slog.Logger
	m        metrics
	sdk      *server.StreamableHTTPServer
	endpoint http.Handler
	sessions *sessionIDs
	streams  *streamSet
	orphans  *orphanTimers
	replay   *replayStore
	outboxes *outboxes // per 2025-11-25 session, its notifications' hand-off
	writers  *writers  // write the outboxes' batches, sessions' and listen streams'
}

// newHTTP builds the Streamable HTTP endpoint and its middleware stack:
// recover → body limit → stream/POST tracking → resources/read patching →
// mcp-go. The front puts the origin check, CORS and bearer auth before it.
func newHTTP(l resources.Link, cfg Config) (*httpTransport, error) {
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	t := &httpTransport{
		link: l, cfg: cfg, log: cfg.Logger, m: m,
		sessions: newSessionIDs(cfg.MaxSessions),
		streams:  &streamSet{open: map[*stream]struct{}{}},
		orphans:  &orphanTimers{timers: map[string]*time.Timer{}},
		replay:   newReplayStore(cfg.ReplayEvents, cfg.ReplayBytes),
		outboxes: &outboxes{open: map[string]*sessionOut{}},
		writers:  newWriters(),
	}
	t.sdk = server.NewStreamableHTTPServer(l.MCP(),
		server.WithEndpointPath(cfg.Path),
		server.WithSessionIdManagerResolver(t.sessions),
		server.WithHeartbeatInterval(cfg.HeartbeatInterval),
		server.WithEventStore(t.replay),
		server.WithStreamableHTTPLogger(t.log),
		server.WithDisableLocalhostProtection(true), // the front's origin check and token guard instead
	)
	h := t.track(t.sdk)
	h = t.limitBody(h)
	t.endpoint = rpcerror.Recover(t.log, h)
	return t, nil
}

// Handler is the MCP endpoint.
func (t *httpTransport) Handler() http.Handler { return t.endpoint }

// SessionStarted registers a 2025-11-25 session and returns its outbox: its
// notifications go out on its GET stream only, it ends after SessionIdleTimeout if it
// never opens one, and it is ended (its streams cut, 404 afterwards) if it stops
// taking them.
func (t *httpTransport) SessionStarted(sess server.ClientSession) resources.Sink {
	id := sess.SessionID()
	t.sessions.registered(id)
	out := &streamOut{session: id, replay: t.replay}
	o := &sessionOut{out: out, outbox: newOutbox(era20251125, t.writers, out.write, func() {
		t.streams.abort(id)
		t.endSession(id)
	}, t.m.delivery, t.log, t.cfg.SendTimeout)}
	o.gated = true
	t.outboxes.start(id, o)
	t.expireSession(id, t.cfg.SessionIdleTimeout)
	return o
}

// SessionEnded forgets the session's orphan timer and stops its writer.
func (t *httpTransport) SessionEnded(sessionID string) {
	t.orphans.cancel(sessionID)
	t.outboxes.end(sessionID)
}

// Serve waits until ctx is done (the front serves the endpoint), then ends the
// long-lived streams and every session within DrainTimeout.
func (t *httpTransport) Serve(ctx context.Context) error {
	<-ctx.Done()
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.DrainTimeout)
	defer cancel()
	t.closeSessions(drain)
	return nil
}

// closeSessions ends the long-lived streams and every session.
func (t *httpTransport) closeSessions(ctx context.Context) {
	t.streams.closeAll()
	t.orphans.stopAll()
	t.sdk.CloseSessions(ctx)
}

// limitBody reads POST bodies up to MaxRequestBytes; larger ones get 413.
func (t *httpTransport) limitBody(next http.Handler) http.Handler {
	limit := t.cfg.MaxRequestBytes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			rpcerror.Write(w, http.StatusRequestEntityTooLarge, mcp.INVALID_REQUEST,
				fmt.Sprintf("request body exceeds %d bytes", limit))
			return
		}
		if err != nil {
			rpcerror.Write(w, http.StatusBadRequest, mcp.PARSE_ERROR, "cannot read request body")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, withBody(r, body))
	})
}

type bodyKey struct{}

func withBody(r *http.Request, body []byte) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), bodyKey{}, body))
}

// envelope is what the tracking layer needs of a JSON-RPC message.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// track follows the requests of 2025-11-25 sessions and the long-lived ones.
// A request naming a session that is not live (ended, expired, never issued)
// is answered 404 whatever its verb, so the client starts a new one; a GET
// without a session id is refused rather than given a session nobody ends.
// A session's GET streams and POSTs in flight are counted in the registry
// (its notifications go out on a GET stream, never while a POST is in
// flight); a session ends SessionGrace after its last GET stream closed, or
// SessionIdleTimeout after its last request if it has no stream, unless a new
// request comes first. A GET resuming with Last-Event-ID past the replay
// buffer ends its session (404). Subscriptions are admitted here (the surface's
// admit.go); GET streams and listen requests can be cut at shutdown or when they
// stop taking notifications; resources/read responses are patched (sdkpatch.go).
// Each case is a step of its own: readEnvelope, serveStream (resume), serveListen,
// initialize, servePost.
func (t *httpTransport) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env, ok := readEnvelope(w, r)
		if !ok {
			return
		}
		sessionID := r.Header.Get(server.HeaderKeySessionID)
		live := sessionID != "" && t.sessions.known(sessionID)
		legacy := !mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion))
		if env.Method == string(mcp.MethodResourcesRead) {
			if ref := t.link.AdmitRead(uriParams(r)); ref != nil {
				writeJSON(w, http.StatusOK, ref.Answer(env.id()))
				return
			}
			// what the read builds is held until its answer is written (resources.MaxReadBytes)
			ctx, answered := resources.WithAnswered(r.Context())
			defer answered()
			r = r.WithContext(ctx)
		}
		switch {
		case sessionID != "" && !live && legacy:
			rpcerror.Write(w, http.StatusNotFound, mcp.INVALID_REQUEST, "session not found: initialize a new session")
		case r.Method == http.MethodGet && sessionID == "" && legacy:
			rpcerror.Write(w, http.StatusBadRequest, mcp.INVALID_REQUEST, "a GET stream needs the Mcp-Session-Id of an initialized session")
		case r.Method == http.MethodGet && live:
			t.serveStream(w, r, sessionID, next)
		case r.Method == http.MethodPost && env.Method == string(mcp.MethodSubscriptionsListen):
			t.serveListen(w, r, next)
		case r.Method == http.MethodPost && env.Method == string(mcp.MethodInitialize) && !modernRequest(r):
			t.initialize(w, r, env, next)
		case r.Method == http.MethodPost && live:
			t.servePost(w, r, sessionID, env, next)
		default:
			servePatched(w, r, env.Method, next, t.cfg.MaxRequestBytes, t.log)
		}
	})
}

// readEnvelope reads the method and id of a POST's JSON-RPC message (nothing for
// other requests); a batch is answered 400 and not served (ok false).
func readEnvelope(w http.ResponseWriter, r *http.Request) (env envelope, ok bool) {
	if body, ok := r.Context().Value(bodyKey{}).([]byte); ok {
		if isBatch(body) {
			writeJSON(w, http.StatusBadRequest, errBatch)
			return env, false
		}
		_ = json.Unmarshal(body, &env)
	}
	return env, true
}

// serveStream serves a GET stream of a live 2025-11-25 session, resumed from its
// Last-Event-ID if it names one (resume), counted open in the registry once the SDK
// answers 200; the session's notifications are written to it by its outbox from
// then; the session expires SessionGrace after its last stream closed.
func (t *httpTransport) serveStream(w http.ResponseWriter, r *http.Request, sessionID string, next http.Handler) {
	last := r.Header.Get("Last-Event-ID")
	if !t.resume(w, sessionID, last) {
		return
	}
	resumeNotes := ""
	if last != "" && t.replay.streamOf(sessionID, last) == noteStream {
		// The transport's own notifications: it replays them itself, and the SDK
		// attaches the connection as a fresh GET stream.
		resumeNotes = last
		r = r.Clone(r.Context())
		r.Header.Del("Last-Event-ID")
	}
	ctx, st, done := t.streams.add(r.Context(), w, sessionID)
	defer done()
	t.orphans.cancel(sessionID)
	// The stream counts as open, and the session's notifications are written to it,
	// only once the SDK answers 200: the SDK has attached the connection to the
	// session's stream by then (a fresh stream supersedes the one before).
	sw := newStreamWriter(w, nil)
	sw.cut = st.end
	var o *sessionOut // set once the stream opened
	sw.started = func(status int) {
		if status == http.StatusOK && o == nil {
			if o = t.outboxes.get(sessionID); o != nil {
				o.out.attach(sw, resumeNotes)
				o.streamOpened()
			}
		}
	}
	defer func() {
		if o != nil {
			o.out.detach(sw)
			o.streamClosed()
		}
		sw.release()
		if !t.streaming(sessionID) {
			t.expireSession(sessionID, t.cfg.SessionGrace)
		}
	}()
	next.ServeHTTP(sw, r.WithContext(ctx))
}

// resume decides a GET stream's Last-Event-ID ("" : a fresh stream): within the
// replay buffer it resumes; past it the session is ended and the stream answered
// 404 (false), so the client starts again rather than miss changes silently.
func (t *httpTransport) resume(w http.ResponseWriter, sessionID, last string) bool {
	if last == "" {
		return true
	}
	if !t.replay.resumable(sessionID, last) {
		t.m.resumeRefused.Inc()
		t.log.Info("stream resumed past its replay buffer; ending the session", "session", sessionID)
		t.endSession(sessionID)
		rpcerror.Write(w, http.StatusNotFound, mcp.INVALID_REQUEST, "session ended: the stream cannot resume from that event; initialize a new session")
		return false
	}
	t.m.resumed.Inc()
	return true
}

// serveListen serves a subscriptions/listen request: a long-lived stream that can be
// cut at shutdown or when it stops taking notifications. The SDK writes the
// acknowledgement before anything else on the stream; the stream's notifications
// wait for it in the stream's outbox.
func (t *httpTransport) serveListen(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ctx, st, done := t.streams.add(r.Context(), w, "")
	defer done()
	out := &streamOut{}
	o := newOutbox(era20260728, t.writers, out.write, st.end, t.m.delivery, t.log, t.cfg.SendTimeout)
	o.held = true
	sw := newStreamWriter(w, o.release)
	out.attach(sw, "")
	defer func() {
		out.detach(sw)
		o.stopWait()
		sw.release()
	}()
	next.ServeHTTP(sw, r.WithContext(resources.WithListenSink(ctx, o)))
}

// servePost serves a POST of a live 2025-11-25 session: a resources/subscribe is
// admitted first (admit.go); while the POST is in flight the session's notifications
// wait (the outbox's hand-off rule, outbox.go); the session expires SessionIdleTimeout after it if no GET
// stream is open.
func (t *httpTransport) servePost(w http.ResponseWriter, r *http.Request, sessionID string, env envelope, next http.Handler) {
	if env.Method == string(mcp.MethodResourcesSubscribe) {
		if ref := t.link.AdmitSubscribe(r.Context(), sessionID, uriParams(r)); ref != nil {
			writeJSON(w, http.StatusOK, ref.Answer(env.id()))
			return
		}
	}
	if o := t.outboxes.get(sessionID); o != nil {
		o.postStarted(postDrainWait)
		defer o.postEnded()
	}
	defer func() {
		if !t.streaming(sessionID) {
			t.expireSession(sessionID, t.cfg.SessionIdleTimeout)
		}
	}()
	servePatched(w, r, env.Method, next, t.cfg.MaxRequestBytes, t.log)
}

// initialize serves a 2025-11-25 initialize if a session slot is free (see
// sessionIDs), and refuses it otherwise: 503 with Retry-After and a JSON-RPC
// error, counted as limit "sessions", with no session state created.
func (t *httpTransport) initialize(w http.ResponseWriter, r *http.Request, env envelope, next http.Handler) {
	a, ok := t.sessions.reserve()
	if !ok {
		ref := t.link.RefuseSession(t.cfg.MaxSessions)
		w.Header().Set("Retry-After", strconv.Itoa(int(sessionRetryAfter/time.Second)))
		writeJSON(w, http.StatusServiceUnavailable, ref.Answer(env.id()))
		return
	}
	defer func() {
		if ghost := t.sessions.settle(a); ghost != "" {
			_ = t.replay.PurgeSession(r.Context(), ghost)
		}
	}()
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), admissionKey{}, a)))
}

// modernRequest reports whether the SDK serves r as a 2026-07-28 request (no
// session): its MCP-Protocol-Version header or its params._meta say so.
func modernRequest(r *http.Request) bool {
	var req struct {
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if body, ok := r.Context().Value(bodyKey{}).([]byte); ok && json.Unmarshal(body, &req) == nil && mcp.IsModernProtocol(req.Params.Meta.ProtocolVersion()) {
		return true
	}
	return mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion))
}

// uriParams are the params of a resources/subscribe or resources/read request body.
func uriParams(r *http.Request) resources.URIParams {
	var req struct {
		Params resources.URIParams `json:"params"`
	}
	body, _ := r.Context().Value(bodyKey{}).([]byte)
	_ = json.Unmarshal(body, &req)
	return req.Params
}

// id is the envelope's request id as the SDK types it (nil if absent or invalid).
func (e envelope) id() any {
	var id any
	if json.Unmarshal(e.ID, &id) != nil {
		return nil
	}
	return id
}

// expireSession ends the session after d unless a GET stream or a POST of it
// is open by then or another request re-arms the timer first.
func (t *httpTransport) expireSession(sessionID string, d time.Duration) {
	t.orphans.schedule(sessionID, d, func() {
		if o := t.outboxes.get(sessionID); o == nil || !o.streaming() && !o.posting() {
			t.endSession(sessionID)
		}
	})
}

// streaming reports whether a GET stream of the session is open.
func (t *httpTransport) streaming(sessionID string) bool {
	o := t.outboxes.get(sessionID)
	return o != nil && o.streaming()
}

// streamWriter is the response of a long-lived stream (a GET stream, a listen
// stream), written by the SDK and by the stream's outbox: an SDK event, from its first
// Write to the Flush that ends it, and a batch of the outbox are written whole, one
// after the other, under mu. A listen stream's is told of the SDK's first write (its
// acknowledgement).
type streamWriter struct {
	http.ResponseWriter
	wrote   func()           // after each write of the SDK; may be nil
	started func(status int) // the response's status is written; may be nil
	cut     func()           // ends the stream, failing a write it is blocked in; may be nil

	mu      sync.Mutex
	holding bool // the SDK's writes hold mu until its Flush (one SDK goroutine at a time)
	rc      *http.ResponseController
}

// newStreamWriter wraps the response of a long-lived stream.
func newStreamWriter(w http.ResponseWriter, wrote func()) *streamWriter {
	return &streamWriter{ResponseWriter: w, wrote: wrote, rc: http.NewResponseController(w)}
}

func (a *streamWriter) WriteHeader(status int) {
	a.ResponseWriter.WriteHeader(status)
	if a.started != nil {
		a.started(status)
	}
}

func (a *streamWriter) Write(p []byte) (int, error) {
	a.hold()
	n, err := a.ResponseWriter.Write(p)
	if a.wrote != nil {
		a.wrote()
	}
	return n, err
}

func (a *streamWriter) Flush() {
	a.hold()
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	a.release()
}

// hold keeps the outbox's writes out from the SDK's first Write of an event to the
// Flush that ends it (release); the SDK writes from one goroutine at a time.
func (a *streamWriter) hold() {
	if !a.holding {
		a.mu.Lock()
		a.holding = true
	}
}

// release lets the outbox write again after the SDK's event (Flush), or after SDK
// writes no Flush ended (the handler has returned).
func (a *streamWriter) release() {
	if a.holding {
		a.holding = false
		a.mu.Unlock()
	}
}

// writeEvent writes SSE events of the outbox, whole, and flushes them.
func (a *streamWriter) writeEvent(b []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.ResponseWriter.Write(b); err != nil {
		return err
	}
	return a.rc.Flush()
}

func (a *streamWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// streamSet holds the long-lived requests (GET streams and
// subscriptions/listen) so that shutdown, or a session that stopped taking
// notifications, can end them.
type streamSet struct {
	mu   sync.Mutex
	open map[*stream]struct{}
}

// stream is one long-lived request; owner is its 2025-11-25 session id ("" for listen).
type stream struct {
	owner  string
	cancel context.CancelFunc
	rc     *http.ResponseController
}

// add registers a request; done, once the handler returns, cancels its
// context and forgets it.
func (ss *streamSet) add(parent context.Context, w http.ResponseWriter, owner string) (context.Context, *stream, func()) {
	ctx, cancel := context.WithCancel(parent)
	st := &stream{owner: owner, cancel: cancel, rc: http.NewResponseController(w)}
	ss.mu.Lock()
	ss.open[st] = struct{}{}
	ss.mu.Unlock()
	return ctx, st, func() {
		ss.mu.Lock()
		delete(ss.open, st)
		ss.mu.Unlock()
		cancel()
	}
}

// end cuts a request that stopped taking notifications: it cancels its
// context and fails the write it may be blocked in, and the next ones.
func (st *stream) end() {
	_ = st.rc.SetWriteDeadline(time.Now())
	st.cancel()
}

// abort ends the streams of a session.
func (ss *streamSet) abort(owner string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for st := range ss.open {
		if st.owner == owner {
			st.end()
		}
	}
}

func (ss *streamSet) closeAll() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for st := range ss.open {
		st.cancel()
	}
}

// orphanTimers ends 2025-11-25 sessions left without a GET stream.
type orphanTimers struct {
	mu     sync.Mutex
	timers map[string]*time.Timer
}

func (o *orphanTimers) schedule(sessionID string, after time.Duration, end func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t, ok := o.timers[sessionID]; ok {
		t.Stop()
	}
	o.timers[sessionID] = time.AfterFunc(after, func() {
		o.mu.Lock()
		delete(o.timers, sessionID)
		o.mu.Unlock()
		end()
	})
}

func (o *orphanTimers) cancel(sessionID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t, ok := o.timers[sessionID]; ok {
		t.Stop()
		delete(o.timers, sessionID)
	}
}

func (o *orphanTimers) stopAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id, t := range o.timers {
		t.Stop()
		delete(o.timers, id)
	}
}
