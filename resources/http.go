package resources

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/auth"
)

// postDrainWait bounds how long a 2025-11-25 POST waits for its session's
// notification channel to empty before it proceeds.
const postDrainWait = time.Second

// newHTTP builds the Streamable HTTP endpoint and its middleware stack:
// recover → origin → bearer auth → body limit → stream/POST tracking →
// resources/read patching → mcp-go.
func (s *Server) newHTTP() (http.Handler, error) {
	s.sessions = &sessionIDs{}
	s.streams = &streamSet{cancels: map[*context.CancelFunc]struct{}{}}
	s.orphans = &orphanTimers{timers: map[string]*time.Timer{}}
	s.http = server.NewStreamableHTTPServer(s.mcp,
		server.WithEndpointPath(s.cfg.Path),
		server.WithSessionIdManager(s.sessions),
		server.WithHeartbeatInterval(s.cfg.HeartbeatInterval),
		server.WithStreamableHTTPLogger(s.log),
		server.WithDisableLocalhostProtection(true), // the origin check and the token guard instead
	)
	h := s.track(s.http)
	h = s.limitBody(h)
	if !s.cfg.InsecureNoAuth {
		v, err := auth.New(s.cfg.Verifier.Name, auth.Settings{Token: s.cfg.Token, Options: s.cfg.Verifier.Options})
		if err != nil {
			return nil, err
		}
		h = auth.RequireBearer(v, h)
	}
	h = auth.OriginPolicy{Allowed: s.cfg.AllowedOrigins, AllowLoopback: true}.Wrap(h)
	return s.recoverPanics(h), nil
}

// serveHTTP serves the endpoint and the extra handlers until ctx is done.
func (s *Server) serveHTTP(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle(s.cfg.Path, s.handler)
	for pattern, h := range s.extra {
		mux.Handle(pattern, h)
	}
	ln := s.listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.cfg.Listen); err != nil {
			return fmt.Errorf("listen %s: %w", s.cfg.Listen, err)
		}
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("mcp server listening", "addr", ln.Addr().String(), "path", s.cfg.Path, "auth", !s.cfg.InsecureNoAuth)
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.DrainTimeout)
	defer cancel()
	s.streams.closeAll()
	s.orphans.stopAll()
	s.http.CloseSessions(drain)
	if err := srv.Shutdown(drain); err != nil {
		s.log.Warn("drain deadline passed; closing connections", "err", err)
		_ = srv.Close()
	}
	return nil
}

// recoverPanics turns a panic anywhere below into a JSON-RPC internal error.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic serving mcp request", "method", r.Method, "panic", p)
				writeRPCError(w, http.StatusInternalServerError, mcp.INTERNAL_ERROR, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// limitBody reads POST bodies up to MaxRequestBytes; larger ones get 413.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeRPCError(w, http.StatusRequestEntityTooLarge, mcp.INVALID_REQUEST,
				fmt.Sprintf("request body exceeds %d bytes", s.cfg.MaxRequestBytes))
			return
		}
		if err != nil {
			writeRPCError(w, http.StatusBadRequest, mcp.PARSE_ERROR, "cannot read request body")
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

// track follows 2025-11-25 GET streams and POSTs: a session ends SessionGrace
// after its last GET stream closed, or SessionIdleTimeout after its last
// request when it never opened one (unless another request comes first) and POSTs in flight (notifications wait for them), makes
// long-lived streams cancellable at shutdown, and patches resources/read
// responses.
func (s *Server) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sessionID := r.Header.Get(server.HeaderKeySessionID)
		var env envelope
		if body, ok := r.Context().Value(bodyKey{}).([]byte); ok {
			_ = json.Unmarshal(body, &env)
		}
		switch {
		case r.Method == http.MethodGet && sessionID != "" && s.sessions.known(sessionID):
			ctx, done := s.streams.add(r.Context())
			defer done()
			s.orphans.cancel(sessionID)
			s.subs.streamOpened(sessionID)
			defer func() {
				if s.subs.streamClosed(sessionID) == 0 {
					s.expireSession(sessionID, s.cfg.SessionGrace)
				}
			}()
			next.ServeHTTP(w, r.WithContext(ctx))
		case r.Method == http.MethodPost && env.Method == string(mcp.MethodSubscriptionsListen):
			ctx, done := s.streams.add(r.Context())
			defer done()
			// The SDK writes the acknowledgement before anything else on the stream.
			aw := &ackWait{}
			next.ServeHTTP(&ackWriter{ResponseWriter: w, aw: aw}, r.WithContext(withAckWait(ctx, aw)))
		case r.Method == http.MethodPost && sessionID != "" && s.sessions.known(sessionID):
			s.subs.postStarted(sessionID, postDrainWait)
			defer func() {
				s.subs.postEnded(sessionID)
				if !s.subs.streaming(sessionID) {
					s.expireSession(sessionID, s.cfg.SessionIdleTimeout)
				}
			}()
			s.servePost(w, r, env, next)
		default:
			s.servePost(w, r, env, next)
		}
	})
}

// servePost serves a POST, buffering and patching resources/read responses.
func (s *Server) servePost(w http.ResponseWriter, r *http.Request, env envelope, next http.Handler) {
	if r.Method != http.MethodPost || env.Method != string(mcp.MethodResourcesRead) {
		next.ServeHTTP(w, r)
		return
	}
	ctx, o := withOutcome(r.Context())
	buf := &bufferedWriter{header: http.Header{}, status: http.StatusOK}
	next.ServeHTTP(buf, r.WithContext(ctx))
	body, status, err := patchHTTP(buf.body.Bytes(), buf.header.Get("Content-Type"), buf.status, o)
	if err != nil {
		s.log.Error("cannot patch resources/read response; sending it as is", "err", err)
		body, status = buf.body.Bytes(), buf.status
	}
	for k, v := range buf.header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// expireSession ends the session after d unless a GET stream or a POST of it
// is open by then or another request re-arms the timer first.
func (s *Server) expireSession(sessionID string, d time.Duration) {
	s.orphans.schedule(sessionID, d, func() {
		if !s.subs.streaming(sessionID) && !s.subs.posting(sessionID) {
			s.endSession(sessionID)
		}
	})
}

// endSession terminates a 2025-11-25 session whose last GET stream closed, the
// way a DELETE would: the SDK drops its state and the registry its subscriptions.
func (s *Server) endSession(sessionID string) {
	req, err := http.NewRequest(http.MethodDelete, s.cfg.Path, nil)
	if err != nil {
		return
	}
	req.Header.Set(server.HeaderKeySessionID, sessionID)
	s.http.ServeHTTP(&bufferedWriter{header: http.Header{}}, req)
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

// ackWriter reports the first write of a listen stream's response: the SDK's
// acknowledgement of the subscription.
type ackWriter struct {
	http.ResponseWriter
	aw *ackWait
}

func (a *ackWriter) Write(p []byte) (int, error) {
	n, err := a.ResponseWriter.Write(p)
	a.aw.wrote()
	return n, err
}

func (a *ackWriter) Flush() {
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (a *ackWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// writeRPCError writes a JSON-RPC error with a null id.
func writeRPCError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(nil),
		Error: mcp.NewJSONRPCErrorDetails(code, msg, nil)})
}

// sessionIDs issues and validates 2025-11-25 session ids. Unlike the SDK's
// stateful manager it keeps no tombstones: a terminated id is simply unknown.
type sessionIDs struct{ live sync.Map }

const sessionPrefix = "mcp-session-"

func (m *sessionIDs) Generate() string {
	id := sessionPrefix + uuid.NewString()
	m.live.Store(id, struct{}{})
	return id
}

func (m *sessionIDs) Validate(id string) (bool, error) {
	if _, ok := m.live.Load(id); !ok {
		return false, fmt.Errorf("unknown session id %q", id)
	}
	return false, nil
}

func (m *sessionIDs) Terminate(id string) (bool, error) {
	m.live.Delete(id)
	return false, nil
}

func (m *sessionIDs) known(id string) bool {
	_, ok := m.live.Load(id)
	return ok && strings.HasPrefix(id, sessionPrefix)
}

// streamSet holds the cancel functions of long-lived requests (GET streams and
// subscriptions/listen) so shutdown can end them.
type streamSet struct {
	mu      sync.Mutex
	cancels map[*context.CancelFunc]struct{}
}

func (ss *streamSet) add(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	ss.mu.Lock()
	ss.cancels[&cancel] = struct{}{}
	ss.mu.Unlock()
	return ctx, func() {
		ss.mu.Lock()
		delete(ss.cancels, &cancel)
		ss.mu.Unlock()
		cancel()
	}
}

func (ss *streamSet) closeAll() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for c := range ss.cancels {
		(*c)()
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
