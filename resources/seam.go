package resources

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/subscribers"
)

// This file is the one seam between the notebook surface and the MCP transport that
// serves it (sidecar/transport, Streamable HTTP or stdio). The surface does not know
// the transport: New is given a NewTransport, which builds it from a Link, and the
// surface tells the Transport when the SDK opens and drops a session. The surface
// records who is subscribed to what and hands each change, serialised once, to the
// subscriber's Sink; when and how it reaches the client is the transport's business.
// What mcp-go cannot express yet crosses here and nowhere else: a read's real outcome
// (ReadOutcome), a listen stream's Sink (WithListenSink), the admission of a
// subscription before the SDK sees it (Link.AdmitSubscribe).

// Transport serves the surface's mcp-go server to its clients.
type Transport interface {
	// Serve serves until ctx is done or the transport ends (the stdio client closed its
	// input), then ends its sessions within its own drain timeout.
	Serve(ctx context.Context) error
	// SessionStarted is told that the SDK registered a session, and returns the Sink
	// the session's change notifications go to.
	SessionStarted(sess server.ClientSession) Sink
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

// Link is the surface as its transport sees it: the mcp-go server it serves and the
// admissions the SDK cannot make. The transport's settings, logger and registerer are
// its own configuration's (sidecar/transport.Config).
type Link struct{ s *Server }

// MCP is the mcp-go server the transport serves.
func (l Link) MCP() *server.MCPServer { return l.s.mcp }

// AdmitSubscribe decides a resources/subscribe of a session before the SDK sees it
// (the SDK's sessions cannot refuse one); nil admits it, and records it at once. The
// request's params are p (the SDK drops their _meta).
func (l Link) AdmitSubscribe(ctx context.Context, sessionID string, p URIParams) *Refusal {
	heard, _ := p.Meta[VersionKey].(string)
	return l.s.admitSubscribe(ctx, sessionID, p.URI, heard)
}

// AdmitRead decides a resources/read before the SDK sees it: a URI over MaxURIBytes is
// refused (the SDK matches a URI against every template, in time that grows faster
// than its length).
func (l Link) AdmitRead(p URIParams) *Refusal { return l.s.admitRead(p.URI) }

// URIParams are the params of a request about one resource (resources/subscribe,
// resources/read) as the transport reads them: the URI, and the _meta that may name
// the version last heard.
type URIParams struct {
	URI  string         `json:"uri"`
	Meta map[string]any `json:"_meta"`
}

// RefuseSession counts and returns the refusal of an initialize beyond max sessions.
func (l Link) RefuseSession(max int) *Refusal { return l.s.refuseSession(max) }

// Message is a change notification handed to a Sink: its bytes serialised once for
// every subscriber (AppendJSON adds a listen stream's subscription id).
type Message = subscribers.Message

// Sink takes a session's or a listen stream's change notifications, without
// blocking, and delivers them by its transport's rules.
type Sink = subscribers.Sink

type answeredKey struct{}

// answered holds what a request's handler leaves for after its answer is written.
type answered struct {
	mu  sync.Mutex
	fns []func()
}

// WithAnswered records in a request's context where its handler may leave work for after
// the answer is written (a read's memory budget, held until the bytes it built are
// gone); the transport calls done once it wrote the answer.
func WithAnswered(ctx context.Context) (_ context.Context, done func()) {
	a := &answered{}
	return context.WithValue(ctx, answeredKey{}, a), func() {
		a.mu.Lock()
		fns := a.fns
		a.fns = nil
		a.mu.Unlock()
		for _, fn := range fns {
			fn()
		}
	}
}

// afterAnswered leaves fn for after the answer of ctx's request is written, and reports
// whether it could: false without WithAnswered (the caller runs fn itself).
func afterAnswered(ctx context.Context, fn func()) bool {
	a, ok := ctx.Value(answeredKey{}).(*answered)
	if !ok {
		return false
	}
	a.mu.Lock()
	a.fns = append(a.fns, fn)
	a.mu.Unlock()
	return true
}

type streamedKey struct{}

// StreamedText is a read's text that its transport writes into the answer itself: the
// SDK's answer holds Placeholder, quoted, where the text goes, and the transport writes
// Text there as a JSON string (jsonenc.WriteString), so the answer never holds the text
// a second time: encoding/json built the answer of a notebook of 60 MB in buffers of up
// to 3 times that (red team of issue 39, pass 9).
type StreamedText struct {
	Placeholder string // unguessable: nothing else in the answer holds it
	Text        []byte // the read's text; nil when the read left none
}

// WithStreamedText records in a resources/read request's context that its transport
// writes the read's text itself, in place of placeholder.
func WithStreamedText(ctx context.Context, placeholder string) (context.Context, *StreamedText) {
	st := &StreamedText{Placeholder: placeholder}
	return context.WithValue(ctx, streamedKey{}, st), st
}

// streamedFrom returns the StreamedText recorded in ctx, or nil.
func streamedFrom(ctx context.Context) *StreamedText {
	st, _ := ctx.Value(streamedKey{}).(*StreamedText)
	return st
}

// withoutStreamedText is ctx for a read whose text its transport does not write itself.
func withoutStreamedText(ctx context.Context) context.Context {
	return context.WithValue(ctx, streamedKey{}, (*StreamedText)(nil))
}

type sinkKey struct{}

// WithListenSink records in a subscriptions/listen request's context the Sink its
// stream's notifications go to; a listen request without one is not recorded.
func WithListenSink(ctx context.Context, sink Sink) context.Context {
	return context.WithValue(ctx, sinkKey{}, sink)
}

// sinkFrom returns the Sink recorded in ctx, or nil.
func sinkFrom(ctx context.Context) Sink {
	sink, _ := ctx.Value(sinkKey{}).(Sink)
	return sink
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
