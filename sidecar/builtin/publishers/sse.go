package publishers

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/conns"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/front"
)

// SSE frame types of the sse publisher's stream (docs/EVENTS.md, "The sse feed").
const (
	SSEHello  = "hello"  // first frame of a stream that resumes or starts without loss
	SSEChange = "change" // one event; data is the Event JSON
	SSEGap    = "gap"    // events were lost before this point: treat every notebook as changed
)

// Gap reasons, the "reason" of a gap frame.
const (
	GapEvicted = "evicted" // the events after Last-Event-ID are no longer in the buffer
	GapRestart = "restart" // Last-Event-ID is of another run of the sidecar
	GapUnknown = "unknown" // Last-Event-ID is not an id this stream gave
)

// ErrNoToken is the sse publisher's refusal to serve without a token.
var ErrNoToken = errors.New(`option "token" is required (a bearer token of at least 16 characters)`)

// sse serves every event to any number of consumers as one Server-Sent Events stream
// on its own listener: authenticated by a bearer token, resumable with Last-Event-ID
// from a bounded buffer of the latest events, and saying so with a gap frame when
// events a consumer asked for are gone. Every consumer reads the same buffer through
// its own cursor, one event at a time and without copying it, so memory is the
// buffer's whatever the number or speed of the consumers (plus, per consumer, the
// event it is writing); one that falls behind the buffer is told of the gap and goes
// on live. The token holder's connections are at most max_connections (within the
// process's descriptors: conns.WithinDescriptors; beyond, 503); connections without
// the token have a budget of their own besides (internal/conns: the oldest idle one
// is closed for a new one), so that they never keep the token holder out; a
// request's header must arrive within read_timeout, and a refused request's
// connection is closed with its answer.
// Options: listen (required, host:port), token (required), path ("/events"), scope,
// buffer (events kept, 1024), buffer_bytes (8 MiB), max_consumers (64),
// max_connections (0: max_consumers + 64), read_timeout (5s), heartbeat (15s, a comment
// line), write_timeout (10s, per frame; a consumer that stalls longer is disconnected
// and resumes).
type sse struct {
	o     sseOptions
	log   *slog.Logger
	epoch string // names this run: an id of another run is a gap

	mu sync.Mutex
	numbering
	ring      []sseEntry // circular, len o.Buffer
	start, n  int        // the oldest entry's index, the number held
	bytes     int        // data bytes held
	next      uint64     // id of the next event; ids are 1, 2, 3, …
	consumers map[chan struct{}]struct{}
	failing   error
	listening bool          // Run has opened the listener: consumers can connect
	stop      chan struct{} // closed when Run ends: streams end

	front *front.Front // the feed's listener, within its shares (internal/conns), serving no probes

	events, gaps, refused prometheus.Counter
	consumersGauge        prometheus.Gauge // moved by each consumer: the sum over the feeds on one Registerer
}

// sseEntry is one buffered event, its JSON immutable once held.
type sseEntry struct {
	id   uint64
	data []byte
}

// Defaults of the sse publisher's listener.
const (
	// DefaultSSEHandshakes is what max_connections adds to max_consumers by default:
	// the token holder's connections besides its streams (requests refused for
	// max_consumers, a consumer reconnecting).
	DefaultSSEHandshakes = 64
	// DefaultSSEReadTimeout is the default read_timeout: a request's header (a
	// connection's first bytes, and an idle connection's next request) must arrive
	// within it.
	DefaultSSEReadTimeout = 5 * time.Second
	// DefaultSSEDrainTimeout is how long the feed's open requests have to end once it
	// stops (its streams end at once).
	DefaultSSEDrainTimeout = 5 * time.Second
)

// sseOptions are the sse publisher's options.
type sseOptions struct {
	Listen       string        `option:"listen"`
	Token        string        `option:"token"`
	Path         string        `option:"path"`
	Scope        string        `option:"scope"`
	Buffer       int           `option:"buffer"`
	BufferBytes  int           `option:"buffer_bytes"`
	MaxConsumers int           `option:"max_consumers"`
	MaxConns     int           `option:"max_connections"`
	ReadTimeout  time.Duration `option:"read_timeout"`
	Heartbeat    time.Duration `option:"heartbeat"`
	WriteTimeout time.Duration `option:"write_timeout"`
}

func newSSE(raw map[string]any, deps publish.Deps) (publish.Publisher, error) {
	o := sseOptions{Path: "/events", Scope: ScopeAll, Buffer: 1024, BufferBytes: 8 << 20,
		MaxConsumers: 64, ReadTimeout: DefaultSSEReadTimeout, Heartbeat: 15 * time.Second, WriteTimeout: 10 * time.Second}
	if err := option.Decode(raw, &o); err != nil {
		return nil, err
	}
	if o.MaxConns == 0 {
		o.MaxConns = o.MaxConsumers + DefaultSSEHandshakes
	}
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return nil, fmt.Errorf("option \"listen\" must be host:port, got %q", o.Listen)
	}
	if len(o.Token) < 16 {
		return nil, ErrNoToken
	}
	if !strings.HasPrefix(o.Path, "/") {
		return nil, fmt.Errorf("option \"path\" must start with /, got %q", o.Path)
	}
	if err := checkScope(o.Scope); err != nil {
		return nil, err
	}
	if o.Buffer < 1 || o.Buffer > 1<<20 || o.BufferBytes < 1 || o.MaxConsumers < 1 || o.MaxConns < 1 ||
		o.ReadTimeout <= 0 || o.Heartbeat <= 0 || o.WriteTimeout <= 0 {
		return nil, errors.New("buffer must be 1..1048576, buffer_bytes, max_consumers and max_connections ≥ 1, read_timeout, heartbeat and write_timeout > 0")
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	s := &sse{o: o, log: deps.Logger, epoch: hex.EncodeToString(b[:]),
		ring: make([]sseEntry, o.Buffer), next: 1, consumers: map[chan struct{}]struct{}{}, stop: make(chan struct{})}
	r := promreg.On(deps.Registerer)
	s.events = promreg.Register(r, publisherCounter("sse", "delivered_total", "Events the publisher delivered."))
	s.numbering = newNumbering(r, "sse", o.Scope)
	s.gaps = promreg.Register(r, publisherCounter("sse", "sse_gaps_total", "Gap frames the sse feed sent: a consumer asked for events no longer buffered."))
	s.refused = promreg.Register(r, publisherCounter("sse", "sse_refused_total", "sse feed requests refused: bad token, wrong method or too many consumers."))
	s.consumersGauge = promreg.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: promreg.Namespace, Subsystem: "publisher", Name: "sse_consumers", ConstLabels: prometheus.Labels{"publisher": "sse"},
		Help: "Consumers connected to the sse feed."}))
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	f, err := s.newFront(deps)
	if err != nil {
		return nil, err
	}
	s.front = f
	return s, nil
}

// newFront is the feed's listener on sidecar/front: the stream at its path, no probes,
// its connections within max_connections (and the process's descriptors), counted
// as listener "sse".
func (s *sse) newFront(deps publish.Deps) (*front.Front, error) {
	limit := conns.WithinDescriptors(s.o.MaxConns)
	if limit < s.o.MaxConns {
		s.log.Warn("sse feed: max_connections lowered to a quarter of the file descriptors the process may open beyond a reserve",
			"max_connections", s.o.MaxConns, "cap", limit, "reserve", conns.DescriptorReserve)
	}
	f, err := front.New(front.Config{
		Listen: s.o.Listen, Name: "sse", MaxConnections: limit,
		IdleTimeout: s.o.ReadTimeout, ReadTimeout: s.o.ReadTimeout, DrainTimeout: DefaultSSEDrainTimeout,
		Listening: func(addr net.Addr) {
			s.mu.Lock()
			s.listening = true
			s.mu.Unlock()
			s.log.Info("sse feed listening", "addr", addr.String(), "path", s.o.Path, "max_connections", limit)
		},
		Logger: deps.Logger, Registerer: deps.Registerer,
	}, front.Probes{})
	if err != nil {
		return nil, fmt.Errorf("sse feed: %w", err)
	}
	f.Handle(s.o.Path, s)
	return f, nil
}

// Publish numbers ev, buffers its JSON (evicting the oldest beyond the bounds) and
// wakes every consumer; it never blocks on a consumer.
func (s *sse) Publish(_ context.Context, ev publish.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.number(&ev) {
		return nil
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	for s.n > 0 && (s.n == len(s.ring) || s.bytes+len(data) > s.o.BufferBytes) {
		s.bytes -= len(s.ring[s.start].data)
		s.ring[s.start] = sseEntry{}
		s.start = (s.start + 1) % len(s.ring)
		s.n--
	}
	s.ring[(s.start+s.n)%len(s.ring)] = sseEntry{id: s.next, data: data}
	s.n++
	s.bytes += len(data)
	s.next++
	s.events.Inc()
	for wake := range s.consumers {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// Buffered is the number of events and data bytes the buffer holds.
func (s *sse) Buffered() (events, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.bytes
}

// Consumers is the number of connected consumers.
func (s *sse) Consumers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.consumers)
}

// Run listens and serves the stream until ctx is done, its streams ended at once; a
// listen failure is returned (the server stops: a configured feed that cannot be
// reached tells nobody).
func (s *sse) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { close(s.stop) })
	defer stop()
	if err := s.front.Run(ctx); err != nil {
		s.mu.Lock()
		s.failing = err
		s.mu.Unlock()
		return fmt.Errorf("sse feed: %w", err)
	}
	return nil
}

// Health is the listen error, if the listener could not be opened, and an error until
// it is open (a feed nobody can reach delivers nothing: /readyz waits for it).
func (s *sse) Health() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing != nil {
		return fmt.Errorf("publisher sse: %w", s.failing)
	}
	if !s.listening {
		return errors.New("publisher sse: not listening yet")
	}
	return nil
}

// authorized compares the bearer token in constant time.
func (s *sse) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.o.Token)) == 1
}

// gapFrame is the data of a gap frame.
type gapFrame struct {
	V           int    `json:"v"`
	Reason      string `json:"reason"`
	LastEventID string `json:"last_event_id"` // what the consumer asked to resume after
}

// helloFrame is the data of a hello frame.
type helloFrame struct {
	V       int  `json:"v"`
	Resumed bool `json:"resumed"` // the stream continues after Last-Event-ID without loss
}

// id is the SSE id of event number n of this run.
func (s *sse) id(n uint64) string { return s.epoch + "-" + strconv.FormatUint(n, 10) }

// oldest is the id of the oldest buffered event (next when none is). Under s.mu.
func (s *sse) oldest() uint64 {
	if s.n == 0 {
		return s.next
	}
	return s.ring[s.start].id
}

// resume is where a stream asking for the events after last starts, and the gap
// reason if it cannot start there ("" when it can). Under s.mu.
func (s *sse) resume(last string) (cursor uint64, gap string) {
	if last == "" {
		return s.next, ""
	}
	epoch, num, ok := strings.Cut(last, "-")
	n, err := strconv.ParseUint(num, 10, 64)
	switch {
	case !ok || err != nil:
		return s.next, GapUnknown
	case epoch != s.epoch:
		return s.next, GapRestart
	case n >= s.next:
		return s.next, GapUnknown
	case n+1 < s.oldest():
		return s.next, GapEvicted
	}
	return n + 1, ""
}

// at is the entry numbered cursor (a zero entry when there is none yet); evicted
// reports that it is no longer buffered. Under s.mu.
func (s *sse) at(cursor uint64) (e sseEntry, evicted bool) {
	switch oldest := s.oldest(); {
	case cursor < oldest:
		return sseEntry{}, true
	case cursor < s.next:
		return s.ring[(s.start+int(cursor-oldest))%len(s.ring)], false
	}
	return sseEntry{}, false
}

// refuse answers a request the feed does not serve, counted, and closes its
// connection: a client without the token holds nothing.
func (s *sse) refuse(w http.ResponseWriter, code int, msg string) {
	s.refused.Inc()
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}

// frameEnd ends every frame.
var frameEnd = []byte("\n\n")

// ServeHTTP is one consumer's stream: admitted, opened with its first frame, then
// the buffered events from its cursor, a heartbeat when idle, until the consumer or
// the feed goes.
func (s *sse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	last := r.Header.Get("Last-Event-ID")
	if len(last) > 64 {
		last = "?"
	}
	wake, cursor, gap, ok := s.admit(w, r, last)
	if !ok {
		return
	}
	defer s.leave(wake)
	out := s.open(w)
	first := s.frame(SSEHello, cursor-1, helloFrame{V: publish.Version, Resumed: last != ""})
	if gap != "" {
		first = s.gapFrame(gap, last, cursor-1)
	}
	if !out.write([]byte("retry: 1000\n\n"+first)) || !out.flush() {
		return
	}
	beat := time.NewTicker(s.o.Heartbeat)
	defer beat.Stop()
	for {
		if cursor, ok = s.catchUp(r, out, cursor); !ok || !out.flush() {
			return
		}
		select {
		case <-wake:
		case <-beat.C:
			if !out.write([]byte(": ping\n\n")) || !out.flush() {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		}
	}
}

// admit refuses a request the feed does not serve (a method other than GET, no or a
// wrong token, beyond the token holder's connections or max_consumers) and registers
// the others as consumers: wake is told of new events; the stream starts at cursor,
// with a gap frame for reason gap if it is not "".
func (s *sse) admit(w http.ResponseWriter, r *http.Request, last string) (wake chan struct{}, cursor uint64, gap string, ok bool) {
	if r.Method != http.MethodGet {
		s.refuse(w, http.StatusMethodNotAllowed, "method not allowed")
		return nil, 0, "", false
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="jupyter-mcp-sidecar feed"`)
		s.refuse(w, http.StatusUnauthorized, "unauthorized")
		return nil, 0, "", false
	}
	if !conns.Admit(w, r, "token") { // the token holder's connections, apart from the anonymous'
		s.refused.Inc()
		return nil, 0, "", false
	}
	wake = make(chan struct{}, 1)
	s.mu.Lock()
	if len(s.consumers) >= s.o.MaxConsumers {
		s.mu.Unlock()
		w.Header().Set("Retry-After", "5")
		s.refuse(w, http.StatusServiceUnavailable, "too many consumers")
		return nil, 0, "", false
	}
	cursor, gap = s.resume(last)
	s.consumers[wake] = struct{}{}
	s.mu.Unlock()
	s.consumersGauge.Inc()
	return wake, cursor, gap, true
}

// leave forgets the consumer admit registered with wake.
func (s *sse) leave(wake chan struct{}) {
	s.mu.Lock()
	delete(s.consumers, wake)
	s.mu.Unlock()
	s.consumersGauge.Dec()
}

// sseOut writes one consumer's frames, each within the write timeout; they go out as
// they are, the buffered event's bytes never copied for the consumer.
type sseOut struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	head    []byte // one change frame's lines before its data, reused
}

// open answers 200 with the event stream's headers.
func (s *sse) open(w http.ResponseWriter) *sseOut {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sseOut{w: w, rc: http.NewResponseController(w), timeout: s.o.WriteTimeout}
}

// write writes the parts of one frame; false: the consumer is gone or stalled.
func (o *sseOut) write(parts ...[]byte) bool {
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout))
	for _, p := range parts {
		if _, err := o.w.Write(p); err != nil {
			return false
		}
	}
	return true
}

// flush sends what was written; false: the consumer is gone or stalled.
func (o *sseOut) flush() bool {
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout))
	return o.rc.Flush() == nil
}

// catchUp writes the buffered events from cursor on, one at a time from the shared
// buffer (a consumer holds a reference to the event it is writing, never a copy of its
// backlog), a gap frame where the buffer moved past it, and returns the cursor after
// the last; false: the consumer or the feed is gone.
func (s *sse) catchUp(r *http.Request, out *sseOut, cursor uint64) (uint64, bool) {
	for {
		select {
		case <-r.Context().Done():
			return cursor, false
		case <-s.stop:
			return cursor, false
		default:
		}
		s.mu.Lock()
		e, evicted := s.at(cursor)
		if evicted {
			cursor = s.next
		}
		s.mu.Unlock()
		if evicted {
			if !out.write([]byte(s.gapFrame(GapEvicted, s.id(cursor-1), cursor-1))) {
				return cursor, false
			}
			continue
		}
		if e.data == nil {
			return cursor, true
		}
		out.head = fmt.Appendf(out.head[:0], "id: %s\nevent: %s\ndata: ", s.id(e.id), SSEChange)
		if !out.write(out.head, e.data, frameEnd) {
			return cursor, false
		}
		cursor = e.id + 1
	}
}

// frame is one SSE frame with an id (the last event before it).
func (s *sse) frame(kind string, id uint64, data any) string {
	b, _ := json.Marshal(data) // plain structs: never fails
	return fmt.Sprintf("id: %s\nevent: %s\ndata: %s\n\n", s.id(id), kind, b)
}

// gapFrame says that the events after last are lost; the stream goes on from id.
func (s *sse) gapFrame(reason, last string, id uint64) string {
	s.gaps.Inc()
	s.log.Warn("sse feed: consumer missed events", "reason", reason, "last_event_id", last)
	return s.frame(SSEGap, id, gapFrame{V: publish.Version, Reason: reason, LastEventID: last})
}
