package mcp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/publishers"
)

// tryFeedStream opens a stream of the feed on addr with the token and reads until its
// hello: nil once it has, else why not. The stream stays open until the test ends.
func tryFeedStream(t *testing.T, addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, feedRequest(feedToken, "")); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(testenv.Wait))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.TrimSpace(line) == "event: "+publishers.SSEHello {
			return nil
		}
	}
}

// TestFeedAnonymousShare (issue 39, item 10): clients without the token cannot starve
// the feed's consumers. A flooder keeps as many connections open to the feed as it
// can, sending nothing, half a request or a header byte by byte, and opening a new one
// each time the sidecar closes one, while the token holder opens 60 streams
// (max_consumers is 64): all 60 are served. The anonymous hold at most their budget
// (conns.AnonymousShare of max_connections: 16) between them, the sidecar closing the
// oldest idle one for each new connection, counted as reason anonymous.
func TestFeedAnonymousShare(t *testing.T) {
	const consumers = 60
	for _, tt := range []struct {
		name, send string
		trickle    time.Duration
		flooders   int // a trickled header's connection is idle after 100 ms: fewer, or a stream takes seconds
	}{
		{"silent", "", 0, 300},
		{"half a header", "GET /events HTTP/1.1\r\nHost: feed\r\n", 0, 300},
		{"a header trickled byte by byte", "GET /events HTTP/1.1\r\nX-Slow: ", 5 * time.Millisecond, 64},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := testenv.FreeAddr(t)
			sc, _ := startEventsSidecar(t, feedPublisher(addr, ""), sidecartest.NotebookRooms(1), sidecartest.LoadEventFixture(t))
			sc.WaitHTTP("/readyz", http.StatusOK)
			opened := testenv.Flood(t, addr, tt.flooders, tt.send, tt.trickle)
			served := 0
			var failures []string
			for i := range consumers {
				if err := tryFeedStream(t, addr); err != nil {
					failures = append(failures, fmt.Sprintf("stream %d: %v", i, err))
					continue
				}
				served++
			}
			t.Logf("flood: %d connections opened; the token holder got %d/%d streams", opened(), served, consumers)
			if served != consumers {
				t.Fatalf("the token holder got %d of %d streams under the flood: %s", served, consumers, strings.Join(failures, "; "))
			}
			if n := sc.Metric("jupyter_mcp_sidecar_http_connections_refused_total", "listener", "sse", "reason", "anonymous"); n == 0 {
				t.Error("no anonymous connection counted as closed for the flood")
			}
			if n := sc.Metric("jupyter_mcp_sidecar_publisher_sse_consumers"); n != consumers {
				t.Errorf("sse_consumers = %v, want %d", n, consumers)
			}
		})
	}
}
