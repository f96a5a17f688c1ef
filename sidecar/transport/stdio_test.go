package transport

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/library"
)

// stdioPeer talks newline-delimited JSON-RPC to a stdio server.
type stdioPeer struct {
	in    io.WriteCloser
	lines chan map[string]any
}

func startStdio(t *testing.T, s served, lib library.Library) (*running, *stdioPeer) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s.Extensions = onlyExtensions(s.Extensions)
	s.Logger = cmp.Or(s.Logger, quietLog)
	r := &running{}
	srv, err := resources.New(s.Config, lib, r.withTransport(Stdio(s.transportConfig(), inR, outW)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	p := &stdioPeer{in: inW, lines: make(chan map[string]any, 1000)}
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err == nil {
				p.lines <- m
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = inW.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("stdio Run did not return")
		}
		_ = outW.Close()
	})
	r.srv = srv
	return r, p
}

func (p *stdioPeer) send(t *testing.T, msg string) {
	t.Helper()
	if _, err := io.WriteString(p.in, msg+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (p *stdioPeer) await(t *testing.T, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-p.lines:
			if match(m) {
				return m
			}
		case <-deadline:
			t.Fatal("no matching stdio message within 5s")
		}
	}
}

func byID(id float64) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["id"] == id }
}

func updated(uri string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		params, _ := m["params"].(map[string]any)
		return m["method"] == "notifications/resources/updated" && params["uri"] == uri
	}
}

func TestStdioBothEras(t *testing.T) {
	lib := newLibrary(t, testPath)
	r, p := startStdio(t, served{Config: resources.Config{Notebooks: map[string]string{"work": testPath}}, Transport: Config{MaxRequestBytes: 2048}}, lib)

	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	p.await(t, byID(1))
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"notebook://work/cells/c1"}}`)
	p.await(t, byID(2))
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"resourceSubscriptions":["notebook://work"]}}}`)
	p.await(t, func(m map[string]any) bool { return m["method"] == "notifications/subscriptions/acknowledged" })
	testenv.Eventually(t, testenv.Wait, "the listen stream registered", func() bool { n, _, _ := stats(r); return n[era20260728] == 1 })

	r.srv.NotebookChanged(testPath, lib.edit(t, testPath, "source-c1"), noOrigin)
	// The session's and the listen stream's notifications come in either order.
	var n map[string]any
	seenCell := false
	p.await(t, func(m map[string]any) bool {
		switch {
		case updated("notebook://work/cells/c1")(m):
			seenCell = true
		case updated("notebook://work")(m):
			n = m
		}
		return seenCell && n != nil
	})
	if meta, _ := n["params"].(map[string]any)["_meta"].(map[string]any); meta["io.modelcontextprotocol/subscriptionId"] != 3.0 {
		t.Fatalf("listen notification not tagged with its subscription id: %v", n)
	}

	p.send(t, `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"notebook://work/cells/nope"}}`)
	resp := p.await(t, byID(4))
	if code := resp["error"].(map[string]any)["code"]; code != -32002.0 {
		t.Fatalf("unknown cell over stdio: %v", resp)
	}
	p.send(t, `{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"notebook://work/cells/c1"}}`)
	resp = p.await(t, byID(5))
	if !strings.Contains(resp["result"].(map[string]any)["contents"].([]any)[0].(map[string]any)["text"].(string), "hello, world") {
		t.Fatalf("read after change: %v", resp)
	}
	p.send(t, `not json`)
	if resp := p.await(t, func(m map[string]any) bool { return m["error"] != nil && m["id"] == nil }); resp["error"].(map[string]any)["code"] != -32700.0 {
		t.Fatalf("malformed line: %v", resp)
	}
	p.send(t, `{"jsonrpc":"2.0","id":6,"method":"ping","params":{"pad":"`+strings.Repeat("x", 4096)+`"}}`)
	if resp := p.await(t, func(m map[string]any) bool { return m["error"] != nil }); resp["error"].(map[string]any)["code"] != -32600.0 {
		t.Fatalf("oversize line: %v", resp)
	}
	p.send(t, `{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	p.await(t, byID(7))
}

func FuzzReadLine(f *testing.F) {
	for _, s := range []string{"a\nbb\n", "", "\n\n", strings.Repeat("x", 100) + "\ny"} {
		f.Add(s, 8)
	}
	f.Fuzz(func(t *testing.T, in string, limit int) {
		if limit < 1 || limit > 1<<16 {
			return
		}
		r := bufio.NewReaderSize(strings.NewReader(in), 16)
		var got []string
		for {
			line, tooLong, err := readLine(r, int64(limit))
			if tooLong {
				got = append(got, "<long>")
			} else if len(line) > 0 {
				got = append(got, strings.TrimSuffix(string(line), "\n"))
			}
			if err != nil {
				break
			}
		}
		var want []string
		parts := strings.SplitAfter(in, "\n")
		for _, p := range parts {
			if p == "" {
				continue
			}
			if len(p) > limit {
				want = append(want, "<long>")
			} else {
				want = append(want, strings.TrimSuffix(p, "\n"))
			}
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("readLine(%q, %d) = %q, want %q", in, limit, got, want)
		}
	})
}

func TestListenAcknowledgesListChanged(t *testing.T) {
	lib := newLibrary(t, testPath)
	_, p := startStdio(t, served{}, lib)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"resourcesListChanged":true}}}`)
	ack := p.await(t, func(m map[string]any) bool { return m["method"] == "notifications/subscriptions/acknowledged" })
	honoured, _ := ack["params"].(map[string]any)["notifications"].(map[string]any)
	if honoured["resourcesListChanged"] != true {
		t.Fatalf("acknowledgement leaves out resourcesListChanged: %v", ack)
	}
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"name":"use_notebook","arguments":{"notebook_name":"work","notebook_path":"`+testPath+`"}}}`)
	p.await(t, func(m map[string]any) bool { return m["method"] == "notifications/resources/list_changed" })
}

// TestStdioRefusesBatches checks that a JSON-RPC batch is answered as such, not as a
// parse error.
func TestStdioRefusesBatches(t *testing.T) {
	_, p := startStdio(t, served{}, newLibrary(t))
	p.send(t, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
	m := p.await(t, func(m map[string]any) bool { return m["error"] != nil })
	e, _ := m["error"].(map[string]any)
	if e["code"] != float64(-32600) || e["message"] != errBatch.Error.Message {
		t.Fatalf("answer to a batch: %v", m)
	}
}
