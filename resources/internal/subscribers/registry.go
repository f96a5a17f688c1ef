// Package subscribers is the MCP server's own record of who is subscribed to what, and
// the delivery of change notifications to them: 2025-11-25 sessions (resources/subscribe)
// and 2026-07-28 subscriptions/listen streams. The SDK records no subscriptions for its
// built-in sessions, so the server feeds this registry from its session, subscribe and
// listen hooks. A notification is serialised once (Note) and every subscriber is handed
// the same bytes on a channel of its transport, which writes them; only a listen
// stream's subscription id, serialised once per stream, is added as they are written.
package subscribers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Eras label sessions and subscribers: the protocol revisions.
const (
	Era20251125 = "2025-11-25"
	Era20260728 = "2026-07-28"
)

// subscriber is one party told about changes: a 2025-11-25 session (its
// resources/subscribe calls) or a 2026-07-28 subscriptions/listen stream.
type subscriber struct {
	key       string
	era       string
	sessionID string         // 2025-11-25 session id
	ch        chan<- Message // the transport's writer of the session or stream
	tag       []byte         // listen stream: its subscription id, tagged on every notification
	gated     bool           // HTTP 2025-11-25: send only on an open GET stream, while no POST of the session is in flight
	end       func()         // ends the session or stream when it cannot take notifications; may be nil

	mu           sync.Mutex
	removed      bool
	held         bool        // listen stream whose acknowledgement is not written yet: changes queue, nothing is sent
	listChanged  bool        // also told notifications/resources/list_changed
	blockedSince time.Time   // when the channel was first found full, zero while it takes notifications
	retry        *time.Timer // pending flush while the channel is full
	uris         map[string]struct{}
	uriBytes     int                 // the bytes of the URIs in uris, summed
	pending      []*Note             // notifications that wait for the transport
	pendingSet   map[string]struct{} // their URIs ("": list_changed)
	wrote        chan struct{}       // closed at the next write of a GET stream, while a POST waits for the channel to drain
}

// Registry is the server's own record of who is subscribed to what. The SDK
// records nothing for its built-in sessions, so this is fed by the session,
// Subscribe, unsubscribe and subscriptions/listen hooks.
type Registry struct {
	log *slog.Logger

	mu    sync.RWMutex
	subs  map[string]*subscriber
	gets  map[string]int // open GET streams per 2025-11-25 session id
	posts map[string]int // POSTs in flight per 2025-11-25 session id

	listenSeq   atomic.Int64
	m           *metrics
	sendTimeout time.Duration // how long a full channel may block a subscriber before it is dropped
}

// Config configures a Registry.
type Config struct {
	// SendTimeout is how long a subscriber's channel may stay full before it loses
	// its pending notifications and subscriptions.
	SendTimeout time.Duration
	Logger      *slog.Logger          // nil: slog.Default()
	Registerer  prometheus.Registerer // the registry's metrics; nil: none
}

// New returns an empty registry.
func New(cfg Config) (*Registry, error) {
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Registry{log: cmp.Or(cfg.Logger, slog.Default()), m: m, sendTimeout: cfg.SendTimeout,
		subs: map[string]*subscriber{}, gets: map[string]int{}, posts: map[string]int{}}, nil
}

// SessionKey is the registry key of a 2025-11-25 session.
func SessionKey(id string) string { return "s:" + id }

// AddSession records a 2025-11-25 session (no subscriptions yet), told on ch. end is
// called, once and on its own goroutine, if the session stops taking
// notifications for the send timeout; the registry has forgotten it by then.
func (r *Registry) AddSession(id string, ch chan<- Message, gated bool, end func()) {
	r.add(&subscriber{key: SessionKey(id), era: Era20251125, sessionID: id, ch: ch, gated: gated, listChanged: true, end: end})
}

// AddListen records a subscriptions/listen stream and returns its key. A held
// stream queues its changes until release: the stream is registered before the
// SDK sends its acknowledgement, which must come first on the stream. Its
// notifications, on ch, carry subID. end is called as for AddSession.
func (r *Registry) AddListen(ch chan<- Message, subID any, uris []string, listChanged, held bool, end func()) string {
	s := &subscriber{key: "l:" + strconv.FormatInt(r.listenSeq.Add(1), 10), era: Era20260728, ch: ch, tag: subscriptionTag(subID), listChanged: listChanged, held: held, end: end}
	s.uris = map[string]struct{}{}
	for _, u := range uris {
		s.uris[u] = struct{}{}
	}
	r.add(s)
	return s.key
}

func (r *Registry) add(s *subscriber) {
	if s.uris == nil {
		s.uris = map[string]struct{}{}
	}
	s.pendingSet = map[string]struct{}{}
	r.m.sessions.WithLabelValues(s.era).Inc()
	r.m.subscriptions.Add(float64(len(s.uris)))
	r.mu.Lock()
	old := r.subs[s.key]
	r.subs[s.key] = s
	r.mu.Unlock()
	if old != nil {
		old.mu.Lock()
		r.forgetLocked(old)
		old.mu.Unlock()
	}
}

// forgetLocked marks s removed and takes it out of the gauges, once; s.mu is held.
func (r *Registry) forgetLocked(s *subscriber) {
	if s.removed {
		return
	}
	s.removed = true
	r.m.sessions.WithLabelValues(s.era).Dec()
	r.m.subscriptions.Sub(float64(len(s.uris)))
}

// Remove forgets a subscriber and its subscriptions.
func (r *Registry) Remove(key string) {
	r.mu.Lock()
	s := r.subs[key]
	delete(r.subs, key)
	r.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		r.forgetLocked(s)
		if s.retry != nil {
			s.retry.Stop()
			s.retry = nil
		}
		s.mu.Unlock()
	}
}

// Release lets a held listen stream send what it queued and what comes next.
func (r *Registry) Release(key string) {
	if s := r.get(key); s != nil {
		s.mu.Lock()
		s.held = false
		r.flushLocked(s)
		s.mu.Unlock()
	}
}

func (r *Registry) get(key string) *subscriber {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.subs[key]
}

// Errors of Admit: the limit a subscription would exceed.
var (
	ErrSubscriptions     = errors.New("too many subscriptions")
	ErrSubscriptionBytes = errors.New("subscribed URIs too long in total")
)

// Subscriptions returns how many URIs the subscriber holds, their bytes
// summed, and whether uri is among them.
func (r *Registry) Subscriptions(key, uri string) (n, bytes int, has bool) {
	if s := r.get(key); s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, has = s.uris[uri]
		return len(s.uris), s.uriBytes, has
	}
	return 0, 0, false
}

// Admit subscribes a session to uri unless that makes it hold more than maxN
// URIs or more than maxBytes of them (ErrSubscriptions, ErrSubscriptionBytes);
// a URI already held is admitted. Checking and adding under one lock keeps
// concurrent subscribes of a session within the limits.
func (r *Registry) Admit(key, uri string, maxN, maxBytes int) error {
	s := r.get(key)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, has := s.uris[uri]; has {
		return nil
	}
	if len(s.uris) >= maxN {
		return fmt.Errorf("%w: at most %d per session", ErrSubscriptions, maxN)
	}
	if s.uriBytes+len(uri) > maxBytes {
		return fmt.Errorf("%w: %d bytes held, %d more, at most %d per session", ErrSubscriptionBytes, s.uriBytes, len(uri), maxBytes)
	}
	r.addURI(s, uri)
	return nil
}

// Subscribe adds uri to a session's subscriptions.
func (r *Registry) Subscribe(key, uri string) {
	if s := r.get(key); s != nil {
		s.mu.Lock()
		r.addURI(s, uri)
		s.mu.Unlock()
	}
}

// Unsubscribe removes uri; unsubscribing from something never subscribed is fine.
func (r *Registry) Unsubscribe(key, uri string) {
	if s := r.get(key); s != nil {
		s.mu.Lock()
		if _, has := s.uris[uri]; has {
			delete(s.uris, uri)
			s.uriBytes -= len(uri)
			if !s.removed {
				r.m.subscriptions.Dec()
			}
		}
		s.mu.Unlock()
	}
}

// addURI adds uri to s's subscriptions once; s.mu is held.
func (r *Registry) addURI(s *subscriber, uri string) {
	if _, has := s.uris[uri]; !has {
		s.uris[uri] = struct{}{}
		s.uriBytes += len(uri)
		if !s.removed {
			r.m.subscriptions.Inc()
		}
	}
}

func (r *Registry) snapshot() []*subscriber {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*subscriber, 0, len(r.subs))
	for _, s := range r.subs {
		out = append(out, s)
	}
	return out
}

// Publish tells every subscriber of any of uris, of either era; it never blocks.
// Each notification is serialised once, whoever is told.
func (r *Registry) Publish(_ context.Context, uris []string) error {
	notes := make([]*Note, len(uris))
	for i, u := range uris {
		notes[i] = newNote(u)
	}
	for _, s := range r.snapshot() {
		s.mu.Lock()
		for _, n := range notes {
			if _, ok := s.uris[n.URI]; ok {
				s.queue(n)
			}
		}
		r.flushLocked(s)
		s.mu.Unlock()
	}
	return nil
}

// ListChanged tells every subscriber that takes them that the resource list
// changed (the SDK's own broadcast is turned off: it bypasses the hand-off
// rules above and can be lost, mcp-go PR #969).
func (r *Registry) ListChanged() {
	for _, s := range r.snapshot() {
		s.mu.Lock()
		if s.listChanged {
			s.queue(listChanged)
			r.flushLocked(s)
		}
		s.mu.Unlock()
	}
}

// Run satisfies publish.Publisher; delivery happens in Publish.
func (r *Registry) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// queue adds n to the pending notifications; repeated changes of a URI
// coalesce (as the protocol allows) while a send has to wait.
func (s *subscriber) queue(n *Note) {
	if _, ok := s.pendingSet[n.URI]; ok {
		return
	}
	s.pendingSet[n.URI] = struct{}{}
	s.pending = append(s.pending, n)
}

// flushLocked hands s's pending notifications to its transport's channel as
// far as three quarters of the channel have room, and retries shortly for the
// rest: a transport may share the channel with its own messages, sent without
// waiting (the SDK's channels did, a listen stream's acknowledgement among
// them). A channel that stays
// full for sendTimeout is a failed send: the subscriber is forgotten and its
// session or stream ended, so its client learns it (404, or a listen request
// that ends) instead of waiting on a stream that no longer delivers. s.mu is held.
func (r *Registry) flushLocked(s *subscriber) {
	if len(s.pending) == 0 || s.removed || s.held {
		return
	}
	if s.gated {
		r.mu.RLock()
		open := r.gets[s.sessionID] > 0 && r.posts[s.sessionID] == 0
		r.mu.RUnlock()
		if !open {
			return
		}
	}
	sent := 0
	for _, n := range s.pending {
		if c := cap(s.ch); c > 0 && len(s.ch) >= c-c/4 {
			break // a quarter stays free for the transport's own sends
		}
		select {
		case s.ch <- Message{Note: n, tag: s.tag}:
			delete(s.pendingSet, n.URI)
			sent++
			continue
		default:
		}
		break
	}
	if sent > 0 {
		r.m.sentTo[s.era].Add(float64(sent))
	}
	if sent == len(s.pending) {
		clear(s.pending)
		s.pending = s.pending[:0] // kept: the next notification needs no allocation
		s.blockedSince = time.Time{}
		return
	}
	s.pending = s.pending[sent:]
	now := time.Now()
	if sent > 0 || s.blockedSince.IsZero() {
		s.blockedSince = now
	}
	if now.Sub(s.blockedSince) >= r.sendTimeout {
		r.m.dropped.WithLabelValues(s.era).Add(float64(len(s.pending)))
		r.m.ended.WithLabelValues(s.era).Inc()
		r.log.Warn("session not taking notifications; ending it",
			"subscriber", s.key, "era", s.era, "subscriptions", len(s.uris), "dropped", len(s.pending), "blocked", now.Sub(s.blockedSince))
		r.forgetLocked(s)
		clear(s.uris)
		s.uriBytes = 0
		s.pending, s.pendingSet, s.blockedSince = nil, map[string]struct{}{}, time.Time{}
		r.mu.Lock()
		if r.subs[s.key] == s {
			delete(r.subs, s.key)
		}
		r.mu.Unlock()
		if s.end != nil {
			go s.end()
		}
		return
	}
	if s.retry == nil {
		s.retry = time.AfterFunc(retryFlush, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.retry = nil
			r.flushLocked(s)
		})
	}
}

// AckWait tells a listen stream's subscriber when the SDK has written the
// stream's acknowledgement (notifications/subscriptions/acknowledged), so that
// no change is sent ahead of it. The transport serving the listen request puts
// one in the request context and calls wrote.
type AckWait struct {
	mu      sync.Mutex
	written bool
	then    func()
}

type ackWaitKey struct{}

func WithAckWait(ctx context.Context, a *AckWait) context.Context {
	return context.WithValue(ctx, ackWaitKey{}, a)
}

func AckWaitFrom(ctx context.Context) *AckWait {
	a, _ := ctx.Value(ackWaitKey{}).(*AckWait)
	return a
}

// OnWritten runs f once the acknowledgement is written, at once if it was.
func (a *AckWait) OnWritten(f func()) {
	a.mu.Lock()
	if !a.written {
		a.then = f
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	f()
}

// Wrote marks the acknowledgement written; later calls do nothing.
func (a *AckWait) Wrote() {
	a.mu.Lock()
	if a.written {
		a.mu.Unlock()
		return
	}
	a.written = true
	f := a.then
	a.then = nil
	a.mu.Unlock()
	if f != nil {
		f()
	}
}

// retryFlush is how soon a flush that found the channel full tries again.
const retryFlush = 5 * time.Millisecond

// StreamOpened records an open GET stream of a 2025-11-25 session.
func (r *Registry) StreamOpened(sessionID string) {
	r.mu.Lock()
	r.gets[sessionID]++
	r.mu.Unlock()
	r.flushSession(sessionID)
}

// SessionWrote tells the registry that the session's writer took a
// notification from its channel, or that a stream of the session wrote to its
// client.
func (r *Registry) SessionWrote(sessionID string) {
	if s := r.get(SessionKey(sessionID)); s != nil {
		s.mu.Lock()
		if s.wrote != nil {
			close(s.wrote)
			s.wrote = nil
		}
		s.mu.Unlock()
	}
}

// Streaming reports whether a GET stream of the session is open.
func (r *Registry) Streaming(sessionID string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.gets[sessionID] > 0
}

// Posting reports whether a POST of the session is in flight.
func (r *Registry) Posting(sessionID string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.posts[sessionID] > 0
}

// StreamClosed records a closed GET stream.
func (r *Registry) StreamClosed(sessionID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gets[sessionID]--; r.gets[sessionID] <= 0 {
		delete(r.gets, sessionID)
	}
}

// PostStarted marks a POST of the session in flight. While one is, nothing
// new is queued on the session's channel, and it waits (at most maxWait)
// until the session's writer has taken everything already queued, woken by
// SessionWrote. (The rule dates from the SDK's channel, whose per-POST
// forwarder could pick a notification up as the POST ended and drop it,
// mcp-go PR #969; the transport's own channel keeps it.)
func (r *Registry) PostStarted(sessionID string, maxWait time.Duration) {
	r.mu.Lock()
	r.posts[sessionID]++
	s := r.subs[SessionKey(sessionID)]
	streaming := r.gets[sessionID] > 0
	r.mu.Unlock()
	if s == nil || !streaming {
		return
	}
	deadline := time.NewTimer(maxWait)
	defer deadline.Stop()
	for {
		s.mu.Lock() // a flush in progress completes first
		if len(s.ch) == 0 || s.removed {
			s.mu.Unlock()
			return
		}
		if s.wrote == nil {
			s.wrote = make(chan struct{})
		}
		wrote := s.wrote
		s.mu.Unlock()
		select {
		case <-wrote:
		case <-deadline.C:
			return
		}
	}
}

// PostEnded marks a POST of the session finished and sends what waited for it.
func (r *Registry) PostEnded(sessionID string) {
	r.mu.Lock()
	r.posts[sessionID]--
	if r.posts[sessionID] <= 0 {
		delete(r.posts, sessionID)
	}
	r.mu.Unlock()
	r.flushSession(sessionID)
}

func (r *Registry) flushSession(sessionID string) {
	if s := r.get(SessionKey(sessionID)); s != nil {
		s.mu.Lock()
		r.flushLocked(s)
		s.mu.Unlock()
	}
}

// Stats reports subscribers per era, the number of subscribed URIs and the
// number of 2025-11-25 sessions with a GET stream open.
func (r *Registry) Stats() (perEra map[string]int, subscriptions, streams int) {
	perEra = map[string]int{Era20251125: 0, Era20260728: 0}
	for _, s := range r.snapshot() {
		perEra[s.era]++
		s.mu.Lock()
		subscriptions += len(s.uris)
		s.mu.Unlock()
	}
	r.mu.RLock()
	streams = len(r.gets)
	r.mu.RUnlock()
	return perEra, subscriptions, streams
}
