package hubauth

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
)

// limiter holds a token bucket per source address: one source's flood spends its own
// budget, never another's. At most max sources are tracked; beyond, the idle (full)
// buckets are dropped first, then any, so a flood from many addresses weakens the limit
// of some rather than refusing everyone.
type limiter struct {
	mu          sync.Mutex
	rate, burst float64
	max         int
	m           map[string]*bucket
}

func newLimiter(rate float64, burst, max int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), max: max, m: map[string]*bucket{}}
}

// allow takes a token of source's bucket at now.
func (l *limiter) allow(source string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.m[source]
	if !ok {
		if len(l.m) >= l.max {
			l.prune(now)
		}
		b = &bucket{tokens: l.burst}
		l.m[source] = b
	}
	return b.take(now, l.rate, l.burst)
}

// left reports whether source's bucket holds a token at now, taking none.
func (l *limiter) left(source string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.m[source]
	if !ok {
		return true
	}
	b.refill(now, l.rate, l.burst)
	return b.tokens >= 1
}

// prune drops the buckets that have refilled, then, if none had, one at random; l.mu
// is held.
func (l *limiter) prune(now time.Time) {
	for k, b := range l.m {
		if b.full(now, l.rate, l.burst) {
			delete(l.m, k)
		}
	}
	for k := range l.m {
		if len(l.m) < l.max {
			return
		}
		delete(l.m, k)
	}
}

// bucket is a token bucket of a limiter's rate a second, up to its burst.
type bucket struct {
	tokens float64
	last   time.Time
}

func (b *bucket) refill(now time.Time, rate, burst float64) {
	if !b.last.IsZero() {
		b.tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	}
	b.last = now
}

func (b *bucket) take(now time.Time, rate, burst float64) bool {
	b.refill(now, rate, burst)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (b *bucket) full(now time.Time, rate, burst float64) bool {
	return b.last.IsZero() || b.tokens+now.Sub(b.last).Seconds()*rate >= burst
}

// source is the address r comes from, as the rate limits count it (source); the first
// X-Forwarded-For of a peer not trusted is logged, once: behind a proxy not listed in
// TrustedProxies every request counts as the proxy's.
func (s *Server) source(r *http.Request) string {
	src, ignored := source(r, s.cfg.ProxyHops, s.cfg.TrustedProxies)
	if ignored {
		s.xffOnce.Do(func() {
			s.log.Info("X-Forwarded-For of a peer not in hub.oauth.trusted_proxies ignored: its requests count as the peer's", "peer", src)
		})
	}
	return src
}

// source is the address a request comes from: with hops proxies in front (each
// appending its peer to X-Forwarded-For, as the Hub's configurable-http-proxy does)
// and the connection's peer one of trusted, the entry the outermost of them added;
// else, or without the header, the connection's peer (ignored reports an
// X-Forwarded-For not believed). An IPv6 address counts as its /64 (one host's usual
// allocation).
func source(r *http.Request, hops int, trusted []netip.Prefix) (src string, ignored bool) {
	addr, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		addr = r.RemoteAddr
	}
	if fwd := r.Header.Values("X-Forwarded-For"); hops > 0 && len(fwd) > 0 {
		if !trustedPeer(addr, trusted) {
			return sourceOf(addr), true
		}
		list := strings.Split(strings.Join(fwd, ","), ",")
		addr = strings.TrimSpace(list[max(0, len(list)-hops)])
	}
	return sourceOf(addr), false
}

// trustedPeer reports whether the connection's peer addr is in trusted.
func trustedPeer(addr string, trusted []netip.Prefix) bool {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// sourceOf is the source an address counts as: itself, an IPv6 address its /64.
func sourceOf(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return truncate(addr, 64) // not an address: still one source
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// Refused tokens a second, and the burst above it, one source may send the MCP endpoint
// before it is answered 429 (TokenFailures).
const (
	tokenFailureRate  = 2
	tokenFailureBurst = 20
	maxFailureSources = 10000
)

// TokenFailures is the budget of refused tokens per source of the MCP endpoint in hub
// mode (auth.Guard.Failures): each source, as trusted and hops name it (the rate
// limits' source), spends its own, so a flood of made-up tokens keeps neither the
// Hub's API nor another user's first request busy.
func TokenFailures(trusted []netip.Prefix, hops int) auth.Budget {
	return &tokenFailures{l: newLimiter(tokenFailureRate, tokenFailureBurst, maxFailureSources), trusted: trusted, hops: hops, now: time.Now}
}

type tokenFailures struct {
	l       *limiter
	trusted []netip.Prefix
	hops    int
	now     func() time.Time
}

func (f *tokenFailures) Allow(r *http.Request) bool {
	src, _ := source(r, f.hops, f.trusted)
	return f.l.left(src, f.now())
}

func (f *tokenFailures) Spend(r *http.Request) {
	src, _ := source(r, f.hops, f.trusted)
	f.l.allow(src, f.now())
}

// DefaultTrustedProxies are the peers whose X-Forwarded-For hub.oauth believes by
// default: the Hub's configurable-http-proxy on the same host, which connects from
// 127.0.0.1 (or ::1). A local user can reach the listener from there too and name any
// source, which buys no more than binding any of 127.0.0.0/8 does; behind the proxy,
// trusting none would put every user's login in one budget that one client empties.
var DefaultTrustedProxies = []string{"127.0.0.1/32", "::1/128"}

// ParseTrustedProxies parses Config.TrustedProxies from addresses (127.0.0.1, ::1) and
// CIDR prefixes (10.0.0.0/8).
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			ip, ipErr := netip.ParseAddr(s)
			if ipErr != nil {
				return nil, fmt.Errorf("%q is neither an IP address nor a CIDR prefix", s)
			}
			p = netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen())
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 { // ::ffff:10.0.0.0/104 is 10.0.0.0/8, as peers are compared
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
