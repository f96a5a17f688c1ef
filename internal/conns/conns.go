// Package conns bounds what an HTTP listener holds: a cap on open connections
// (a connection beyond it is closed at once and counted), keep-alive
// connections closed after an idle timeout, and request headers and bodies
// that must arrive within a read timeout. Responses are never cut: there is no
// write timeout, so long-lived streams (SSE, subscriptions/listen) stay open.
// A listener that must never starve the others of file descriptors takes its cap
// through WithinDescriptors.
package conns

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/promreg"
)

// Limits are the bounds of one listener.
type Limits struct {
	MaxConnections int           // open connections at most; more are closed at once
	IdleTimeout    time.Duration // a keep-alive connection idle this long is closed
	ReadTimeout    time.Duration // a request's header, then its body, must arrive within this
}

// RefusedCounter is the counter of connections the cap of the named listener
// ("mcp", "metrics") closed.
func RefusedCounter(listener string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: promreg.Namespace, Subsystem: "http", Name: "connections_refused_total", ConstLabels: prometheus.Labels{"listener": listener},
		Help: "connections closed on accept because the listener had its max_connections open (server.max_connections; the sse feed's own)."})
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

// Listen wraps ln so that at most max connections are open at once; a
// connection accepted beyond it is closed at once and counted in refused.
// max <= 0 means no cap.
func Listen(ln net.Listener, max int, refused prometheus.Counter) net.Listener {
	if max <= 0 {
		return ln
	}
	return &capListener{Listener: ln, slots: make(chan struct{}, max), refused: refused}
}

type capListener struct {
	net.Listener
	slots   chan struct{}
	refused prometheus.Counter
}

// Accept returns the next connection that fits under the cap.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
		default:
			l.refused.Inc()
			_ = c.Close()
		}
	}
}

// slotConn frees its slot when closed.
type slotConn struct {
	net.Conn
	release func()
}

// Close frees the slot first, then closes the connection: a client that sees the server
// close its connection can connect again at once (the descriptor of the old one may
// outlive the new one's accept by a moment).
func (c *slotConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// Server returns an http.Server serving h within l: headers within
// ReadTimeout (http.Server.ReadHeaderTimeout), a request body within
// ReadTimeout of its header, idle connections closed after IdleTimeout. It
// sets no ReadTimeout or WriteTimeout, which would cut long-lived responses.
func Server(h http.Handler, l Limits) *http.Server {
	return &http.Server{
		Handler:           bodyDeadline(h, l.ReadTimeout),
		ReadHeaderTimeout: l.ReadTimeout,
		IdleTimeout:       l.IdleTimeout,
	}
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
