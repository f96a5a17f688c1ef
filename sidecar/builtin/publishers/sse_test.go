package publishers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/conns"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish/publishtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

const sseToken = "0123456789abcdef-feed"

// newTestSSE builds an sse publisher with opts over the required ones and serves its
// stream on a test server.
func newTestSSE(t *testing.T, opts map[string]any) (*sse, *httptest.Server) {
	t.Helper()
	return newTestSSEOn(t, opts, nil)
}

// newTestSSEOn is newTestSSE with the test server's listener wrapped by wrap (nil: as is).
func newTestSSEOn(t *testing.T, opts map[string]any, wrap func(net.Listener) net.Listener) (*sse, *httptest.Server) {
	t.Helper()
	raw := map[string]any{"listen": "127.0.0.1:0", "token": sseToken}
	maps.Copy(raw, opts)
	p, err := publish.New("sse", raw, publish.Deps{Logger: quiet, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	s := p.(*sse)
	srv := httptest.NewUnstartedServer(s)
	if wrap != nil {
		srv.Listener = wrap(srv.Listener)
	}
	srv.Start()
	t.Cleanup(func() {
		close(s.stop)
		srv.Close()
	})
	return s, srv
}

// frame is one SSE frame as a consumer reads it.
type frame struct{ id, event, data string }

// consumer is one SSE stream read frame by frame.
type consumer struct {
	resp   *http.Response
	frames chan frame
}

// connect opens a stream with last as Last-Event-ID ("" for none).
func connect(t *testing.T, url, token, last string) *consumer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("feed answered %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	c := &consumer{resp: resp, frames: make(chan frame, 4096)}
	go func() {
		defer close(c.frames)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var f frame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if f.event != "" {
					c.frames <- f
				}
				f = frame{}
			case strings.HasPrefix(line, "id: "):
				f.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				f.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				f.data = line[6:]
			}
		}
	}()
	t.Cleanup(c.close)
	return c
}

func (c *consumer) close() { c.resp.Body.Close() }

// next is the next frame that is not a heartbeat.
func (c *consumer) next(t *testing.T) frame {
	t.Helper()
	return testenv.Receive(t, testenv.Wait, "an SSE frame", c.frames)
}

// change reads the next frame, which must be a change event, and validates it.
func (c *consumer) change(t *testing.T) (frame, publish.Event) {
	t.Helper()
	f := c.next(t)
	if f.event != SSEChange {
		t.Fatalf("frame %+v; want a change", f)
	}
	return f, publishtest.Event(t, []byte(f.data))
}

func TestSSEOptions(t *testing.T) {
	for _, tt := range []struct {
		opts map[string]any
		want string
	}{
		{map[string]any{"token": sseToken}, `"listen" must be host:port`},
		{map[string]any{"listen": "127.0.0.1:0"}, `option "token" is required`},
		{map[string]any{"listen": "127.0.0.1:0", "token": "short"}, `option "token" is required`},
		{map[string]any{"listen": "127.0.0.1:0", "token": sseToken, "path": "events"}, `"path" must start with /`},
		{map[string]any{"listen": "127.0.0.1:0", "token": sseToken, "scope": "some"}, `"scope" must be`},
		{map[string]any{"listen": "127.0.0.1:0", "token": sseToken, "buffer": 0}, "buffer must be"},
		{map[string]any{"listen": "127.0.0.1:0", "token": sseToken, "heartbeat": "0s"}, "heartbeat"},
		{map[string]any{"listen": "127.0.0.1:0", "token": sseToken, "buffers": 3}, `buffers: unknown key (known: buffer, buffer_bytes, heartbeat, listen, max_connections, max_consumers, path, read_timeout, scope, token, write_timeout)`},
	} {
		_, err := publish.New("sse", tt.opts, publish.Deps{Logger: quiet})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(sse, %v) = %v; want %q", tt.opts, err, tt.want)
		}
	}
}

func TestSSEAuthRefused(t *testing.T) {
	_, srv := newTestSSE(t, nil)
	for _, tt := range []struct {
		method, auth string
		want         int
	}{
		{http.MethodGet, "", http.StatusUnauthorized},
		{http.MethodGet, "Bearer wrong-token-wrong-token", http.StatusUnauthorized},
		{http.MethodGet, sseToken, http.StatusUnauthorized}, // no "Bearer "
		{http.MethodPost, "Bearer " + sseToken, http.StatusMethodNotAllowed},
	} {
		req, _ := http.NewRequest(tt.method, srv.URL, nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s with %q: %s; want %d", tt.method, tt.auth, resp.Status, tt.want)
		}
	}
}

// TestSSEEveryConsumerEveryEvent: several consumers (replicas) each receive every
// event, in order, numbered per path.
func TestSSEEveryConsumerEveryEvent(t *testing.T) {
	s, srv := newTestSSE(t, nil)
	var cs []*consumer
	for range 3 {
		c := connect(t, srv.URL, sseToken, "")
		if f := c.next(t); f.event != SSEHello || f.data != `{"v":1,"resumed":false}` {
			t.Fatalf("first frame %+v; want hello", f)
		}
		cs = append(cs, c)
	}
	const n = 60
	for i := range n {
		if err := s.Publish(context.Background(), event(fmt.Sprintf("nb%d.ipynb", i%5))); err != nil {
			t.Fatal(err)
		}
	}
	for ci, c := range cs {
		seq := map[string]uint64{}
		for i := range n {
			f, ev := c.change(t)
			if want := s.id(uint64(i + 1)); f.id != want {
				t.Fatalf("consumer %d event %d: id %q; want %q", ci, i, f.id, want)
			}
			seq[ev.Path]++
			if ev.Path != fmt.Sprintf("nb%d.ipynb", i%5) || ev.Seq != seq[ev.Path] {
				t.Fatalf("consumer %d event %d: %s seq %d; want nb%d.ipynb seq %d", ci, i, ev.Path, ev.Seq, i%5, seq[ev.Path])
			}
		}
	}
	if got := s.Consumers(); got != 3 {
		t.Errorf("%d consumers; want 3", got)
	}
}

// TestSSEResume: a consumer that reconnects with Last-Event-ID gets exactly the events
// it missed, then live ones.
func TestSSEResume(t *testing.T) {
	s, srv := newTestSSE(t, nil)
	c := connect(t, srv.URL, sseToken, "")
	hello := c.next(t)
	for range 3 {
		_ = s.Publish(context.Background(), event("a.ipynb"))
	}
	var last string
	for range 3 {
		f, _ := c.change(t)
		last = f.id
	}
	c.close()
	testenv.Eventually(t, testenv.Wait, "the consumer gone", func() bool { return s.Consumers() == 0 })
	_ = s.Publish(context.Background(), event("a.ipynb"))
	_ = s.Publish(context.Background(), event("b.ipynb"))

	c = connect(t, srv.URL, sseToken, last)
	if f := c.next(t); f.event != SSEHello || f.data != `{"v":1,"resumed":true}` || f.id != last {
		t.Fatalf("first frame %+v; want hello resumed at %s", f, last)
	}
	for _, want := range []struct {
		path string
		seq  uint64
	}{{"a.ipynb", 4}, {"b.ipynb", 1}} {
		if _, ev := c.change(t); ev.Path != want.path || ev.Seq != want.seq {
			t.Fatalf("resumed %s seq %d; want %s seq %d", ev.Path, ev.Seq, want.path, want.seq)
		}
	}
	// Resuming after the hello of an empty stream is no gap either.
	c2 := connect(t, srv.URL, sseToken, hello.id)
	if f := c2.next(t); f.event != SSEHello {
		t.Fatalf("resume from the first hello: %+v; want hello", f)
	}
	if _, ev := c2.change(t); ev.Seq != 1 || ev.Path != "a.ipynb" {
		t.Fatalf("resume from the first hello: %s seq %d; want a.ipynb seq 1", ev.Path, ev.Seq)
	}
}

// TestSSEGap: events no longer buffered, another run's id or a made-up id are a gap
// frame said out loud, and the stream goes on live after it.
func TestSSEGap(t *testing.T) {
	s, srv := newTestSSE(t, map[string]any{"buffer": 4})
	for range 10 {
		_ = s.Publish(context.Background(), event("a.ipynb"))
	}
	for _, tt := range []struct{ last, reason string }{
		{s.id(2), GapEvicted},              // 3..6 evicted: the buffer holds 7..10
		{"0000000000000000-5", GapRestart}, // another run
		{"nonsense", GapUnknown},
		{s.id(99), GapUnknown},
		{strings.Repeat("9", 100), GapUnknown},
	} {
		s.mu.Lock()
		next := s.next
		s.mu.Unlock()
		c := connect(t, srv.URL, sseToken, tt.last)
		f := c.next(t)
		var g gapFrame
		if f.event != SSEGap || json.Unmarshal([]byte(f.data), &g) != nil || g.Reason != tt.reason || f.id != s.id(next-1) {
			t.Fatalf("resume after %q: %+v; want a gap %q with id %s", tt.last, f, tt.reason, s.id(next-1))
		}
		_ = s.Publish(context.Background(), event("b.ipynb"))
		if f, _ := c.change(t); f.id != s.id(next) {
			t.Fatalf("after the gap: id %s; want the live %s", f.id, s.id(next))
		}
		c.close()
	}
	// Resuming right before the oldest still buffered is no gap: after 11 come 12..15.
	c := connect(t, srv.URL, sseToken, s.id(11))
	if f := c.next(t); f.event != SSEHello {
		t.Fatalf("resume after 11: %+v; want hello", f)
	}
	for i := 12; i <= 15; i++ {
		if f, _ := c.change(t); f.id != s.id(uint64(i)) {
			t.Fatalf("resume after 11: id %s; want %s", f.id, s.id(uint64(i)))
		}
	}
}

// TestSSEBoundedMemory: a consumer that stops reading costs nothing beyond the
// buffer, Publish never waits for it, and what it then reads has no silent hole:
// ids run on consecutively except across a gap frame.
func TestSSEBoundedMemory(t *testing.T) {
	s, srv := newTestSSE(t, map[string]any{"buffer": 16, "buffer_bytes": 4096, "write_timeout": "30s"})
	// A raw connection that sends the request and then reads nothing for a while.
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", sseToken)
	testenv.Eventually(t, testenv.Wait, "the stalled consumer connected", func() bool { return s.Consumers() == 1 })
	start := time.Now()
	const n = 20000
	for i := range n {
		ev := event(fmt.Sprintf("nb%d.ipynb", i%20))
		if err := s.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		if events, bytes := s.Buffered(); events > 16 || bytes > 4096 {
			t.Fatalf("after %d events the buffer holds %d events, %d bytes; bounds 16, 4096", i+1, events, bytes)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("%d publishes took %v with a stalled consumer", n, d)
	}
	// Now read: every change id follows the previous one unless a gap frame came between.
	_ = conn.SetReadDeadline(time.Now().Add(testenv.Wait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body) // the frames, unchunked
	var prev, id uint64
	kind := ""
	gaps := 0
	for prev != n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read after %d: %v", prev, err)
		}
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "event: "):
			kind = line[7:]
		case strings.HasPrefix(line, "id: "):
			_, num, _ := strings.Cut(line[4:], "-")
			id, _ = strconv.ParseUint(num, 10, 64)
		case line == "" && kind == SSEGap:
			gaps++
			prev = id // the gap frame carries the id of the last event it skips
		case line == "" && kind == SSEChange:
			if prev != 0 && id != prev+1 {
				t.Fatalf("id %d after %d with no gap frame between", id, prev)
			}
			prev = id
		}
		if line == "" {
			kind = ""
		}
	}
	if gaps == 0 {
		t.Errorf("a consumer stalled over %d events was never told of a gap", n)
	}
}

func TestSSEMaxConsumers(t *testing.T) {
	_, srv := newTestSSE(t, map[string]any{"max_consumers": 2})
	connect(t, srv.URL, sseToken, "").next(t)
	connect(t, srv.URL, sseToken, "").next(t)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer "+sseToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third consumer: %s; want 503", resp.Status)
	}
}

// TestSSERun: Run listens on its address, serves the path, ends the streams and
// returns when ctx is done; an address in use is an error.
func TestSSERun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	busy, err := publish.New("sse", map[string]any{"listen": addr, "token": sseToken}, publish.Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := busy.Run(context.Background()); err == nil || busy.Health() == nil {
		t.Fatalf("Run on a busy address: %v, health %v; want errors", err, busy.Health())
	}
	ln.Close()

	p, err := publish.New("sse", map[string]any{"listen": addr, "token": sseToken, "path": "/feed"}, publish.Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if p.Health() == nil {
		t.Fatal("health nil before the feed listens; want an error (readyz waits for the listener)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var runErr error
	go func() { defer wg.Done(); runErr = p.Run(ctx) }()
	var c *consumer
	testenv.Eventually(t, testenv.Wait, "the feed healthy", func() bool { return p.Health() == nil })
	// Healthy means listening: a connection made now is accepted.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("the feed healthy but not listening: %v", err)
	}
	conn.Close()
	c = connect(t, "http://"+addr+"/feed", sseToken, "")
	c.next(t)
	_ = p.Publish(ctx, event("a.ipynb"))
	c.change(t)
	cancel()
	wg.Wait()
	if runErr != nil || p.Health() != nil {
		t.Fatalf("Run = %v, health %v", runErr, p.Health())
	}
	for range c.frames { // the stream ends
	}
}

// runSSE runs an sse publisher with opts over the required ones on a free loopback
// address until the test ends; it returns the publisher, its address and its registry.
func runSSE(t *testing.T, opts map[string]any) (*sse, string, *prometheus.Registry) {
	t.Helper()
	addr := testenv.FreeAddr(t)
	raw := map[string]any{"listen": addr, "token": sseToken}
	maps.Copy(raw, opts)
	reg := prometheus.NewRegistry()
	p, err := publish.New("sse", raw, publish.Deps{Logger: quiet, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	testenv.Eventually(t, testenv.Wait, "the feed listening", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return p.(*sse), addr, reg
}

// closedWithin reports whether the server closes c within d (a read ends in EOF or a
// reset rather than the deadline), discarding what it sends.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}

// dialer dials addr, closing the connections when the test ends.
func dialer(t *testing.T, addr string) func() net.Conn {
	return func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// TestSSEListenerBounds: the feed's listener holds nothing for a client without the
// token: a refused request's connection is closed with its answer, a connection that
// sends no header (or half of one) is closed after read_timeout.
func TestSSEListenerBounds(t *testing.T) {
	_, addr, _ := runSSE(t, map[string]any{"read_timeout": "300ms"})
	dial := dialer(t, addr)
	for _, tt := range []struct {
		name, send string
		status     string // the answer's status line, "" for none
	}{
		{"no token", "GET /events HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 401 Unauthorized"},
		{"wrong token", "GET /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope-nope-nope-nope\r\n\r\n", "HTTP/1.1 401 Unauthorized"},
		{"wrong method", "POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 405 Method Not Allowed"},
		{"nothing sent", "", ""},
		{"half a header", "GET /events HTTP/1.1\r\nHost: x\r\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn := dial()
			if _, err := io.WriteString(conn, tt.send); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			if tt.status != "" {
				_ = conn.SetReadDeadline(time.Now().Add(testenv.Wait))
				if line, err := br.ReadString('\n'); err != nil || strings.TrimSpace(line) != tt.status {
					t.Fatalf("answer %q, %v; want %q", line, err, tt.status)
				}
			}
			// A property: closed with the answer, or after read_timeout (300 ms), with a
			// scheduling margin; a keep-alive connection would stay open.
			if !closedWithin(&readerConn{conn, br}, 5*time.Second) {
				t.Fatal("the connection stayed open")
			}
		})
	}
}

// TestSSEAnonymousBudget: connections without the token never keep the token holder
// out. With more silent connections opened than the anonymous may hold (each beyond
// closing the oldest, counted as reason anonymous), consumers with the token are
// served up to max_connections, and the one beyond gets 503 (reason full) with
// Retry-After.
func TestSSEAnonymousBudget(t *testing.T) {
	const maxConns = 3
	budget := conns.AnonymousShare(maxConns)
	s, addr, reg := runSSE(t, map[string]any{"max_connections": maxConns, "read_timeout": "1m"})
	dial := dialer(t, addr)
	refused := func(reason string) float64 {
		return testenv.Metric(t, reg, "jupyter_mcp_sidecar_http_connections_refused_total", "listener", "sse", "reason", reason)
	}
	silent := make([]net.Conn, 2*budget)
	for i := range silent {
		silent[i] = dial()
	}
	testenv.Eventually(t, testenv.Wait, "the oldest silent connections closed", func() bool {
		return refused(conns.ReasonAnonymous) >= float64(budget)
	}, func() string { return fmt.Sprint(refused(conns.ReasonAnonymous)) })
	if !closedWithin(silent[0], testenv.Wait) {
		t.Fatal("the oldest silent connection stayed open beyond the anonymous budget")
	}
	cs := make([]*consumer, maxConns)
	for i := range cs {
		dial() // one more silent connection before each consumer
		cs[i] = connect(t, "http://"+addr+"/events", sseToken, "")
		cs[i].next(t)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+sseToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a consumer beyond max_connections %d: %s, Retry-After %q; want 503 with Retry-After", maxConns, resp.Status, resp.Header.Get("Retry-After"))
	}
	if got := refused(conns.ReasonFull); got != 1 {
		t.Fatalf("refused{full} = %v, want 1", got)
	}
	_ = s.Publish(context.Background(), event("a.ipynb"))
	for _, c := range cs {
		c.change(t)
	}
}

// readerConn reads through a bufio.Reader that may hold bytes of the connection.
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestSSEStalledConsumersShareTheBuffer: consumers that resume from the start of a
// full buffer and then stop reading hold no copy of it: the heap grows by far less
// than the buffer over all of them (each would otherwise hold the backlog, a few
// times over).
func TestSSEStalledConsumersShareTheBuffer(t *testing.T) {
	if raceEnabled {
		t.Skip("a memory property: checked without -race")
	}
	const consumers, bufferBytes = 16, 4 << 20
	// Small socket buffers on the server's side, so that the kernel takes little of the
	// backlog and every consumer's write blocks within it (a stimulus).
	s, srv := newTestSSEOn(t, map[string]any{"buffer_bytes": bufferBytes, "write_timeout": "5m"},
		func(ln net.Listener) net.Listener { return smallSendBuffer{ln.(*net.TCPListener)} })
	ids := make([]string, 2000)
	for i := range ids {
		ids[i] = fmt.Sprintf("cell-%055d", i)
	}
	for i := 0; ; i++ {
		ev := publish.NewEvent(fmt.Sprintf("nb%d.ipynb", i), ynotebook.Changes{Added: ids}, publish.Origin{Room: "r", FileID: "f"})
		b, _ := json.Marshal(ev)
		if _, held := s.Buffered(); held+len(b)+64 > bufferBytes {
			break
		}
		if err := s.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	events, held := s.Buffered()
	var m runtime.MemStats
	heap := func() float64 {
		runtime.GC()
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc) / (1 << 20)
	}
	before := heap()
	// Each consumer resumes from the start (the hello of the empty stream), reads the
	// answer and the first bytes of the backlog (the barrier: its stream is writing the
	// backlog), then nothing.
	for range consumers {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.(*net.TCPConn).SetReadBuffer(16 << 10)
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nLast-Event-ID: %s\r\n\r\n", sseToken, s.id(0))
		_ = conn.SetReadDeadline(time.Now().Add(testenv.Wait))
		resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 512), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("consumer: %v %v", resp, err)
		}
		if line, err := bufio.NewReaderSize(resp.Body, 16).ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry:") {
			t.Fatalf("consumer's first line %q, %v", line, err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && sc.Text() != "event: "+SSEChange {
		}
	}
	after := heap()
	t.Logf("%d events, %.1f MB buffered; heap %.1f MB, %.1f MB with %d consumers stalled on it", events, float64(held)/(1<<20), before, after, consumers)
	// Per consumer: its connection's buffers and goroutine, and at most one event in
	// flight (about 120 kB here). Copying the backlog, each would hold 4 MB or more.
	if grown := after - before; grown > float64(bufferBytes)/(1<<20) {
		t.Errorf("the heap grew %.1f MB with %d consumers stalled on a %.1f MB buffer; want under one buffer in all",
			grown, consumers, float64(held)/(1<<20))
	}
}

// smallSendBuffer gives every accepted connection a small kernel send buffer.
type smallSendBuffer struct{ *net.TCPListener }

func (l smallSendBuffer) Accept() (net.Conn, error) {
	c, err := l.TCPListener.AcceptTCP()
	if err != nil {
		return nil, err
	}
	_ = c.SetWriteBuffer(16 << 10)
	return c, nil
}
