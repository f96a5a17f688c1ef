// Package conns bounds what an HTTP listener holds, and shares it out so that no
// principal, and not the anonymous, can take what the others need. Connections are
// bounded, and requests are shared: a connection is not a client (the Hub's proxy
// carries every user's requests on the connections it pools), so a principal's share
// is of requests in flight, streams included, never of connections.
//
// Every connection is anonymous until a request on it is admitted for a principal
// (Admit, after the request's token was checked), and is then held, by no one in
// particular. The anonymous hold at most Limits.Anonymous connections between them,
// each for at most Limits.AnonymousTimeout without a request: when they have none
// left, the oldest idle anonymous connection is closed for the new one, so a client
// holding idle connections cannot keep one that sends its request at once from being
// served. Held connections are at most Limits.MaxConnections: a request admitted on
// an anonymous connection when they are all held closes the oldest idle held one,
// whoever's requests it carried. A proxy's connections (Limits.Proxies) are held from
// the start. A principal has at most Limits.PerPrincipal requests
// in flight; one more gets 429 (its share) with Retry-After and its connection
// closed, and a request finding every held connection busy gets 503 (all taken). A
// request not admitted for a principal, on a connection of a class where a new one
// found no room within the last pressedFor, is answered with its connection closed, so that a
// flood of such requests through a proxy's pooled connections turns the connections
// over instead of keeping them all busy.
// Keep-alive connections are closed after an idle timeout, and request headers and
// bodies must arrive within a read timeout. The responses to admitted requests are never
// cut: they have no write timeout, so long-lived streams (SSE, subscriptions/listen)
// stay open; a response to a request admitted for no one must be written within the
// read timeout, so a client that never reads its probes' answers holds nothing. A listener
// that must never starve the others of file descriptors takes its bounds through
// WithinDescriptors.
package conns

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
)

// Limits are the bounds of one listener. Zero fields take their defaults
// (Limits.Defaults).
type Limits struct {
	MaxConnections   int           // connections held (that carried an admitted request) at most; 0: no bound
	PerPrincipal     int           // requests in flight, streams included, one principal has at most; 0: MaxConnections
	Anonymous        int           // connections not yet admitted for a principal, at most; 0: AnonymousShare(MaxConnections)
	AnonymousTimeout time.Duration // an anonymous connection without a request this long is closed; 0: min(ReadTimeout, IdleTimeout, DefaultAnonymousTimeout)
	IdleTimeout      time.Duration // a principal's keep-alive connection idle this long is closed
	ReadTimeout      time.Duration // a request's header, then its body, must arrive within this
	// Proxies are the peers that carry other clients' requests on connections they pool
	// (the Hub's configurable-http-proxy): their connections are held from the start,
	// never anonymous, so that what refuses a client's request is an HTTP answer the
	// proxy hands on, never a closed connection it turns into a 503 for whichever
	// client's request it sent next.
	Proxies []netip.Prefix
}

// Defaults of Limits, and of the shares of the listeners that take them.
const (
	// DefaultAnonymousTimeout bounds how long an anonymous connection is held without a
	// request: a client sends its request at once.
	DefaultAnonymousTimeout = 5 * time.Second
	// ShareDivisor: a principal's share of a whole (UserShare) and the anonymous one
	// (AnonymousShare) are the whole divided by it.
	ShareDivisor = 8
	// RetryAfter is the Retry-After of a request refused for its share.
	RetryAfter = 5 * time.Second
)

// UserShare is the default share of one principal among many of whole connections
// (or sessions): an eighth, at least 1.
func UserShare(whole int) int { return max(1, whole/ShareDivisor) }

// AnonymousShare is the default number of anonymous connections of a listener whose
// principals hold whole connections: an eighth, at least 16, so that probes and
// clients on their way to authenticate get in.
func AnonymousShare(whole int) int { return max(16, whole/ShareDivisor) }

// Defaults returns l with its zero shares set.
func (l Limits) Defaults() Limits {
	if l.MaxConnections <= 0 {
		l.MaxConnections = math.MaxInt
	}
	if l.PerPrincipal <= 0 || l.PerPrincipal > l.MaxConnections {
		l.PerPrincipal = l.MaxConnections
	}
	if l.Anonymous <= 0 {
		l.Anonymous = AnonymousShare(l.MaxConnections)
	}
	if l.AnonymousTimeout <= 0 {
		l.AnonymousTimeout = DefaultAnonymousTimeout
		for _, d := range []time.Duration{l.ReadTimeout, l.IdleTimeout} {
			if d > 0 {
				l.AnonymousTimeout = min(l.AnonymousTimeout, d)
			}
		}
	}
	return l
}

// The reasons of connections_refused_total.
const (
	ReasonAnonymous = "anonymous" // an anonymous connection closed: the oldest idle one for a new one, or a new one when every one is busy
	ReasonShare     = "share"     // a request refused 429: its principal has its share in flight
	ReasonFull      = "full"      // a request refused 503: every held connection is busy (or a proxy's new connection closed: all busy)
	ReasonIdle      = "idle"      // an idle held connection closed for a newcomer
)

// RefusedCounter is the counter, by reason, of the connections and requests the
// shares of the named listener ("mcp", "hub", "metrics", "sse") refused.
func RefusedCounter(listener string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "http", Name: "connections_refused_total", ConstLabels: prometheus.Labels{"listener": listener},
		Help: "connections and requests refused by the listener's shares, by reason: anonymous (an anonymous connection closed, the oldest idle one for a new one, or a new one when none was idle), share (429: the principal has its share of requests in flight), full (503: every held connection is busy), idle (an idle held connection closed for a newcomer)."},
		[]string{"reason"})
	for _, r := range []string{ReasonAnonymous, ReasonShare, ReasonFull, ReasonIdle} {
		c.WithLabelValues(r)
	}
	return c
}

// DescriptorReserve is how many of the process's file descriptors a cap from
// WithinDescriptors leaves to everything else: the store, the other listeners,
// /healthz and /readyz.
const DescriptorReserve = 256

// WithinDescriptors is want lowered, if need be, to a quarter of the file
// descriptors the process may open (RLIMIT_NOFILE) beyond DescriptorReserve,
// and at least 1; want where the limit cannot be read.
func WithinDescriptors(want int) int {
	limit, ok := openFilesLimit()
	if !ok {
		return want
	}
	return descriptorShare(want, limit)
}

// descriptorShare is WithinDescriptors for a process limited to limit descriptors.
func descriptorShare(want int, limit uint64) int {
	share := 1
	if limit > DescriptorReserve+4 {
		share = int(min((limit-DescriptorReserve)/4, 1<<30))
	}
	return max(1, min(want, share))
}

// Listener is a listener whose connections are shared out within Limits; serve it
// with its Server.
type Listener struct {
	net.Listener
	l       Limits
	refused *prometheus.CounterVec

	mu       sync.Mutex
	anon     map[*conn]struct{} // anonymous connections, busy or idle
	held     map[*conn]struct{} // connections that carried an admitted request
	inFlight map[string]int     // each principal's admitted requests being served
	pressed  [2]time.Time       // when a new connection last found no room, by class (anonymous, held)
	poke     chan struct{}      // a connection closed or ended a request: add may find room
}

// Listen shares the connections of ln out within l (after l.Defaults); refusals are
// counted in refused by reason.
func Listen(ln net.Listener, l Limits, refused *prometheus.CounterVec) *Listener {
	return &Listener{Listener: ln, l: l.Defaults(), refused: refused,
		anon: map[*conn]struct{}{}, held: map[*conn]struct{}{}, inFlight: map[string]int{}, poke: make(chan struct{}, 1)}
}

// conn is one accepted connection and its class.
type conn struct {
	net.Conn
	ln        *Listener
	authed    bool // held: a request on it was admitted, or it is a proxy's
	busy      bool // a request is being served
	admitted  bool // the request being served was admitted, for principal
	carried   bool // a request on it was admitted
	principal string
	response  *http.ResponseController // the request being served's, to lift its write deadline once admitted
	used      bool                     // a request was served on it
	waiting   atomic.Int64             // when the Read in progress began (unix nanoseconds); 0: none
	inBody    atomic.Bool              // the Read in progress is the request body's
	since     time.Time                // when it last became idle (or was accepted)
	expiry    *time.Timer              // closes an anonymous connection left without a request; nil otherwise
	release   func()
}

// Accept returns the next connection, anonymous (held if it is a proxy's): if its
// class has every connection of its own, the oldest idle one is closed for it; if none
// is idle within admitWait, it is closed itself.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		sc, refusal := l.add(c)
		if sc != nil {
			return sc, nil
		}
		l.refused.WithLabelValues(refusal).Inc()
		_ = c.Close()
	}
}

// Bounds of the anonymous' turnover.
const (
	// idleAfter: a connection is idle once the server has waited this long for its
	// client's bytes. A client that sent its request is read at once, so its
	// connection is never idle before it is served, on a loaded machine too.
	idleAfter = 10 * time.Millisecond
	// slowAfter: a connection is idle too once this long has passed since it was
	// accepted (or its last response) without a request being served: a client
	// trickling its header byte by byte holds nothing.
	slowAfter = 100 * time.Millisecond
	// admitWait bounds how long a new connection waits for an anonymous one to turn
	// idle (Accept waits meanwhile: the kernel queues the next ones).
	admitWait = 200 * time.Millisecond
	// pressAfter: a new connection that waited this long for room presses its class
	// (the anonymous are all busy, not just turning idle); for pressedFor after, the
	// class's requests not admitted for a principal close their connections.
	pressAfter = admitWait / 2
	pressedFor = time.Second
)

// The classes of connections, indexing Listener.pressed.
const (
	anonymous = iota
	held
)

// add classifies c, anonymous or a proxy's, making room in its class if need be; nil
// and the refusal's reason if there is none within admitWait.
func (l *Listener) add(c net.Conn) (*conn, string) {
	class, refusal := anonymous, ReasonAnonymous
	if l.fromProxy(c.RemoteAddr()) {
		class, refusal = held, ReasonFull
	}
	start := time.Now()
	for {
		l.mu.Lock()
		if l.roomLocked(class, "", time.Since(start)) {
			sc := l.newConnLocked(c, class)
			l.mu.Unlock()
			return sc, ""
		}
		l.mu.Unlock()
		if !l.wait(start) {
			return nil, refusal
		}
	}
}

// wait waits for a connection to close or end a request, or for idleAfter; false once
// admitWait has passed since start.
func (l *Listener) wait(start time.Time) bool {
	if time.Since(start) >= admitWait {
		return false
	}
	select {
	case <-l.poke:
	case <-time.After(idleAfter):
	}
	return true
}

// roomLocked reports whether class has room for a newcomer (admitted for principal;
// "" at accept) that has waited waited, closing an idle connection of it if need be
// (victim's choice). Before it closes a held one that sent a request (the proxy pools
// them: it may be sending its next request on it), the class is pressed and given
// pressAfter to free one by itself: its requests admitted for no one close theirs,
// which no client can be caught sending on. Under l.mu.
func (l *Listener) roomLocked(class int, principal string, waited time.Duration) bool {
	set, bound, reason := l.anon, l.l.Anonymous, ReasonAnonymous
	if class == held {
		set, bound, reason = l.held, l.l.MaxConnections, ReasonIdle
	}
	if len(set) < bound {
		return true
	}
	if waited >= pressAfter {
		l.pressed[class] = time.Now()
	}
	v, rank := victim(set, principal, class == anonymous)
	if v == nil {
		return false
	}
	if class == held && rank > rankSilent && waited < pressAfter {
		l.pressed[held] = time.Now()
		return false
	}
	l.refused.WithLabelValues(reason).Inc()
	l.dropLocked(v)
	go func() { _ = v.Conn.Close() }()
	return true
}

// newConnLocked classifies c in class (under l.mu).
func (l *Listener) newConnLocked(c net.Conn, class int) *conn {
	sc := &conn{Conn: c, ln: l, since: time.Now(), authed: class == held}
	sc.release = sync.OnceFunc(func() {
		l.mu.Lock()
		l.dropLocked(sc)
		l.mu.Unlock()
		l.signal()
	})
	if class == held {
		l.held[sc] = struct{}{}
	} else {
		l.anon[sc] = struct{}{}
	}
	sc.arm()
	return sc
}

// fromProxy reports whether addr is one of Limits.Proxies.
func (l *Listener) fromProxy(addr net.Addr) bool {
	a, ok := addr.(*net.TCPAddr)
	if !ok || len(l.l.Proxies) == 0 {
		return false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok {
		return false
	}
	ip = ip.Unmap()
	for _, p := range l.l.Proxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// The ranks of idle connections, closed lowest first (victim).
const (
	rankSilent    = iota // never sent a request
	rankAnonymous        // carried only requests admitted for no one (probes, refused tokens)
	rankOwn              // its last admitted request was the newcomer's principal's
	rankOther            // another principal's: the one with the most idle ones first
)

// victim is the idle connection of set to close for a newcomer admitted for principal
// ("" at accept), and its rank: the lowest ranked, then, among others' connections, one
// of the principal with the most idle ones, then the one idle longest; nil if none is
// idle, or while a connection that never sent a request is not idle yet and the victim
// would be one that did (it goes first once idle). A connection is idle when the
// server has waited for its client's next request's bytes for idleAfter at least (one
// whose bytes are being read or parsed is not), or slowAfter has passed since it was
// accepted, or served its last request, without a request being served, and it is not
// serving a request, but for one whose request, admitted for no one, waits for its body
// (a slow body holds nothing). Among the anonymous (anon), one that never sent a byte is
// idle once the server has waited idleAfter for its first: a flood of silent connections
// turned over at most 16 every slowAfter, and a token holder's stream waited behind a
// thousand of them for 6.5 s (red team of issue 39, pass 11, M1); a proxy's, which may
// take longer to send on a connection it just opened, keeps slowAfter.
func victim(set map[*conn]struct{}, principal string, anon bool) (*conn, int) {
	now := time.Now().UnixNano()
	rank := func(c *conn) int {
		switch {
		case !c.used:
			return rankSilent
		case !c.carried:
			return rankAnonymous
		case principal != "" && c.principal == principal:
			return rankOwn
		}
		return rankOther
	}
	var idle []*conn
	silent := false // a connection that never sent a request is not idle yet
	perPrincipal := map[string]int{}
	for c := range set {
		serving := c.busy && !(!c.admitted && c.inBody.Load())
		w := c.waiting.Load()
		// One that never sent a request has slowAfter to send it: a proxy's request may
		// take more than idleAfter to reach a connection it just opened.
		waited := (c.used || anon) && w != 0 && now-w >= int64(idleAfter) || now-c.since.UnixNano() >= int64(slowAfter)
		if serving || !waited {
			silent = silent || !c.used
			continue
		}
		idle = append(idle, c)
		if c.carried {
			perPrincipal[c.principal]++
		}
	}
	var v *conn
	for _, c := range idle {
		rc := rank(c)
		if v == nil {
			v = c
			continue
		}
		switch rv := rank(v); {
		case rc != rv:
			if rc < rv {
				v = c
			}
		case rc == rankOther && perPrincipal[c.principal] != perPrincipal[v.principal]:
			if perPrincipal[c.principal] > perPrincipal[v.principal] {
				v = c
			}
		case c.since.Before(v.since):
			v = c
		}
	}
	if v == nil || rank(v) != rankSilent && silent {
		return nil, 0
	}
	return v, rank(v)
}

// dropLocked forgets c (under l.mu); a second call does nothing.
func (l *Listener) dropLocked(c *conn) {
	if c.expiry != nil {
		c.expiry.Stop()
		c.expiry = nil
	}
	delete(l.anon, c)
	delete(l.held, c)
}

// arm starts, for an anonymous idle connection, the timer that closes it (under l.mu).
func (c *conn) arm() {
	if c.authed {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(c.ln.l.AnonymousTimeout, func() {
		c.ln.mu.Lock()
		expired := c.expiry == t // not stopped or re-armed since
		c.ln.mu.Unlock()
		if expired {
			_ = c.Close()
		}
	})
	c.expiry = t
}

// begin marks c serving a request, and reports whether a new connection of c's class
// (anonymous or held) found no room within pressedFor: then, unless the request is
// admitted, its connection is closed after it.
func (c *conn) begin() (pressed bool) {
	l := c.ln
	l.mu.Lock()
	defer l.mu.Unlock()
	c.busy, c.used = true, true
	if c.expiry != nil {
		c.expiry.Stop()
		c.expiry = nil
	}
	class := anonymous
	if c.authed {
		class = held
	}
	return time.Since(l.pressed[class]) < pressedFor
}

// end marks c idle, waiting for its next request, and its request's principal one
// request fewer in flight.
func (c *conn) end() {
	c.ln.mu.Lock()
	c.busy = false
	c.since = time.Now()
	if c.admitted {
		c.admitted = false
		if c.ln.inFlight[c.principal]--; c.ln.inFlight[c.principal] <= 0 {
			delete(c.ln.inFlight, c.principal)
		}
	}
	if _, open := c.ln.anon[c]; open {
		c.arm()
	}
	c.ln.mu.Unlock()
	c.ln.signal()
}

// signal tells an add waiting for room that there may be some.
func (l *Listener) signal() {
	select {
	case l.poke <- struct{}{}:
	default:
	}
}

// Read reads from the client; while it waits, the connection may be idle (victim).
// The server reads a connection from one goroutine at a time.
func (c *conn) Read(p []byte) (int, error) {
	c.waiting.Store(time.Now().UnixNano())
	defer c.waiting.Store(0)
	return c.Conn.Read(p)
}

// Close frees the connection's place first, then closes it: a client that sees the
// server close its connection can connect again at once (the descriptor of the old
// one may outlive the new one's accept by a moment).
func (c *conn) Close() error {
	c.release()
	return c.Conn.Close()
}

// admit counts c's request in flight for principal if its share allows, moving c
// among the held connections if it is anonymous, which may close an idle one when they
// are all held (roomLocked), waiting up to admitWait for one; else the refusal's reason.
func (l *Listener) admit(c *conn, principal string) (reason string) {
	start := time.Now()
	for {
		l.mu.Lock()
		switch {
		case c.admitted:
			l.mu.Unlock()
			return "" // admitted already (by another handler on the way)
		case l.inFlight[principal] >= l.l.PerPrincipal:
			l.mu.Unlock()
			if l.l.PerPrincipal == l.l.MaxConnections { // one principal's share is the whole
				return ReasonFull
			}
			return ReasonShare
		case c.authed || l.roomLocked(held, principal, time.Since(start)):
			if !c.authed {
				l.dropLocked(c)
				c.authed = true
				l.held[c] = struct{}{}
			}
			c.admitted, c.carried, c.principal = true, true, principal
			l.inFlight[principal]++
			l.mu.Unlock()
			return ""
		}
		l.mu.Unlock()
		if !l.wait(start) {
			return ReasonFull
		}
	}
}

type connKey struct{}

// Admit admits r for principal (its token was checked), one more of its requests in
// flight until r is served: true if it may be served; else the refusal is written (429
// for a principal with its share in flight, 503 when every held connection is busy,
// with Retry-After and the connection closed after it) and counted. A request not
// served by a Listener's Server is admitted.
func Admit(w http.ResponseWriter, r *http.Request, principal string) bool {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok {
		return true
	}
	reason := c.ln.admit(c, principal)
	if reason == "" {
		if c.response != nil {
			_ = c.response.SetWriteDeadline(time.Time{}) // a stream of its may last
		}
		w.Header().Del("Connection") // kept open (track closes a full class's unadmitted requests')
		c.ln.signal()                // it may have left the anonymous: an Accept waiting for room may go on
		return true
	}
	c.ln.refused.WithLabelValues(reason).Inc()
	code, msg := http.StatusTooManyRequests, "too many requests of yours are in flight: end some, or retry later"
	if reason == ReasonFull {
		code, msg = http.StatusServiceUnavailable, "the server holds all the connections it may: retry later"
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
	return false
}

// Server returns an http.Server serving h on l: headers within ReadTimeout
// (http.Server.ReadHeaderTimeout), a request body within ReadTimeout of its header,
// idle connections closed after IdleTimeout (the anonymous' after AnonymousTimeout).
// It sets no ReadTimeout or WriteTimeout, which would cut long-lived responses (track
// gives the responses to requests admitted for no one a write deadline).
func (l *Listener) Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           track(bodyDeadline(h, l.l.ReadTimeout)),
		ReadHeaderTimeout: l.l.ReadTimeout,
		IdleTimeout:       l.l.IdleTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if sc, ok := c.(*conn); ok {
				return context.WithValue(ctx, connKey{}, sc)
			}
			return ctx
		},
	}
}

// track marks a request's connection busy while it is served; if its class is pressed
// the connection is closed after it unless Admit admits the request. A response must be
// written within ReadTimeout unless Admit admits its request: one admitted for no one
// (a probe, a refused token) is never a stream, so a client that does not read it
// holds its connection no longer than that.
func track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*conn); ok {
			if c.begin() {
				w.Header().Set("Connection", "close")
			}
			if d := c.ln.l.ReadTimeout; d > 0 {
				c.response = http.NewResponseController(w)
				_ = c.response.SetWriteDeadline(time.Now().Add(d))
			}
			defer c.end()
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = &body{ReadCloser: r.Body, c: c}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// body is a request's body, marking its connection while a read of it waits.
type body struct {
	io.ReadCloser
	c *conn
}

func (b *body) Read(p []byte) (int, error) {
	b.c.inBody.Store(true)
	defer b.c.inBody.Store(false)
	return b.ReadCloser.Read(p)
}

// bodyDeadline gives a request body d to arrive. net/http lifts the deadline
// itself once the body is read to its end (its background read of the
// connection starts then), so a response streaming after it (a
// subscriptions/listen POST) is not cut; a body left unread keeps it, so the
// server's discard of its rest cannot hang either.
func bodyDeadline(next http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}
