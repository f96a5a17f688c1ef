package resources

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/subscribers"
)

// This file is the one seam between the notebook surface and the MCP transport that
// serves it (sidecar/transport, Streamable HTTP or stdio). The surface does not know
// the transport: New is given a NewTransport, which builds it from a Link, and the
// surface tells the Transport when the SDK opens and drops a session. What mcp-go
// cannot express yet crosses here and nowhere else: a read's real outcome
// (ReadOutcome), the subscriber registry's hand-off rules (Delivery), a listen
// stream's end, acknowledgement and writer (WithListenEnd, Ack, WithListenNotes), the admission of a
// subscription before the SDK sees it (Link.AdmitSubscribe).

// Transport serves the surface's mcp-go server to its clients.
type Transport interface {
	// Serve serves until ctx is done or the transport ends (the stdio client closed its
	// input), then ends its sessions within Config.DrainTimeout.
	Serve(ctx context.Context) error
	// SessionStarted is told that the SDK registered a session.
	SessionStarted(sess server.ClientSession)
	// SessionEnded is told that the SDK dropped a session.
	SessionEnded(sessionID string)
	// Handler is the MCP endpoint; nil for stdio.
	Handler() http.Handler
}

// NewTransport builds the transport of a surface from its Link (WithTransport).
type NewTransport func(Link) (Transport, error)

// WithTransport serves the server with the transport nt builds. Without it the
// server serves no client (Check builds it so).
func WithTransport(nt NewTransport) Option { return func(o *options) { o.transport = nt } }

// Link is the surface as its transport sees it.
type Link struct{ s *Server }

// MCP is the mcp-go server the transport serves.
func (l Link) MCP() *server.MCPServer { return l.s.mcp }

// Config is the server's configuration, defaults applied.
func (l Link) Config() Config { return l.s.cfg }

// Logger is the server's logger.
func (l Link) Logger() *slog.Logger { return l.s.log }

// Registerer is where the server's metrics are registered (nil: nowhere).
func (l Link) Registerer() prometheus.Registerer { return l.s.cfg.Registerer }

// Delivery is the subscriber registry's side that the transport drives.
func (l Link) Delivery() Delivery { return l.s.subs }

// AdmitSubscribe decides a resources/subscribe of a session before the SDK sees it
// (the SDK's sessions cannot refuse one); nil admits it, and records it at once.
func (l Link) AdmitSubscribe(ctx context.Context, sessionID, uri string) *Refusal {
	return l.s.admitSubscribe(ctx, sessionID, uri)
}

// RefuseSession counts and returns the refusal of an initialize beyond max sessions.
func (l Link) RefuseSession(max int) *Refusal { return l.s.refuseSession(max) }

// Message is a change notification the registry hands a session or listen stream:
// its bytes serialised once for every subscriber (AppendJSON adds a listen stream's
// subscription id). The transport writes it.
type Message = subscribers.Message

// Delivery hands change notifications to the transport's writers by the rules mcp-go
// cannot keep itself: a 2025-11-25 session's notifications go out on its GET stream
// only, never while one of its POSTs is in flight (mcp-go PR #969), and a session
// that stops taking them is ended.
type Delivery interface {
	// AddSession records a session whose notifications go to ch, the transport's
	// writer of it; gated: only while a GET stream is open and no POST in flight. end
	// ends a session that stopped taking notifications.
	AddSession(id string, ch chan<- Message, gated bool, end func())
	// StreamOpened and StreamClosed count the session's open GET streams.
	StreamOpened(sessionID string)
	StreamClosed(sessionID string)
	// Streaming reports whether a GET stream of the session is open.
	Streaming(sessionID string) bool
	// Posting reports whether a POST of the session is in flight.
	Posting(sessionID string) bool
	// SessionWrote tells that a stream of the session wrote to its client.
	SessionWrote(sessionID string)
	// PostStarted marks a POST in flight, waiting at most maxWait for the session's
	// channel to empty; PostEnded marks it done.
	PostStarted(sessionID string, maxWait time.Duration)
	PostEnded(sessionID string)
}

var _ Delivery = (*subscribers.Registry)(nil)

// Ack is a subscriptions/listen stream's acknowledgement: no change is sent on the
// stream before the transport says the SDK has written it.
type Ack struct{ w subscribers.AckWait }

// Written tells that the SDK has written the acknowledgement; later calls do nothing.
func (a *Ack) Written() { a.w.Wrote() }

// WithAck records a in a listen request's context.
func WithAck(ctx context.Context, a *Ack) context.Context {
	return subscribers.WithAckWait(ctx, &a.w)
}

type endKey struct{}

// WithListenEnd records in a listen request's context how its transport ends the
// request when it stops taking notifications.
func WithListenEnd(ctx context.Context, end func()) context.Context {
	return context.WithValue(ctx, endKey{}, end)
}

// endFrom returns the end function recorded in ctx, or nil.
func endFrom(ctx context.Context) func() {
	end, _ := ctx.Value(endKey{}).(func())
	return end
}

type notesKey struct{}

// WithListenNotes records in a listen request's context the channel its transport
// writes the stream's notifications from.
func WithListenNotes(ctx context.Context, ch chan<- Message) context.Context {
	return context.WithValue(ctx, notesKey{}, ch)
}

// notesFrom returns the channel recorded in ctx, or nil.
func notesFrom(ctx context.Context) chan<- Message {
	ch, _ := ctx.Value(notesKey{}).(chan<- Message)
	return ch
}

// ReadOutcome carries what the SDK cannot express from a resource handler (it
// reports every handler error as -32603 and applies one cache hint to all reads)
// from the handler to the transport, which patches the response.
type ReadOutcome struct {
	Code    int    // JSON-RPC error code to answer with; 0 for success
	Message string // error message
	URI     string // "": no read recorded
	TTL     time.Duration
	Modern  bool // 2026-07-28 request
}

type outcomeKey struct{}

// WithReadOutcome returns ctx carrying a ReadOutcome a read records itself in.
func WithReadOutcome(ctx context.Context) (context.Context, *ReadOutcome) {
	o := &ReadOutcome{}
	return context.WithValue(ctx, outcomeKey{}, o), o
}

func outcomeFrom(ctx context.Context) *ReadOutcome {
	o, _ := ctx.Value(outcomeKey{}).(*ReadOutcome)
	return o
}
