package conns

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// serve starts Server(h, l) on a loopback listener capped at l.MaxConnections.
func serve(t *testing.T, h http.Handler, l Limits) (addr string, refused float64Func) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := RefusedCounter("test")
	srv := Server(h, l)
	go func() { _ = srv.Serve(Listen(ln, l.MaxConnections, c)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), func() float64 { return promtest.ToFloat64(c) }
}

type float64Func func() float64

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

func TestCapRefusesAndCounts(t *testing.T) {
	addr, refused := serve(t, ok, Limits{MaxConnections: 2, IdleTimeout: time.Minute, ReadTimeout: time.Minute})
	held := []net.Conn{dial(t, addr), dial(t, addr)}
	for _, c := range held { // both are served: they hold the two slots
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("held connection: %v %v", resp, err)
		}
	}
	third := dial(t, addr)
	if !closedWithin(third, 2*time.Second) {
		t.Fatal("a connection beyond the cap stayed open")
	}
	if got := refused(); got != 1 {
		t.Fatalf("refused = %v, want 1", got)
	}
	_ = held[0].Close()
	// The server frees the slot once it notices the close: a new connection is
	// served from then on (those refused before count, and are closed).
	testenv.Eventually(t, testenv.Wait, "a connection served after a slot was freed", func() bool {
		c := dial(t, addr)
		defer c.Close()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return false
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		return err == nil && resp.StatusCode == 200
	})
}

func TestTimeouts(t *testing.T) {
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	addr, refused := serve(t, ok, Limits{MaxConnections: 1, IdleTimeout: 50 * time.Millisecond, ReadTimeout: time.Minute})
	for i := range 20 {
		c := dial(t, addr)
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("round %d: %v %v (refused %v)", i, resp, err, refused())
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = c.SetReadDeadline(time.Now().Add(testenv.Wait))
		if _, err := io.Copy(io.Discard, br); err != nil {
			t.Fatalf("round %d: the idle connection was not closed: %v", i, err)
		}
	}
	if n := refused(); n != 0 {
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
