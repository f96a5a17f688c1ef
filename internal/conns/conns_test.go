package conns

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// serve starts l's Server serving h on a loopback listener within l.
func serve(t *testing.T, h http.Handler, l Limits) (addr string, refused func(reason string) float64) {
	t.Helper()
	addr, refused, _ = serveListener(t, h, l)
	return addr, refused
}

// serveListener is serve, also returning the Listener.
func serveListener(t *testing.T, h http.Handler, l Limits) (addr string, refused func(reason string) float64, cl *Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := RefusedCounter("test")
	cl = Listen(ln, l, c)
	srv := cl.Server(h)
	go func() { _ = srv.Serve(cl) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), func(reason string) float64 { return promtest.ToFloat64(c.WithLabelValues(reason)) }, cl
}

// idleCount is how many of l's anonymous (anon) or held connections are idle: not
// serving, and their server has waited idleAfter for the next request (victim's rule).
// A test that expects a newcomer to close the oldest idle one waits for them first: a
// server goroutine that reaches its read late (-race, a busy machine) is not idle yet.
func idleCount(l *Listener, anon bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.held
	if anon {
		set = l.anon
	}
	n, now := 0, time.Now().UnixNano()
	for c := range set {
		if w := c.waiting.Load(); !c.busy && w != 0 && now-w >= int64(idleAfter) {
			n++
		}
	}
	return n
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedWithin reports whether the server closes c within d (a read ends in EOF or reset).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = io.WriteString(w, "ok")
})

// principals serves as ok, but a request naming a principal (X-User, as a checked
// token would) is admitted for it first, and /stream holds its response open until
// the client leaves.
var principals = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if u := r.Header.Get("X-User"); u != "" && !Admit(w, r, u) {
		return
	}
	if r.URL.Path == "/stream" {
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		return
	}
	ok(w, r)
})

// blocking serves as ok, but /block waits until block is closed, telling blocked (of
// capacity n) first.
func blocking(n int) (h http.Handler, block, blocked chan struct{}) {
	block, blocked = make(chan struct{}), make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			blocked <- struct{}{}
			<-block
		}
		ok(w, r)
	}), block, blocked
}

// dialFrom connects to addr from the local address ip (one of 127.0.0.0/8).
func dialFrom(t *testing.T, ip netip.Addr, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip.AsSlice()}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// served reports whether an anonymous GET on c is answered 200 (false when c is closed).
func served(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(testenv.Wait))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	return err == nil && resp.StatusCode == 200
}

// get sends a GET of path as user ("" : anonymous) on c and reads the response's head.
func get(t *testing.T, c net.Conn, path, user string) *http.Response {
	t.Helper()
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\n"
	if user != "" {
		req += "X-User: " + user + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s as %q: %v", path, user, err)
	}
	return resp
}

// TestAnonymousBudget: the anonymous hold at most Anonymous connections; a new one
// closes the oldest idle one (counted), so it is served; when every anonymous one is
// busy, the new one is closed at once.
func TestAnonymousBudget(t *testing.T) {
	h, block, blocked := blocking(2)
	addr, refused, l := serveListener(t, h, Limits{MaxConnections: 4, Anonymous: 2, IdleTimeout: time.Minute, ReadTimeout: time.Minute, AnonymousTimeout: time.Minute})
	idle := []net.Conn{dial(t, addr), dial(t, addr)}
	for _, c := range idle {
		if resp := get(t, c, "/", ""); resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
	}
	testenv.Eventually(t, testenv.Wait, "both anonymous connections idle", func() bool { return idleCount(l, true) == 2 })
	fresh := dial(t, addr)
	if resp := get(t, fresh, "/", ""); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if !closedWithin(idle[0], testenv.Wait) {
		t.Fatal("the oldest idle anonymous connection stayed open beyond the budget")
	}
	if closedWithin(idle[1], 100*time.Millisecond) {
		t.Fatal("a younger idle anonymous connection was closed")
	}
	if got := refused(ReasonAnonymous); got != 1 {
		t.Fatalf("refused{anonymous} = %v, want 1", got)
	}
	// Both anonymous connections busy: a new one is closed at once.
	busy := []net.Conn{idle[1], fresh}
	for _, c := range busy {
		if _, err := io.WriteString(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	for range busy {
		testenv.Receive(t, testenv.Wait, "a request being served", blocked)
	}
	if !closedWithin(dial(t, addr), testenv.Wait) {
		t.Fatal("a connection stayed open while every anonymous one was busy")
	}
	close(block)
}

// TestAnonymousSlowBody: an anonymous request whose body does not come holds nothing:
// a new connection closes its connection as the oldest idle one, and is served.
func TestAnonymousSlowBody(t *testing.T) {
	reading := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			reading <- struct{}{}
		}
		ok(w, r)
	})
	addr, refused := serve(t, h, Limits{MaxConnections: 4, Anonymous: 1, IdleTimeout: time.Minute, ReadTimeout: time.Minute, AnonymousTimeout: time.Minute})
	slow := dial(t, addr)
	if _, err := io.WriteString(slow, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	testenv.Receive(t, testenv.Wait, "the slow body's request being served", reading)
	if resp := get(t, dial(t, addr), "/", ""); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if !closedWithin(slow, testenv.Wait) {
		t.Fatal("an anonymous request waiting for its body kept its connection")
	}
	if got := refused(ReasonAnonymous); got != 1 {
		t.Fatalf("refused{anonymous} = %v, want 1", got)
	}
}

// TestKeepAliveBeforeSilent: a new connection closes an idle anonymous one that never
// sent a request before a keep-alive one (a probe's, a scraper's), older or not.
func TestKeepAliveBeforeSilent(t *testing.T) {
	addr, _ := serve(t, ok, Limits{MaxConnections: 4, Anonymous: 2, IdleTimeout: time.Minute, ReadTimeout: time.Minute, AnonymousTimeout: time.Minute})
	probe := dial(t, addr)
	if resp := get(t, probe, "/", ""); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	silent := dial(t, addr)
	if resp := get(t, dial(t, addr), "/", ""); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if !closedWithin(silent, testenv.Wait) {
		t.Fatal("the silent connection stayed open")
	}
	if resp := get(t, probe, "/", ""); resp.StatusCode != 200 {
		t.Fatalf("the probe's keep-alive connection: %s", resp.Status)
	}
}

// TestShares: a principal with its share of requests in flight gets 429 with
// Retry-After for one more, and that request's connection is closed, never another's;
// another principal is served meanwhile, and an anonymous probe too. When every
// connection is held, a new principal's request closes the oldest idle held
// connection, whoever's requests it carried, and gets 503 only when all are busy.
func TestShares(t *testing.T) {
	addr, refused := serve(t, principals, Limits{MaxConnections: 3, PerPrincipal: 2, Anonymous: 4, IdleTimeout: time.Minute, ReadTimeout: time.Minute})
	stream := func(user string) net.Conn {
		c := dial(t, addr)
		if resp := get(t, c, "/stream", user); resp.StatusCode != 200 {
			t.Fatalf("%s's stream: %s", user, resp.Status)
		}
		return c
	}
	mallory := []net.Conn{stream("mallory"), stream("mallory")}
	extra := dial(t, addr)
	resp := get(t, extra, "/", "mallory")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("mallory over her share: %s, Retry-After %q; want 429 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	if !closedWithin(extra, testenv.Wait) {
		t.Fatal("the refused connection stayed open")
	}
	for i, c := range mallory {
		if closedWithin(c, 50*time.Millisecond) {
			t.Fatalf("mallory's stream %d was closed", i)
		}
	}
	if got := refused(ReasonShare); got != 1 {
		t.Errorf("refused{share} = %v, want 1", got)
	}
	if resp := get(t, dial(t, addr), "/", ""); resp.StatusCode != 200 {
		t.Fatalf("an anonymous probe: %s", resp.Status)
	}
	bob := dial(t, addr)
	if resp := get(t, bob, "/", "bob"); resp.StatusCode != 200 {
		t.Fatalf("bob under his share: %s", resp.Status)
	}
	// Every connection held: carol's closes bob's idle one (an idle connection is one
	// the server has waited on for a moment: retried).
	testenv.Eventually(t, testenv.Wait, "carol served for bob's idle connection", func() bool {
		return get(t, dial(t, addr), "/stream", "carol").StatusCode == 200
	})
	if !closedWithin(bob, testenv.Wait) {
		t.Fatal("bob's idle connection stayed open for carol's new one")
	}
	// Every held connection busy: 503, until mallory ends a stream.
	if resp := get(t, dial(t, addr), "/", "dave"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dave with every connection busy: %s, want 503", resp.Status)
	}
	if got := refused(ReasonFull); got < 1 {
		t.Errorf("refused{full} = %v, want at least 1", got)
	}
	_ = mallory[0].Close()
	testenv.Eventually(t, testenv.Wait, "dave served once mallory ended a stream", func() bool {
		return get(t, dial(t, addr), "/", "dave").StatusCode == 200
	})
}

// TestSharesOfPooledConnections: a proxy carries every principal's requests on the
// connections it pools. A connection is nobody's: bob's requests, one at a time over
// four pooled connections, are all served and none of them is closed, while mallory,
// with her share in flight over two of them, is refused one more on a third; bob is
// served on the fourth meanwhile.
func TestSharesOfPooledConnections(t *testing.T) {
	addr, refused := serve(t, principals, Limits{MaxConnections: 8, PerPrincipal: 2, Anonymous: 4, IdleTimeout: time.Minute, ReadTimeout: time.Minute})
	pool := make([]net.Conn, 4)
	for i := range pool {
		pool[i] = dial(t, addr)
	}
	for round := range 3 {
		for i, c := range pool {
			if resp := get(t, c, "/", "bob"); resp.StatusCode != 200 {
				t.Fatalf("round %d: bob's request on pooled connection %d: %s", round, i, resp.Status)
			}
		}
	}
	for i, c := range pool[:2] {
		if resp := get(t, c, "/stream", "mallory"); resp.StatusCode != 200 {
			t.Fatalf("mallory's stream on pooled connection %d: %s", i, resp.Status)
		}
	}
	if resp := get(t, pool[2], "/", "mallory"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("mallory's third request in flight: %s, want 429", resp.Status)
	}
	if resp := get(t, pool[3], "/", "bob"); resp.StatusCode != 200 {
		t.Fatalf("bob beside mallory's share: %s", resp.Status)
	}
	if closedWithin(pool[3], 50*time.Millisecond) {
		t.Fatal("the pooled connection that carried bob's request was closed")
	}
	if got, want := refused(ReasonShare), 1.0; got != want {
		t.Errorf("refused{share} = %v, want %v", got, want)
	}
}

// TestAnonymousFloodTurnsOver: a proxy's pooled anonymous connections kept busy back to
// back by requests no principal is admitted for (made-up tokens) never turn idle; a
// new connection waiting for room makes their next responses close them, and it is
// served rather than closed at accept.
func TestAnonymousFloodTurnsOver(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond) // a token check
		if u := r.Header.Get("X-User"); u != "" && Admit(w, r, u) {
			ok(w, r)
			return
		}
		http.Error(w, "invalid token", http.StatusUnauthorized)
	})
	addr, refused := serve(t, h, Limits{MaxConnections: 8, Anonymous: 2, IdleTimeout: time.Minute, ReadTimeout: time.Minute, AnonymousTimeout: time.Minute})
	stop := make(chan struct{})
	closes := make(chan struct{}, 1000)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { // a pooled connection, reopened when the server closes it
			defer wg.Done()
			for {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				br := bufio.NewReader(c)
				for {
					select {
					case <-stop:
						_ = c.Close()
						return
					default:
					}
					if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
						break
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						break
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					if resp.Close {
						closes <- struct{}{}
						break
					}
				}
				_ = c.Close()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for range 5 {
		c := dial(t, addr)
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-User: bob\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(testenv.Wait))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("bob's new connection during the flood: %v, %v (refused{anonymous} %v)", resp, err, refused(ReasonAnonymous))
		}
	}
	if len(closes) == 0 {
		t.Fatal("no flooding connection was closed by its response")
	}
}

// TestProxyConnectionsHeld: a proxy's connections (Limits.Proxies) are held from the
// start, never anonymous: with the anonymous' one connection busy, three of the
// proxy's carrying anonymous requests are served, and a fourth, with every held
// connection taken, closes the oldest idle one rather than being closed.
func TestProxyConnectionsHeld(t *testing.T) {
	h, block, blocked := blocking(1)
	defer close(block)
	proxy := netip.MustParsePrefix("127.0.0.2/32")
	addr, refused, l := serveListener(t, h, Limits{MaxConnections: 3, Anonymous: 1, IdleTimeout: time.Minute, ReadTimeout: time.Minute, AnonymousTimeout: time.Minute, Proxies: []netip.Prefix{proxy}})
	if _, err := io.WriteString(dial(t, addr), "GET /block HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	testenv.Receive(t, testenv.Wait, "the anonymous connection busy", blocked)
	fromProxy := func() net.Conn { return dialFrom(t, proxy.Addr(), addr) }
	var pooled []net.Conn
	for i := range 3 {
		c := fromProxy()
		if resp := get(t, c, "/", ""); resp.StatusCode != 200 {
			t.Fatalf("the proxy's connection %d: %s", i, resp.Status)
		}
		pooled = append(pooled, c)
	}
	if got := refused(ReasonAnonymous); got != 0 {
		t.Fatalf("refused{anonymous} = %v: a proxy's connection was counted anonymous", got)
	}
	testenv.Eventually(t, testenv.Wait, "the proxy's three connections idle", func() bool { return idleCount(l, false) == 3 })
	testenv.Eventually(t, testenv.Wait, "a fourth connection of the proxy's served", func() bool { return served(fromProxy()) })
	if !closedWithin(pooled[0], testenv.Wait) {
		t.Fatal("the proxy's oldest idle connection stayed open for its new one")
	}
}

// TestIdleUsersConnectionsLast: among idle held connections, one that only carried
// requests admitted for no one (a local client's probes from the proxy's address) is
// closed for a newcomer before an older one that carried a user's request.
func TestIdleUsersConnectionsLast(t *testing.T) {
	proxy := netip.MustParsePrefix("127.0.0.3/32")
	addr, _ := serve(t, principals, Limits{MaxConnections: 2, IdleTimeout: time.Minute, ReadTimeout: time.Minute, Proxies: []netip.Prefix{proxy}})
	fromProxy := func() net.Conn { return dialFrom(t, proxy.Addr(), addr) }
	users, probes := fromProxy(), fromProxy()
	if resp := get(t, users, "/", "bob"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if resp := get(t, probes, "/", ""); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	testenv.Eventually(t, testenv.Wait, "a third connection of the proxy's served", func() bool { return served(fromProxy()) })
	if !closedWithin(probes, testenv.Wait) {
		t.Fatal("the connection of probes stayed open")
	}
	if resp := get(t, users, "/", "bob"); resp.StatusCode != 200 {
		t.Fatalf("the connection that carried bob's request: %s", resp.Status)
	}
}

// TestUnreadResponse: a client that never reads the response to a request admitted for
// no one (pipelined probes) has its connection closed within ReadTimeout of the write;
// a principal's response (a stream) may wait for its reader as long as it lives.
func TestUnreadResponse(t *testing.T) {
	big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := r.Header.Get("X-User"); u != "" && !Admit(w, r, u) {
			return
		}
		chunk := strings.Repeat("x", 64<<10)
		for range 256 { // 16 MiB: more than the socket buffers hold
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	addr, _ := serve(t, big, Limits{MaxConnections: 4, IdleTimeout: time.Minute, ReadTimeout: 300 * time.Millisecond})
	for _, tt := range []struct {
		user   string
		closed bool
	}{{"", true}, {"bob", false}} {
		c := dial(t, addr)
		req := "GET / HTTP/1.1\r\nHost: x\r\n"
		if tt.user != "" {
			req += "X-User: " + tt.user + "\r\n"
		}
		if _, err := io.WriteString(c, req+"\r\n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the scenario: a client that reads nothing for a while
		// Closed: the bytes the socket held, then EOF or a reset; open: the whole body.
		_ = c.SetReadDeadline(time.Now().Add(testenv.Wait))
		var n int64
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			n, err = io.Copy(io.Discard, resp.Body)
		}
		if got := n < 16<<20; got != tt.closed {
			t.Errorf("user %q: read %d bytes of the body (%v); closed = %v, want %v", tt.user, n, err, got, tt.closed)
		}
	}
}

// TestVictims: with every connection held, a newcomer's request closes an idle one of
// its own principal's first, else one of the principal with the most idle ones, never
// one serving; and it waits for a connection just opened to turn idle (it goes first)
// rather than being refused.
func TestVictims(t *testing.T) {
	addr, refused, l := serveListener(t, principals, Limits{MaxConnections: 4, IdleTimeout: time.Minute, ReadTimeout: time.Minute, Proxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.4/32")}})
	allIdle := func() {
		testenv.Eventually(t, testenv.Wait, "the held connections idle", func() bool { return idleCount(l, false) == 4 })
	}
	idleAs := func(user string) net.Conn {
		c := dial(t, addr)
		if resp := get(t, c, "/", user); resp.StatusCode != 200 {
			t.Fatalf("%s: %s", user, resp.Status)
		}
		return c
	}
	xavier := idleAs("xavier") // the oldest
	bob := []net.Conn{idleAs("bob"), idleAs("bob")}
	mallory := idleAs("mallory")
	allIdle()
	// mallory's newcomer closes her own idle connection, though bob has more and
	// xavier's is older.
	if resp := get(t, dial(t, addr), "/", "mallory"); resp.StatusCode != 200 {
		t.Fatalf("mallory's newcomer: %s", resp.Status)
	}
	if !closedWithin(mallory, testenv.Wait) {
		t.Fatal("mallory's newcomer did not close her own idle connection")
	}
	allIdle()
	// carol's closes bob's oldest (he has two idle), not xavier's older one.
	if resp := get(t, dial(t, addr), "/", "carol"); resp.StatusCode != 200 {
		t.Fatalf("carol's newcomer: %s", resp.Status)
	}
	if !closedWithin(bob[0], testenv.Wait) || closedWithin(xavier, 50*time.Millisecond) || closedWithin(bob[1], 50*time.Millisecond) {
		t.Fatal("carol's newcomer did not close bob's oldest idle connection alone")
	}
	// A proxy's connection just opened, not idle yet: dave's request waits for it to
	// turn idle and closes it, rather than being refused 503.
	silent := dialFrom(t, netip.MustParseAddr("127.0.0.4"), addr)
	if resp := get(t, dial(t, addr), "/", "dave"); resp.StatusCode != 200 {
		t.Fatalf("dave with a silent connection not idle yet: %s", resp.Status)
	}
	if !closedWithin(silent, testenv.Wait) {
		t.Fatal("the silent connection stayed open")
	}
	if got := refused(ReasonIdle); got < 3 {
		t.Errorf("refused{idle} = %v, want at least 3", got)
	}
}

// TestAnonymousTimeout: an anonymous connection without a request, or idle after an
// anonymous one, is closed after AnonymousTimeout; a principal's idle one is kept
// until IdleTimeout.
func TestAnonymousTimeout(t *testing.T) {
	addr, _ := serve(t, principals, Limits{MaxConnections: 4, IdleTimeout: time.Minute, ReadTimeout: time.Minute, AnonymousTimeout: 200 * time.Millisecond})
	silent, probed, owned := dial(t, addr), dial(t, addr), dial(t, addr)
	_ = get(t, probed, "/", "")
	_ = get(t, owned, "/", "alice")
	for _, c := range []net.Conn{silent, probed} {
		if !closedWithin(c, testenv.Wait) {
			t.Fatal("an anonymous connection outlived the anonymous timeout")
		}
	}
	if closedWithin(owned, time.Second) {
		t.Fatal("a principal's idle connection was closed before the idle timeout")
	}
}

func TestTimeouts(t *testing.T) {
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Admit(w, r, "alice") { // a stream is a principal's (TestUnreadResponse)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		for i := range 4 { // a response streaming past every timeout, as long as its request lives
			_, _ = io.WriteString(w, strings.Repeat("x", i+1)+"\n")
			_ = http.NewResponseController(w).Flush()
			select {
			case <-time.After(150 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	l := Limits{MaxConnections: 10, IdleTimeout: 300 * time.Millisecond, ReadTimeout: 200 * time.Millisecond}
	addr, _ := serve(t, stream, l)
	tests := []struct {
		name   string
		send   string
		closed bool // the server closes the connection within a second
	}{
		{"idle keep-alive connection", "", true},
		{"slow header", "GET / HTTP/1.1\r\nHost: x\r\n", true},
		{"slow body", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, addr)
			if _, err := io.WriteString(c, tt.send); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if got := closedWithin(c, 2*time.Second); got != tt.closed {
				t.Fatalf("closed = %v, want %v", got, tt.closed)
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("closed after %v", d)
			}
		})
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run("stream after "+method+" outlives the timeouts", func(t *testing.T) {
			resp, err := http.Post("http://"+addr, "text/plain", strings.NewReader("body"))
			if method == http.MethodGet {
				resp, err = http.Get("http://" + addr)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || string(b) != "x\nxx\nxxx\nxxxx\n" {
				t.Fatalf("stream = %q, %v", b, err)
			}
		})
	}
}

// TestSlotFreeWhenClosedSeen: once a client sees the server close its connection (here
// for idling), the slot is free: a connection made right then is served, not refused.
func TestSlotFreeWhenClosedSeen(t *testing.T) {
	addr, refused := serve(t, ok, Limits{MaxConnections: 1, Anonymous: 1, IdleTimeout: 50 * time.Millisecond, ReadTimeout: time.Minute})
	for i := range 20 {
		c := dial(t, addr)
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("round %d: %v %v (refused %v)", i, resp, err, refused(ReasonAnonymous))
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = c.SetReadDeadline(time.Now().Add(testenv.Wait))
		if _, err := io.Copy(io.Discard, br); err != nil {
			t.Fatalf("round %d: the idle connection was not closed: %v", i, err)
		}
	}
	if n := refused(ReasonAnonymous); n != 0 {
		t.Fatalf("%v connections refused after the server had closed the previous one", n)
	}
}

// TestDescriptorShare: a cap within the process's descriptors is at most a quarter of
// those beyond the reserve, and at least 1.
func TestDescriptorShare(t *testing.T) {
	for _, tt := range []struct {
		want  int
		limit uint64
		cap   int
	}{
		{128, 1 << 20, 128}, // plenty of descriptors: as asked
		{128, 1024, 128},    // (1024-256)/4 = 192
		{128, 512, 64},      // (512-256)/4
		{1000, 4096, 960},   // (4096-256)/4
		{128, 256, 1},       // nothing beyond the reserve: one connection
		{128, 0, 1},
		{5, 1 << 62, 5}, // no overflow
	} {
		if got := descriptorShare(tt.want, tt.limit); got != tt.cap {
			t.Errorf("descriptorShare(%d, %d) = %d, want %d", tt.want, tt.limit, got, tt.cap)
		}
	}
	if limit, ok := openFilesLimit(); ok && WithinDescriptors(1<<30) != descriptorShare(1<<30, limit) {
		t.Errorf("WithinDescriptors(1<<30) = %d; the process's limit %d gives %d", WithinDescriptors(1<<30), limit, descriptorShare(1<<30, limit))
	}
}

// TestSilentAnonymousIdleAtOnce: an anonymous connection that never sent a byte is idle
// once the server has waited idleAfter for its first, not slowAfter: silent connections
// turned over 16 every 100 ms, and a token holder's stream waited behind a thousand of
// them for 6.5 s (red team of issue 39, pass 11, M1). One the server has not waited on
// yet (its request may be in the kernel's buffer) is not idle; a proxy's silent
// connection keeps slowAfter to send its request.
func TestSilentAnonymousIdleAtOnce(t *testing.T) {
	now := time.Now()
	silent := func(waited bool) *conn {
		c := &conn{since: now.Add(-3 * idleAfter)}
		if waited {
			c.waiting.Store(now.Add(-2 * idleAfter).UnixNano())
		}
		return c
	}
	for _, tt := range []struct {
		name   string
		c      *conn
		anon   bool
		closed bool
	}{
		{"anonymous, waited on", silent(true), true, true},
		{"anonymous, not read yet", silent(false), true, false},
		{"a proxy's, waited on", silent(true), false, false},
	} {
		v, _ := victim(map[*conn]struct{}{tt.c: {}}, "", tt.anon)
		if (v != nil) != tt.closed {
			t.Errorf("%s: closed %v, want %v", tt.name, v != nil, tt.closed)
		}
	}
}
