package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawConn opens a TCP connection to the sidecar's listener.
func (s *sidecar) rawConn() net.Conn {
	s.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// keepAliveGet sends GET path on c and reads its response, leaving c open.
func keepAliveGet(t *testing.T, c net.Conn, path string) int {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: sidecar\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	ne, ok := err.(net.Error)
	return !ok || !ne.Timeout()
}

// TestConnectionLimits runs the binary with small connection limits: idle keep-alive
// connections, slow headers and slow bodies are closed, connections beyond
// server.max_connections are closed at once and counted, and live streams of both
// eras outlive every timeout and still deliver.
func TestConnectionLimits(t *testing.T) {
	const maxConns = 20
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_MAX_CONNECTIONS", "20")
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_IDLE_TIMEOUT", "2s")
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_READ_TIMEOUT", "1s")
	steps := session(t)
	dir := t.TempDir()
	w := startWriter(t, filepath.Join(dir, ".jupyter_ystore.db"))
	for _, s := range steps[:preloaded] {
		w.write(s.update)
	}
	sc := startSidecar(t, dir, options{debounce: -1})
	sc.waitHTTP("/readyz", http.StatusOK, 10*time.Second)
	http.DefaultClient.CloseIdleConnections()

	t.Run("idle connections and the cap", func(t *testing.T) {
		held := make([]net.Conn, maxConns)
		for i := range held {
			held[i] = sc.rawConn()
			if code := keepAliveGet(t, held[i], "/healthz"); code != http.StatusOK {
				t.Fatalf("connection %d: /healthz %d", i, code)
			}
		}
		if !closedWithin(sc.rawConn(), time.Second) {
			t.Fatalf("connection %d stayed open beyond server.max_connections %d", maxConns+1, maxConns)
		}
		for i, c := range held {
			if !closedWithin(c, 4*time.Second) {
				t.Fatalf("idle connection %d still open 4 s after its response (idle_timeout 2s)", i)
			}
		}
		if got := sc.metric("jupyter_mcp_sidecar_http_connections_refused_total"); got != 1 {
			t.Fatalf("connections refused = %v, want 1", got)
		}
		http.DefaultClient.CloseIdleConnections()
	})

	t.Run("slow header and slow body are cut", func(t *testing.T) {
		for name, partial := range map[string]string{
			"header": "GET /healthz HTTP/1.1\r\nHost: sidecar\r\n",
			"body": "POST /mcp HTTP/1.1\r\nHost: sidecar\r\nAuthorization: Bearer " + token +
				"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":",
		} {
			c := sc.rawConn()
			if _, err := io.WriteString(c, partial); err != nil {
				t.Fatal(err)
			}
			if !closedWithin(c, 3*time.Second) {
				t.Fatalf("a slow %s held its connection 3 s (read_timeout 1s)", name)
			}
		}
	})

	t.Run("streams outlive the timeouts", func(t *testing.T) {
		cs := []mcpClient{dialRaw(t, sc.mcpURL()), dialGo(t, sc.mcpURL(), false), dialGo(t, sc.mcpURL(), true)}
		for _, c := range cs {
			c.bind(nbName, nbPath)
			c.subscribe(nbURI)
		}
		time.Sleep(3500 * time.Millisecond) // past idle_timeout and read_timeout
		for _, c := range cs {
			drain(c, 100*time.Millisecond)
		}
		i, _ := changedCell(steps, preloaded)
		for _, s := range steps[preloaded : i+1] {
			w.write(s.update)
		}
		for _, c := range cs {
			await(t, c, delivery, nbURI)
		}
	})
}
