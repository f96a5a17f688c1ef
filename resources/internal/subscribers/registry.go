// Package subscribers is the MCP server's own record of who is subscribed to what:
// 2025-11-25 sessions (resources/subscribe) and 2026-07-28 subscriptions/listen
// streams. The SDK records no subscriptions for its built-in sessions, so the server
// feeds this registry from its session, subscribe and listen hooks. A change is
// serialised once (Note) and handed, as the same bytes, to the Sink of every
// subscriber of its URI; the sinks are the transport's, and the rules of when and how
// a notification reaches the client are the transport's too.
package subscribers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Eras label sessions and subscribers: the protocol revisions.
const (
	Era20251125 = "2025-11-25"
	Era20260728 = "2026-07-28"
)

// Sink is where a subscriber's notifications go: the transport's writer of a session
// or of a listen stream. Notify must not block.
type Sink interface {
	Notify(Message)
}

// subscriber is one party told about changes: a 2025-11-25 session (its
// resources/subscribe calls) or a 2026-07-28 subscriptions/listen stream.
type subscriber struct {
	key         string
	era         string
	sink        Sink
	tag         []byte // listen stream: its subscription id, tagged on every notification
	listChanged bool   // also told notifications/resources/list_changed

	mu       sync.Mutex
	removed  bool
	uris     map[string]struct{}
	uriBytes int // the bytes of the URIs in uris, summed
}

// Registry is the server's own record of who is subscribed to what. The SDK
// records nothing for its built-in sessions, so this is fed by the session,
// Subscribe, unsubscribe and subscriptions/listen hooks.
type Registry struct {
	mu        sync.RWMutex
	subs      map[string]*subscriber
	listenSeq atomic.Int64
	m         *metrics
}

// New returns an empty registry, its gauges on reg (nil: none).
func New(reg prometheus.Registerer) (*Registry, error) {
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Registry{m: m, subs: map[string]*subscriber{}}, nil
}

// SessionKey is the registry key of a 2025-11-25 session.
func SessionKey(id string) string { return "s:" + id }

// AddSession records a 2025-11-25 session (no subscriptions yet), told through sink;
// a session of the same id is replaced.
func (r *Registry) AddSession(id string, sink Sink) {
	r.add(&subscriber{key: SessionKey(id), era: Era20251125, sink: sink, listChanged: true})
}

// AddListen records a subscriptions/listen stream and returns its key. Its
// notifications, through sink, carry subID.
func (r *Registry) AddListen(sink Sink, subID any, uris []string, listChanged bool) string {
	s := &subscriber{key: "l:" + strconv.FormatInt(r.listenSeq.Add(1), 10), era: Era20260728, sink: sink, tag: subscriptionTag(subID), listChanged: listChanged}
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
	r.m.sessions.WithLabelValues(s.era).Inc()
	r.m.subscriptions.Add(float64(len(s.uris)))
	r.mu.Lock()
	old := r.subs[s.key]
	r.subs[s.key] = s
	r.mu.Unlock()
	if old != nil {
		r.forget(old)
	}
}

// forget marks s removed and takes it out of the gauges, once.
func (r *Registry) forget(s *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed {
		return
	}
	s.removed = true
	r.m.sessions.WithLabelValues(s.era).Dec()
	r.m.subscriptions.Sub(float64(len(s.uris)))
}

// Remove forgets a subscriber and its subscriptions; nothing is handed to its sink
// once Remove has returned.
func (r *Registry) Remove(key string) {
	r.mu.Lock()
	s := r.subs[key]
	delete(r.subs, key)
	r.mu.Unlock()
	if s != nil {
		r.forget(s)
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

// Publish tells every subscriber of any of uris, of either era, that they changed,
// their notebook now at version ("" for none); it never blocks. Each notification is
// serialised once, whoever is told.
func (r *Registry) Publish(_ context.Context, uris []string, version string) error {
	notes := make([]*Note, len(uris))
	for i, u := range uris {
		notes[i] = newNote(u, version)
	}
	for _, s := range r.snapshot() {
		s.mu.Lock()
		if !s.removed {
			for _, n := range notes {
				if _, ok := s.uris[n.URI]; ok {
					s.sink.Notify(Message{Note: n, tag: s.tag})
				}
			}
		}
		s.mu.Unlock()
	}
	return nil
}

// Tell tells the subscriber key alone that uri changed, its notebook now at version:
// a resumed subscription learns what it missed. Nothing is told a subscriber removed or
// not subscribed to uri.
func (r *Registry) Tell(key, uri, version string) {
	s := r.get(key)
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.uris[uri]; ok && !s.removed {
		s.sink.Notify(Message{Note: newNote(uri, version), tag: s.tag})
	}
}

// ListChanged tells every subscriber that takes them that the resource list
// changed (the SDK's own broadcast is turned off: it bypasses the transport's
// hand-off rules and can be lost, mcp-go PR #969).
func (r *Registry) ListChanged() {
	for _, s := range r.snapshot() {
		s.mu.Lock()
		if s.listChanged && !s.removed {
			s.sink.Notify(Message{Note: listChanged, tag: s.tag})
		}
		s.mu.Unlock()
	}
}

// Run satisfies publish.Publisher; delivery happens in Publish.
func (r *Registry) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Stats reports subscribers per era and the number of subscribed URIs.
func (r *Registry) Stats() (perEra map[string]int, subscriptions int) {
	perEra = map[string]int{Era20251125: 0, Era20260728: 0}
	for _, s := range r.snapshot() {
		perEra[s.era]++
		s.mu.Lock()
		subscriptions += len(s.uris)
		s.mu.Unlock()
	}
	return perEra, subscriptions
}
