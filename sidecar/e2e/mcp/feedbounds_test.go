package mcp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/publishers"
)

const feedToken = "e2e-feed-token-0123456789"

// feedPublisher is the publisher block of an sse feed on addr with more options.
func feedPublisher(addr, more string) sidecartest.Consumer {
	return sidecartest.Consumer{Publisher: fmt.Sprintf(`{name: sse, options: {listen: %q, token: %q%s}}`, addr, feedToken, more)}
}

// feedRequest is a GET of the feed, with the token unless tok is "", resuming after
// last unless it is "".
func feedRequest(tok, last string) string {
	req := "GET /events HTTP/1.1\r\nHost: feed\r\n"
	if tok != "" {
		req += "Authorization: Bearer " + tok + "\r\n"
	}
	if last != "" {
		req += "Last-Event-ID: " + last + "\r\n"
	}
	return req + "\r\n"
}

// feedStream opens a stream of the feed on addr resuming after last, reads its answer
// and then its lines until one for which stop is true; it returns the connection,
// that line, and the reader of the rest of the stream.
func feedStream(t *testing.T, addr, last string, stop func(line string) bool) (net.Conn, string, *bufio.Reader) {
	t.Helper()
	c := rawConn(t, addr)
	_ = c.(*net.TCPConn).SetReadBuffer(64 << 10) // no receive-window autotuning: the kernel holds little
	if _, err := io.WriteString(c, feedRequest(feedToken, last)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(testenv.Wait))
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("feed stream: %v, %v", resp, err)
	}
	r := bufio.NewReaderSize(resp.Body, 4096)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("feed stream: %v", err)
		}
		if line = strings.TrimSuffix(line, "\n"); stop(line) {
			return c, line, r
		}
	}
}

// TestFeedListenerFlood: connections to the sse feed without its token cannot take
// the process's file descriptors. With the sidecar's descriptor limit lowered below
// the flood, of a thousand connections (half send a request without the token, half
// send nothing) the feed holds at most its max_connections, closing the rest (a
// refused request with its answer, beyond the cap at once, counted); /healthz and
// /readyz answer meanwhile; the silent ones are closed after read_timeout; and a
// consumer with the token is served.
func TestFeedListenerFlood(t *testing.T) {
	const nofile, flood = 512, 1000
	const maxConns = 64 + publishers.DefaultSSEHandshakes // the default: max_consumers + 64
	var own unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &own); err != nil || own.Cur < flood+256 {
		t.Skipf("the test process may open %d files, fewer than the flood's %d and a margin (%v)", own.Cur, flood, err)
	}
	addr := testenv.FreeAddr(t)
	sc, _ := startEventsSidecar(t, feedPublisher(addr, ", read_timeout: 3s"), sidecartest.NotebookRooms(1), sidecartest.LoadEventFixture(t))
	sc.WaitHTTP("/readyz", http.StatusOK)
	if err := unix.Prlimit(sc.Cmd.Process.Pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: nofile, Max: nofile}, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}

	var closed atomic.Int64 // flood connections the sidecar closed
	for i := range flood {
		c := rawConn(t, addr)
		if i%2 == 0 {
			if _, err := io.WriteString(c, feedRequest("", "")); err != nil {
				t.Fatal(err)
			}
		}
		go func() {
			_, _ = io.Copy(io.Discard, c) // until the sidecar closes it (or the test ends)
			closed.Add(1)
		}()
	}
	testenv.Eventually(t, testenv.Wait, fmt.Sprintf("the feed holding at most %d of %d flood connections", maxConns, flood), func() bool {
		return flood-closed.Load() <= maxConns
	}, func() string { return fmt.Sprintf("%d open", flood-closed.Load()) })
	// The flood's held connections are open: the sidecar answers its probes (a failure
	// bound; a process out of descriptors never accepts them).
	probe := http.Client{Timeout: 10 * time.Second}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := probe.Get(sc.URL + path)
		if err != nil {
			t.Fatalf("%s under a flood of %d connections to the feed (the sidecar may open %d files): %v", path, flood, nofile, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s under the flood: %s", path, resp.Status)
		}
	}
	if n := sc.Metric("jupyter_mcp_sidecar_http_connections_refused_total", "listener", "sse"); n == 0 {
		t.Error("no connection beyond the feed's max_connections counted")
	}
	testenv.Eventually(t, testenv.Wait, "every flood connection closed (read_timeout 3s)", func() bool {
		return closed.Load() == flood
	})
	if _, line, _ := feedStream(t, addr, "", func(l string) bool { return strings.HasPrefix(l, "event: ") }); line != "event: "+publishers.SSEHello {
		t.Fatalf("a consumer with the token after the flood: %q, want the hello", line)
	}
}

// bigNotebook is an nbformat 4.5 notebook of n code cells whose ids are about 60
// characters long, all named from prefix.
func bigNotebook(prefix string, n int) []byte {
	type cell struct {
		ID             string         `json:"id"`
		CellType       string         `json:"cell_type"`
		Source         string         `json:"source"`
		Metadata       map[string]any `json:"metadata"`
		Outputs        []any          `json:"outputs"`
		ExecutionCount *int           `json:"execution_count"`
	}
	cells := make([]cell, n)
	for i := range cells {
		cells[i] = cell{ID: fmt.Sprintf("%s-%056d", prefix, i), CellType: "code", Metadata: map[string]any{}, Outputs: []any{}}
	}
	b, _ := json.Marshal(map[string]any{"nbformat": 4, "nbformat_minor": 5, "metadata": map[string]any{}, "cells": cells})
	return b
}

// TestFeedStalledConsumersMemory: consumers that resume from the start of the sse
// feed's buffer (about 8 MB of events here) and then stop reading cost the sidecar
// little memory: its RSS grows by less than the buffer over all of them, where each
// consumer used to hold the backlog a few times over.
func TestFeedStalledConsumersMemory(t *testing.T) {
	if sidecartest.RaceBuild {
		t.Skip("a memory property: checked without -race")
	}
	const notebooks, cellsEach, stalled = 64, 2100, 32
	addr := testenv.FreeAddr(t)
	nbs := sidecartest.NotebookRooms(notebooks)
	dir := t.TempDir()
	sc, _ := sidecartest.StartEventsSidecarIn(t, dir, feedPublisher(addr, ", buffer_bytes: 16777216, max_consumers: 64, write_timeout: 5m"), nbs, sidecartest.LoadEventFixture(t), nil)
	// Every notebook's file rewritten with its cells and as many more: one event each,
	// of about 130 kB (the added cells' ids), held by the feed's buffer.
	for i, nb := range nbs {
		abs := filepath.Join(dir, nb.Path)
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		// A new file renamed over the old one: the watcher never reads half of it.
		if err := os.WriteFile(abs+".tmp", bigNotebook(fmt.Sprintf("nb%02d", i), cellsEach), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(abs+".tmp", abs); err != nil {
			t.Fatal(err)
		}
	}
	// A consumer reading everything from the start: the buffer holds the load's events
	// and the files' (a load's and a file's event of one notebook may be one).
	var epoch string
	testenv.Eventually(t, testenv.Wait, "the hello's id", func() bool {
		c, line, _ := feedStream(t, addr, "", func(l string) bool { return strings.HasPrefix(l, "id: ") })
		c.Close()
		epoch, _, _ = strings.Cut(strings.TrimPrefix(line, "id: "), "-")
		return epoch != ""
	})
	start := epoch + "-0"
	held, events, big := 0, 0, 0
	_, _, r := feedStream(t, addr, start, func(l string) bool { return l == "event: "+publishers.SSEHello })
	for kind := ""; big < notebooks; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the buffer after %d events: %v", events, err)
		}
		if k, ok := strings.CutPrefix(line, "event: "); ok {
			kind = strings.TrimSpace(k)
		} else if data, ok := strings.CutPrefix(line, "data: "); ok && kind == publishers.SSEChange {
			events++
			held += len(data) - 1
			if strings.Contains(data, fmt.Sprintf("-%056d", cellsEach-1)) { // a file's event: its last cell added
				big++
			}
		}
	}
	if held < 8<<20 {
		t.Fatalf("the buffer holds %.1f MB; the test wants 8 MB or more", float64(held)/(1<<20))
	}
	pid := sc.Cmd.Process.Pid
	before := testenv.ProcStatus(t, pid, "VmRSS")
	for range stalled {
		// Resumed from the start; reads until the first event of the backlog (the
		// barrier: its stream is writing the backlog), then nothing.
		feedStream(t, addr, start, func(l string) bool { return l == "event: "+publishers.SSEChange })
	}
	testenv.Eventually(t, testenv.Wait, "the stalled consumers and the reading one connected, no other", func() bool {
		return sc.Metric("jupyter_mcp_sidecar_publisher_sse_consumers") == stalled+1
	})
	after := testenv.ProcStatus(t, pid, "VmRSS")
	t.Logf("%d events, %.1f MB buffered; RSS %.1f MB, %.1f MB with %d consumers stalled on the buffer",
		events, float64(held)/(1<<20), before, after, stalled)
	// Per consumer: its goroutine, its connection's buffers and at most the one event it
	// is writing (130 kB), all of them far under one buffer.
	if grown := after - before; grown > float64(held)/1e6 {
		t.Errorf("RSS grew %.1f MB with %d consumers stalled on a %.1f MB buffer; want under one buffer in all",
			grown, stalled, float64(held)/(1<<20))
	}
}
