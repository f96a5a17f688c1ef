package resources

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"
)

// Eras label sessions and subscribers.
const (
	era20251125 = "2025-11-25"
	era20260728 = "2026-07-28"
)

// subscriber is one party told about changes: a 2025-11-25 session (its
// resources/subscribe calls) or a 2026-07-28 subscriptions/listen stream.
type subscriber struct {
	key       string
	era       string
	sessionID string                         // 2025-11-25 session id
	ch        chan<- mcp.JSONRPCNotification // the SDK session's notification channel
	subID     any                            // listen stream: its subscription id, tagged on every notification
	gated     bool                           // HTTP 2025-11-25: send only on an open GET stream, while no POST of the session is in flight

	mu           sync.Mutex
	removed      bool
	held         bool        // listen stream whose acknowledgement is not written yet: changes queue, nothing is sent
	listChanged  bool        // also told notifications/resources/list_changed
	blockedSince time.Time   // when the SDK channel was first found full, zero while it takes notifications
	retry        *time.Timer // pending flush while the channel is full
	uris         map[string]struct{}
	pending      []string // URIs whose resources/updated waits for the transport
	pendingSet   map[string]struct{}
}

// registry is the server's own record of who is subscribed to what. The SDK
// records nothing for its built-in sessions, so this is fed by the session,
// subscribe, unsubscribe and subscriptions/listen hooks.
type registry struct {
	log *slog.Logger

	mu    sync.RWMutex
	subs  map[string]*subscriber
	gets  map[string]int // open GET streams per 2025-11-25 session id
	posts map[string]int // POSTs in flight per 2025-11-25 session id

	listenSeq   atomic.Int64
	m           *serverMetrics
	sendTimeout time.Duration // how long a full SDK channel may block a subscriber before it is dropped
}

func newRegistry(log *slog.Logger, m *serverMetrics, sendTimeout time.Duration) *registry {
	return &registry{log: log, m: m, sendTimeout: sendTimeout, subs: map[string]*subscriber{}, gets: map[string]int{}, posts: map[string]int{}}
}

func sessionKey(id string) string { return "s:" + id }

// addSession records a 2025-11-25 session (no subscriptions yet).
func (r *registry) addSession(id string, ch chan<- mcp.JSONRPCNotification, gated bool) {
	r.add(&subscriber{key: sessionKey(id), era: era20251125, sessionID: id, ch: ch, gated: gated, listChanged: true})
}

// addListen records a subscriptions/listen stream and returns its key. A held
// stream queues its changes until release: the stream is registered before the
// SDK sends its acknowledgement, which must come first on the stream.
func (r *registry) addListen(ch chan<- mcp.JSONRPCNotification, subID any, uris []string, listChanged, held bool) string {
	s := &subscriber{key: "l:" + strconv.FormatInt(r.listenSeq.Add(1), 10), era: era20260728, ch: ch, subID: subID, listChanged: listChanged, held: held}
	s.uris = map[string]struct{}{}
	for _, u := range uris {
		s.uris[u] = struct{}{}
	}
	r.add(s)
	return s.key
}

func (r *registry) add(s *subscriber) {
	if s.uris == nil {
		s.uris = map[string]struct{}{}
	}
	s.pendingSet = map[string]struct{}{}
	r.mu.Lock()
	r.subs[s.key] = s
	r.mu.Unlock()
}

// remove forgets a subscriber and its subscriptions.
func (r *registry) remove(key string) {
	r.mu.Lock()
	s := r.subs[key]
	delete(r.subs, key)
	r.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		s.removed = true
		if s.retry != nil {
			s.retry.Stop()
			s.retry = nil
		}
		s.mu.Unlock()
	}
}

// release lets a held listen stream send what it queued and what comes next.
func (r *registry) release(key string) {
	if s := r.get(key); s != nil {
		s.mu.Lock()
		s.held = false
		r.flushLocked(s)
		s.mu.Unlock()
	}
}

func (r *registry) get(key string) *subscriber {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.subs[key]
}

// subscribe adds uri to a session's subscriptions.
func (r *registry) subscribe(key, uri string) {
	if s := r.get(key); s != nil {
		s.mu.Lock()
		s.uris[uri] = struct{}{}
		s.mu.Unlock()
	}
}

// unsubscribe removes uri; unsubscribing from something never subscribed is fine.
func (r *registry) unsubscribe(key, uri string) {
	if s := r.get(key); s != nil {
		s.mu.Lock()
		delete(s.uris, uri)
		s.mu.Unlock()
	}
}

func (r *registry) snapshot() []*subscriber {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*subscriber, 0, len(r.subs))
	for _, s := range r.subs {
		out = append(out, s)
	}
	return out
}

// Publish tells every subscriber of any of uris, of either era; it never blocks.
func (r *registry) Publish(_ context.Context, uris []string) error {
	for _, s := range r.snapshot() {
		s.mu.Lock()
		for _, u := range uris {
			if _, ok := s.uris[u]; ok {
				s.queue(u)
			}
		}
		r.flushLocked(s)
		s.mu.Unlock()
	}
	return nil
}

// listChanged tells every subscriber that takes them that the resource list
// changed (the SDK's own broadcast is turned off: it bypasses the hand-off
// rules above and can be lost, mcp-go PR #969).
func (r *registry) listChanged() {
	for _, s := range r.snapshot() {
		s.mu.Lock()
		if s.listChanged {
			s.queue("")
			r.flushLocked(s)
		}
		s.mu.Unlock()
	}
}

// Run satisfies publish.Publisher; delivery happens in Publish.
func (r *registry) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// queue adds uri to the pending set; repeated changes coalesce (as the
// protocol allows) while a send has to wait.
func (s *subscriber) queue(uri string) {
	if _, ok := s.pendingSet[uri]; ok {
		return
	}
	s.pendingSet[uri] = struct{}{}
	s.pending = append(s.pending, uri)
}

// flushLocked hands s's pending notifications to its SDK channel as far as
// three quarters of the channel have room, and retries shortly for the rest:
// the SDK sends its own messages (a listen stream's acknowledgement among
// them) without waiting and fails them on a full channel. A channel that stays
// full for sendTimeout is a failed send: the subscriber's subscriptions are
// dropped. s.mu is held.
func (r *registry) flushLocked(s *subscriber) {
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
	for _, uri := range s.pending {
		method, params := mcp.MethodNotificationResourceUpdated, mcp.NotificationParams{AdditionalFields: map[string]any{"uri": uri}}
		if uri == "" {
			method, params = mcp.MethodNotificationResourcesListChanged, mcp.NotificationParams{}
		}
		if s.subID != nil {
			params.Meta = map[string]any{mcp.MetaKeySubscriptionID: s.subID}
		}
		msg := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: method, Params: params}}
		if c := cap(s.ch); c > 0 && len(s.ch) >= c-c/4 {
			break // a quarter stays free for the SDK's own sends, which fail on a full channel
		}
		select {
		case s.ch <- msg:
			r.m.sent.WithLabelValues(s.era).Inc()
			delete(s.pendingSet, uri)
			sent++
			continue
		default:
		}
		break
	}
	s.pending = s.pending[sent:]
	if len(s.pending) == 0 {
		s.pending = nil
		s.blockedSince = time.Time{}
		return
	}
	now := time.Now()
	if sent > 0 || s.blockedSince.IsZero() {
		s.blockedSince = now
	}
	if now.Sub(s.blockedSince) >= r.sendTimeout {
		r.m.dropped.WithLabelValues(s.era).Add(float64(len(s.pending)))
		r.log.Warn("session not taking notifications; dropping its subscriptions",
			"subscriber", s.key, "era", s.era, "subscriptions", len(s.uris), "dropped", len(s.pending), "blocked", now.Sub(s.blockedSince))
		clear(s.uris)
		s.pending, s.pendingSet, s.blockedSince = nil, map[string]struct{}{}, time.Time{}
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

// ackWait tells a listen stream's subscriber when the SDK has written the
// stream's acknowledgement (notifications/subscriptions/acknowledged), so that
// no change is sent ahead of it. The transport serving the listen request puts
// one in the request context and calls wrote.
type ackWait struct {
	mu      sync.Mutex
	written bool
	then    func()
}

type ackWaitKey struct{}

func withAckWait(ctx context.Context, a *ackWait) context.Context {
	return context.WithValue(ctx, ackWaitKey{}, a)
}

func ackWaitFrom(ctx context.Context) *ackWait {
	a, _ := ctx.Value(ackWaitKey{}).(*ackWait)
	return a
}

// onWritten runs f once the acknowledgement is written, at once if it was.
func (a *ackWait) onWritten(f func()) {
	a.mu.Lock()
	if !a.written {
		a.then = f
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	f()
}

// wrote marks the acknowledgement written; later calls do nothing.
func (a *ackWait) wrote() {
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

// retryFlush is how soon a flush that found the SDK channel full tries again.
const retryFlush = 5 * time.Millisecond

// streamOpened and streamClosed track a 2025-11-25 session's GET streams; they
// return the number now open.
func (r *registry) streamOpened(sessionID string) {
	r.mu.Lock()
	r.gets[sessionID]++
	r.mu.Unlock()
	r.flushSession(sessionID)
}

// streaming reports whether a GET stream of the session is open.
func (r *registry) streaming(sessionID string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.gets[sessionID] > 0
}

// posting reports whether a POST of the session is in flight.
func (r *registry) posting(sessionID string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.posts[sessionID] > 0
}

func (r *registry) streamClosed(sessionID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gets[sessionID]--
	n := r.gets[sessionID]
	if n <= 0 {
		delete(r.gets, sessionID)
	}
	return n
}

// postStarted marks a POST of the session in flight. While one is, nothing
// new is queued on the session's SDK channel, and it waits (bounded) until the
// GET stream has taken everything already queued, so the SDK's per-POST
// forwarder cannot pick one up as the POST ends and drop it (mcp-go PR #969).
func (r *registry) postStarted(sessionID string, maxWait time.Duration) {
	r.mu.Lock()
	r.posts[sessionID]++
	s := r.subs[sessionKey(sessionID)]
	streaming := r.gets[sessionID] > 0
	r.mu.Unlock()
	if s == nil || !streaming {
		return
	}
	s.mu.Lock() // a flush in progress completes first
	s.mu.Unlock()
	deadline := time.Now().Add(maxWait)
	for len(s.ch) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

func (r *registry) postEnded(sessionID string) {
	r.mu.Lock()
	r.posts[sessionID]--
	if r.posts[sessionID] <= 0 {
		delete(r.posts, sessionID)
	}
	r.mu.Unlock()
	r.flushSession(sessionID)
}

func (r *registry) flushSession(sessionID string) {
	if s := r.get(sessionKey(sessionID)); s != nil {
		s.mu.Lock()
		r.flushLocked(s)
		s.mu.Unlock()
	}
}

// stats reports subscribers per era and the number of subscribed URIs.
func (r *registry) stats() (perEra map[string]int, subscriptions int) {
	perEra = map[string]int{era20251125: 0, era20260728: 0}
	for _, s := range r.snapshot() {
		perEra[s.era]++
		s.mu.Lock()
		subscriptions += len(s.uris)
		s.mu.Unlock()
	}
	return perEra, subscriptions
}

// serverMetrics are the server's own collectors.
type serverMetrics struct {
	sent, dropped   *prometheus.CounterVec
	publisherErrors prometheus.Counter
}

func newServerMetrics() *serverMetrics {
	return &serverMetrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "notifications_sent_total",
			Help: "notifications handed to client sessions, by protocol era.",
		}, []string{"era"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "notifications_dropped_total",
			Help: "notifications dropped because a session could not take them (its subscriptions are dropped too).",
		}, []string{"era"}),
		publisherErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "publisher_errors_total",
			Help: "changes the configured publisher did not accept.",
		}),
	}
}

// collectors returns the metrics plus gauges computed from the registry.
func (m *serverMetrics) collectors(r *registry) []prometheus.Collector {
	sessions := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "jupyter_mcp_sidecar", Subsystem: "mcp", Name: "sessions",
		Help: "2025-11-25 sessions and 2026-07-28 subscription streams open.",
	}, []string{"era"})
	return []prometheus.Collector{m.sent, m.dropped, m.publisherErrors, gaugeCollector{r: r, sessions: sessions}}
}

// gaugeCollector computes the session and subscription gauges at scrape time.
type gaugeCollector struct {
	r        *registry
	sessions *prometheus.GaugeVec
}

var subscriptionsDesc = prometheus.NewDesc("jupyter_mcp_sidecar_mcp_subscriptions", "resource URIs subscribed, over all sessions.", nil, nil)

func (g gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	g.sessions.Describe(ch)
	ch <- subscriptionsDesc
}

func (g gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	perEra, subs := g.r.stats()
	for era, n := range perEra {
		g.sessions.WithLabelValues(era).Set(float64(n))
	}
	g.sessions.Collect(ch)
	ch <- prometheus.MustNewConstMetric(subscriptionsDesc, prometheus.GaugeValue, float64(subs))
}
