package sidecartest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// rawClient speaks 2025-11-25 streamable HTTP with net/http alone: JSON-RPC over POST
// and the session's standalone GET stream read line by line. It shows what is on the
// wire, independent of any SDK.
type rawClient struct {
	t       testing.TB
	url     string
	Session string
	id      atomic.Int64
	notes   chan string
	Stream  io.Closer
}

// DialRaw opens a raw client's session at url with the test token.
func DialRaw(t testing.TB, url string) *rawClient {
	t.Helper()
	r := &rawClient{t: t, url: url, notes: make(chan string, 100000)}
	res, hdr := r.Call("initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "raw-e2e", "version": "1"},
	})
	if v, _ := res["protocolVersion"].(string); v != "2025-11-25" {
		t.Fatalf("raw client negotiated %q", v)
	}
	r.Session = hdr.Get("Mcp-Session-Id")
	if r.Session == "" {
		t.Fatal("no Mcp-Session-Id")
	}
	r.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	r.headers(req)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %s", resp.Status)
	}
	r.Stream = resp.Body
	go r.readStream(resp.Body)
	t.Cleanup(r.Close)
	return r
}

func (r *rawClient) headers(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+Token)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if r.Session != "" {
		req.Header.Set("Mcp-Session-Id", r.Session)
	}
}

// readStream parses the SSE stream: every data line is one JSON-RPC message.
func (r *rawClient) readStream(body io.Reader) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				URI string `json:"uri"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &msg) == nil && msg.Method == "notifications/resources/updated" {
			r.notes <- msg.Params.URI
		}
	}
}

// post sends one JSON-RPC message and returns the HTTP response.
func (r *rawClient) post(msg map[string]any) *http.Response {
	r.t.Helper()
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(body))
	r.headers(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

// Call sends a request and returns its result; notifications carried on the POST's
// own SSE response are recorded too.
func (r *rawClient) Call(method string, params any) (map[string]any, http.Header) {
	r.t.Helper()
	id := r.id.Add(1)
	resp := r.post(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("%s: %s %s", method, resp.Status, raw)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		data := line
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			var ok bool
			if data, ok = strings.CutPrefix(line, "data:"); !ok {
				continue
			}
		}
		var msg struct {
			ID     *int64          `json:"id"`
			Method string          `json:"method"`
			Result map[string]any  `json:"result"`
			Error  json.RawMessage `json:"error"`
			Params struct {
				URI string `json:"uri"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &msg) != nil {
			continue
		}
		switch {
		case msg.Method == "notifications/resources/updated":
			r.notes <- msg.Params.URI
		case msg.ID != nil && *msg.ID == id:
			if msg.Error != nil {
				r.t.Fatalf("%s: %s", method, msg.Error)
			}
			return msg.Result, resp.Header
		}
	}
	r.t.Fatalf("%s: no response in %q", method, raw)
	return nil, nil
}

// Name is the client's kind and era.
func (r *rawClient) Name() string { return "raw-http/2025-11-25" }

// Bind binds name to the notebook at path (use_notebook).
func (r *rawClient) Bind(name, path string) {
	res, _ := r.Call("tools/call", map[string]any{"name": "use_notebook", "arguments": map[string]any{"notebook_name": name, "notebook_path": path}})
	if isErr, _ := res["isError"].(bool); isErr {
		r.t.Fatalf("use_notebook: %v", res)
	}
}

// Subscribe subscribes to each uri.
func (r *rawClient) Subscribe(uris ...string) {
	for _, u := range uris {
		r.Call("resources/subscribe", map[string]any{"uri": u})
	}
}

// Unsubscribe ends the subscriptions to each uri.
func (r *rawClient) Unsubscribe(uris ...string) {
	for _, u := range uris {
		r.Call("resources/unsubscribe", map[string]any{"uri": u})
	}
}

// Read returns the text of uri (resources/read).
func (r *rawClient) Read(uri string) string {
	res, _ := r.Call("resources/read", map[string]any{"uri": uri})
	contents, _ := res["contents"].([]any)
	if len(contents) != 1 {
		r.t.Fatalf("read %s: %v", uri, res)
	}
	c, _ := contents[0].(map[string]any)
	text, _ := c["text"].(string)
	return text
}

// Updates are the URIs the server says were updated.
func (r *rawClient) Updates() <-chan string { return r.notes }

// Close ends the session.
func (r *rawClient) Close() {
	if r.Stream != nil {
		_ = r.Stream.Close()
		r.Stream = nil
		req, _ := http.NewRequest(http.MethodDelete, r.url, nil)
		r.headers(req)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
}

// RPCStatusAs is rpcStatus with the given Authorization header ("" for none).
func RPCStatusAs(t *testing.T, url, session, authorization string, msg map[string]any) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		var m struct {
			ID    any            `json:"id"`
			Error map[string]any `json:"error"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "data:"))), &m) == nil && m.ID != nil {
			return resp.StatusCode, m.Error
		}
	}
	return resp.StatusCode, nil
}

// CallTool calls a tool with the raw client and returns its result.
func (r *rawClient) CallTool(name string, args map[string]any) (text string, isError bool) {
	r.t.Helper()
	res, _ := r.Call("tools/call", map[string]any{"name": name, "arguments": args})
	isError, _ = res["isError"].(bool)
	content, _ := res["content"].([]any)
	if len(content) > 0 {
		c, _ := content[0].(map[string]any)
		text, _ = c["text"].(string)
	}
	return text, isError
}
