package sidecartest

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// TSClient is one official TypeScript SDK client driven by testdata/mcpclient: sdk1.mjs
// (@modelcontextprotocol/sdk 1.32, 2025-11-25) or sdk2.mjs (@modelcontextprotocol/client
// 2.4, 2026-07-28 with subscriptions/listen).
type TSClient struct {
	t      testing.TB
	script string
	child  *testenv.Child
	notes  chan string
	seq    atomic.Int64

	mu      sync.Mutex
	replies map[int64]chan tsEvent
	heard   map[string]string // the version the last notification of each URI carried
}

type tsEvent struct {
	Event           string          `json:"event"`
	ID              *int64          `json:"id"`
	URI             string          `json:"uri"`
	Version         string          `json:"version"`
	ProtocolVersion string          `json:"protocolVersion"`
	Result          json.RawMessage `json:"result"`
	Error           string          `json:"error"`
}

// dialTS starts both TypeScript clients. Without their npm packages the test skips
// them, except on CI, where their absence is a failure.
func dialTS(t *testing.T, url string) []MCPClient { return DialTSAs(t, url, Token) }

// DialTSAs starts both TypeScript clients with the given bearer token.
func DialTSAs(t *testing.T, url, tok string) []MCPClient {
	t.Helper()
	dir := filepath.Join(RepoRoot, "testdata", "mcpclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("testdata/mcpclient/node_modules missing on CI: run npm ci there")
		}
		t.Log("testdata/mcpclient/node_modules missing: TypeScript clients not run")
		return nil
	}
	return []MCPClient{StartTS(t, dir, "sdk1.mjs", url, "2025-11-25", tok), StartTS(t, dir, "sdk2.mjs", url, "2026-07-28", tok)}
}

// StartTS runs script of dir (testdata/mcpclient) as a client of url with the bearer
// token tok and waits until it is ready on protocol version era.
func StartTS(t *testing.T, dir, script, url, era, tok string) *TSClient {
	t.Helper()
	c, out := startNode(t, dir, script, 100000, "--url", url, "--token", tok)
	ready := make(chan tsEvent, 1)
	go c.readLoop(out, ready)
	select {
	case ev := <-ready:
		if ev.Event != "ready" || ev.ProtocolVersion != era {
			t.Fatalf("%s: %+v, want ready on %s", script, ev, era)
		}
	case <-time.After(testenv.Wait):
		t.Fatalf("%s did not connect", script)
	}
	return c
}

// startNode starts script of dir in Node.js with args, its stderr the test's, stopped
// when the test ends; notes is the capacity of its notification channel. It returns
// the client and the script's stdout.
func startNode(t *testing.T, dir, script string, notes int, args ...string) (*TSClient, io.Reader) {
	t.Helper()
	c := &TSClient{t: t, script: script, notes: make(chan string, notes), replies: map[int64]chan tsEvent{}, heard: map[string]string{}}
	c.child = testenv.StartChild(t, exec.Command("node", append([]string{filepath.Join(dir, script)}, args...)...), testenv.AnyExit)
	t.Cleanup(c.Close)
	return c, c.child.Out
}

func (c *TSClient) readLoop(out io.Reader, ready chan<- tsEvent) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	first := true
	for sc.Scan() {
		var ev tsEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue
		}
		switch {
		case ev.Event == "updated": // also before ready: a subscription may hear a change at once
			c.mu.Lock()
			c.heard[ev.URI] = ev.Version
			c.mu.Unlock()
			c.notes <- ev.URI
		case first:
			first = false
			ready <- ev
		case ev.ID != nil:
			c.mu.Lock()
			ch := c.replies[*ev.ID]
			delete(c.replies, *ev.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- ev
			}
		}
	}
}

// Do sends one command and waits for its result.
func (c *TSClient) Do(cmd map[string]any) json.RawMessage {
	c.t.Helper()
	id := c.seq.Add(1)
	cmd["id"] = id
	ch := make(chan tsEvent, 1)
	c.mu.Lock()
	c.replies[id] = ch
	c.mu.Unlock()
	line, _ := json.Marshal(cmd)
	if _, err := c.child.In.Write(append(line, '\n')); err != nil {
		c.t.Fatalf("%s: %v", c.script, err)
	}
	select {
	case ev := <-ch:
		if ev.Event == "error" {
			c.t.Fatalf("%s %v: %s", c.script, cmd["op"], ev.Error)
		}
		return ev.Result
	case <-time.After(testenv.Wait):
		c.t.Fatalf("%s %v: no answer", c.script, cmd["op"])
	}
	return nil
}

// Name is the client's kind and era.
func (c *TSClient) Name() string { return c.script }

// Bind binds name to the notebook at path (use_notebook).
func (c *TSClient) Bind(name, path string) {
	var res struct {
		IsError bool `json:"isError"`
	}
	raw := c.Do(map[string]any{"op": "call", "name": "use_notebook", "arguments": map[string]any{"notebook_name": name, "notebook_path": path}})
	if err := json.Unmarshal(raw, &res); err != nil || res.IsError {
		c.t.Fatalf("%s use_notebook: %s", c.script, raw)
	}
}

// Subscribe subscribes to each uri.
func (c *TSClient) Subscribe(uris ...string) {
	for _, u := range uris {
		c.Do(map[string]any{"op": "subscribe", "uri": u})
	}
}

// Unsubscribe ends the subscriptions to each uri.
func (c *TSClient) Unsubscribe(uris ...string) {
	for _, u := range uris {
		c.Do(map[string]any{"op": "unsubscribe", "uri": u})
	}
}

// Read returns the text of uri (resources/read).
func (c *TSClient) Read(uri string) string {
	var res struct {
		Contents []struct {
			Text string `json:"text"`
		} `json:"contents"`
	}
	raw := c.Do(map[string]any{"op": "read", "uri": uri})
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Contents) != 1 {
		c.t.Fatalf("%s read %s: %s", c.script, uri, raw)
	}
	return res.Contents[0].Text
}

// ReadVersioned returns the text of uri and the version in its _meta ("" for none).
func (c *TSClient) ReadVersioned(uri string) (string, string) {
	var res struct {
		Contents []struct {
			Text string         `json:"text"`
			Meta map[string]any `json:"_meta"`
		} `json:"contents"`
	}
	raw := c.Do(map[string]any{"op": "read", "uri": uri})
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Contents) != 1 {
		c.t.Fatalf("%s read %s: %s", c.script, uri, raw)
	}
	v, _ := res.Contents[0].Meta[VersionKey].(string)
	return res.Contents[0].Text, v
}

// Heard returns the version the last notification of uri carried ("" for none).
func (c *TSClient) Heard(uri string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.heard[uri]
}

// Updates are the URIs the server says were updated.
func (c *TSClient) Updates() <-chan string { return c.notes }

// Close ends the session.
func (c *TSClient) Close() {
	_, _ = c.child.In.Write([]byte(`{"op":"close"}` + "\n")) // refused once closed
	_ = c.child.Stop()
}
