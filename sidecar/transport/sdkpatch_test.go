package transport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

// sdkAnswer is the response mcp-go v1.2.1 gives a resources/read of uri: for a
// 2026-07-28 request, its result carries resultType, serverInfo and the one cache
// hint the SDK applies to every read (unless hints is false); failed, the SDK's
// -32603.
func sdkAnswer(id any, modern, hints, failed bool, text string) any {
	if failed {
		return mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id),
			Error: mcp.JSONRPCErrorDetails{Code: mcp.INTERNAL_ERROR, Message: "read failed"}}
	}
	res := mcp.ReadResourceResult{Contents: []mcp.ResourceContents{mcp.TextResourceContents{
		Meta: map[string]any{"cacheScope": "private", "ttlMs": 60000}, URI: "notebook://work", MIMEType: "application/json", Text: text,
	}}}
	if modern {
		res.ResultType = mcp.ResultTypeComplete
		res.Meta = &mcp.Meta{AdditionalFields: map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "s", "version": "1"}}}
		if hints {
			res.SetCacheHints(5000, mcp.CacheScopePrivate)
		}
	}
	return mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Result: res}
}

// sdkHandler answers the way the SDK does, after recording the outcome in o the way
// the surface's handler does: a JSON body through json.Encoder, or an SSE body
// (after a notification event when notify), in writes of chunk bytes (0: one).
type sdkHandler struct {
	o       *resources.ReadOutcome
	outcome resources.ReadOutcome
	resp    any
	raw     []byte // written instead of resp's JSON body when set
	sse     bool
	notify  bool
	chunk   int
}

func (h sdkHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	*h.o = h.outcome
	if h.raw != nil {
		w.Header().Set("Content-Type", "application/json")
		h.write(w, h.raw)
		return
	}
	if !h.sse {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1")
		w.WriteHeader(http.StatusOK) // the SDK's status for its -32603
		if h.chunk == 0 {
			_ = json.NewEncoder(w).Encode(h.resp)
			return
		}
		var b bytes.Buffer
		_ = json.NewEncoder(&b).Encode(h.resp)
		h.write(w, b.Bytes())
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if h.notify {
		h.event(w, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
			Method: "notifications/message", Params: mcp.NotificationParams{AdditionalFields: map[string]any{"data": `"result":{"x`, "result": 1}}}})
	}
	h.event(w, h.resp)
}

func (h sdkHandler) event(w http.ResponseWriter, v any) {
	data, _ := json.Marshal(v)
	h.write(w, fmt.Appendf(nil, "event: message\ndata: %s\n\n", data))
	w.(http.Flusher).Flush()
}

func (h sdkHandler) write(w http.ResponseWriter, b []byte) {
	for h.chunk > 0 && len(b) > h.chunk {
		_, _ = w.Write(b[:h.chunk])
		b = b[h.chunk:]
	}
	_, _ = w.Write(b)
}

// body is what h writes, unpatched, and its Content-Type.
func (h sdkHandler) body(t *testing.T) ([]byte, string, int) {
	h.o = &resources.ReadOutcome{}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil))
	return rec.Body.Bytes(), rec.Header().Get("Content-Type"), rec.Code
}

// TestReadPatchStreamed: the response serveRead streams is, decoded, the one the
// whole-body patch (patchHTTP, what every read went through before) gives, for
// JSON and SSE bodies, both eras, successes and errors, ids that spell "result",
// a body written a byte at a time and in one write; one that needs no patch is
// passed byte for byte, and no result member appears twice.
func TestReadPatchStreamed(t *testing.T) {
	outcomes := []struct {
		name    string
		outcome resources.ReadOutcome
		hints   bool // the SDK's result has its cache hints
		failed  bool // the SDK answered -32603
	}{
		{"legacy success", resources.ReadOutcome{URI: "notebook://work", TTL: time.Minute}, false, false},
		{"modern success", resources.ReadOutcome{URI: "notebook://work", TTL: time.Minute, Modern: true}, true, false},
		{"modern success without the SDK's hints", resources.ReadOutcome{URI: "notebook://work", TTL: 1500 * time.Millisecond, Modern: true}, false, false},
		{"not read", resources.ReadOutcome{}, true, false},
		{"legacy not found", resources.ReadOutcome{URI: "notebook://nope", Code: mcp.RESOURCE_NOT_FOUND, Message: "no notebook"}, false, true},
		{"modern not found", resources.ReadOutcome{URI: "notebook://nope", Code: mcp.INVALID_PARAMS, Message: "no notebook", Modern: true}, true, true},
		{"modern withheld", resources.ReadOutcome{URI: "notebook://work", Code: codeWithheldForTest, Message: "withheld", Modern: true}, true, true},
		{"modern internal", resources.ReadOutcome{URI: "notebook://work", Code: mcp.INTERNAL_ERROR, Message: "boom", Modern: true}, true, true},
	}
	ids := []any{7, "result", `"result":{"x`, `a\"b"result":{`}
	text := `{"cells":[{"source":"\"result\":{\"ttlMs\":1}","id":"c1"}],"result":{}}`
	for _, oc := range outcomes {
		for _, id := range ids {
			for _, body := range []struct {
				sse, notify bool
			}{{false, false}, {true, false}, {true, true}} {
				for _, chunk := range []int{1, 5, 0} {
					name := fmt.Sprintf("%s/id=%v/sse=%v,notify=%v/chunk=%d", oc.name, id, body.sse, body.notify, chunk)
					t.Run(name, func(t *testing.T) {
						o := &resources.ReadOutcome{}
						h := sdkHandler{o: o, outcome: oc.outcome, resp: sdkAnswer(id, oc.outcome.Modern || oc.outcome.URI == "", oc.hints, oc.failed, text),
							sse: body.sse, notify: body.notify, chunk: chunk}
						raw, ct, status := h.body(t)
						want, wantStatus, err := patchHTTP(raw, ct, status, &oc.outcome)
						if err != nil {
							t.Fatal(err)
						}
						var logs testenv.LockedBuffer
						rec := httptest.NewRecorder()
						serveRead(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil), o, h, 4096, slog.New(slog.NewTextHandler(&logs, nil)))
						got := rec.Body.Bytes()
						if rec.Code != wantStatus || rec.Header().Get("Content-Type") != ct || rec.Header().Get("Content-Length") != "" {
							t.Errorf("status %d, Content-Type %q, Content-Length %q; want %d, %q, none", rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Content-Length"), wantStatus, ct)
						}
						if logs.String() != "" {
							t.Errorf("logged %s", logs.String())
						}
						if bytes.Equal(want, raw) && !bytes.Equal(got, raw) {
							t.Errorf("a body needing no patch is changed:\n%s\nwant\n%s", got, raw)
						}
						sameJSONBodies(t, got, want, body.sse)
					})
				}
			}
		}
	}
}

// codeWithheldForTest is the code resources answers a withheld read with (its codeWithheld).
const codeWithheldForTest = -32010

// sameJSONBodies fails unless got and want are the same body up to JSON key order
// (each data line of an SSE body) and got has no object with a key twice.
func sameJSONBodies(t *testing.T, got, want []byte, sse bool) {
	t.Helper()
	gotLines, wantLines := []string{string(got)}, []string{string(want)}
	if sse {
		gotLines, wantLines = strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	}
	if len(gotLines) != len(wantLines) {
		t.Fatalf("body\n%s\nwant\n%s", got, want)
	}
	for i := range gotLines {
		g, gok := strings.CutPrefix(gotLines[i], "data: ")
		w, wok := strings.CutPrefix(wantLines[i], "data: ")
		if !sse {
			g, w, gok, wok = gotLines[i], wantLines[i], true, true
		}
		if gok != wok || (!gok && g != w) {
			t.Fatalf("line %d: %q, want %q", i, gotLines[i], wantLines[i])
		}
		if !gok {
			continue
		}
		var gv, wv any
		if err := json.Unmarshal([]byte(g), &gv); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, g)
		}
		_ = json.Unmarshal([]byte(w), &wv)
		if !reflect.DeepEqual(gv, wv) {
			t.Errorf("line %d:\n%s\nwant (up to key order)\n%s", i, g, w)
		}
		if k := duplicateKey(json.NewDecoder(strings.NewReader(g))); k != "" {
			t.Errorf("line %d: key %q twice in an object: %s", i, k, g)
		}
	}
}

// duplicateKey is a key that appears twice in one object of the JSON value dec reads.
func duplicateKey(dec *json.Decoder) string {
	tok, err := dec.Token()
	if err != nil {
		return ""
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, _ := dec.Token()
			if seen[k.(string)] {
				return k.(string)
			}
			seen[k.(string)] = true
			if d := duplicateKey(dec); d != "" {
				return d
			}
		}
		_, _ = dec.Token()
	case json.Delim('['):
		for dec.More() {
			if d := duplicateKey(dec); d != "" {
				return d
			}
		}
		_, _ = dec.Token()
	}
	return ""
}

// TestReadPatchFallsBack: a success whose head is not found within the limit
// (a result member before contents over it, in small writes), or that has no
// contents, is patched whole, as before, and logged; a head over the limit in one
// write costs no copy and is streamed.
func TestReadPatchFallsBack(t *testing.T) {
	big := mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(1), Result: map[string]any{
		"_meta": map[string]any{"pad": strings.Repeat("x", readHeadBytes+8192)}, "contents": []any{}}}
	small := mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(1), Result: map[string]any{"x": 1}}
	cases := []struct {
		name  string
		resp  any
		raw   []byte
		sse   bool
		chunk int
		log   string // "": not buffered whole
	}{
		{"head over the limit", big, nil, false, 4096, "no result's contents within the limit"},
		{"head over the limit, SSE", big, nil, true, 4096, "no result's contents within the limit"},
		{"head over the limit in one write", big, nil, false, 0, ""},
		{"head over the limit in one write, SSE", big, nil, true, 0, ""},
		{"no contents", small, nil, false, 0, "no result's contents"},
		{"no contents, SSE", small, nil, true, 1, "no result's contents"},
		{"error answer to a success", sdkAnswer(1, true, true, true, ""), nil, false, 0, "no result's contents"},
		{"body ends in the head", nil, []byte(`{"jsonrpc":"2.0","id":1,"result":{"_meta":{}`), false, 3, bodyEnded},
	}
	outcome := resources.ReadOutcome{URI: "notebook://work", TTL: time.Second, Modern: true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := &resources.ReadOutcome{}
			h := sdkHandler{o: o, outcome: outcome, resp: c.resp, raw: c.raw, sse: c.sse, chunk: c.chunk}
			raw, ct, status := h.body(t)
			want, _, err := patchHTTP(raw, ct, status, &outcome)
			if err != nil && c.log == "" {
				t.Fatal(err)
			}
			var logs testenv.LockedBuffer
			rec := httptest.NewRecorder()
			serveRead(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil), o, h, 4096, slog.New(slog.NewTextHandler(&logs, nil)))
			if err == nil {
				sameJSONBodies(t, rec.Body.Bytes(), want, c.sse)
			} else if !bytes.Equal(rec.Body.Bytes(), raw) {
				t.Errorf("body %q, want it as is %q", rec.Body.Bytes(), raw)
			}
			if fellBack := strings.Contains(logs.String(), "buffered whole"); fellBack != (c.log != "") || !strings.Contains(logs.String(), c.log) {
				t.Errorf("log %q, want %q", logs.String(), c.log)
			}
		})
	}
}

// countingWriter is a ResponseWriter that keeps only the first bytes it is sent.
type countingWriter struct {
	header http.Header
	status int
	n      int
	head   []byte
}

func (c *countingWriter) Header() http.Header    { return c.header }
func (c *countingWriter) WriteHeader(status int) { c.status = status }
func (c *countingWriter) Flush()                 {}
func (c *countingWriter) Write(p []byte) (int, error) {
	if room := 4096 - len(c.head); room > 0 {
		c.head = append(c.head, p[:min(room, len(p))]...)
	}
	c.n += len(p)
	return len(p), nil
}

// allocated is the bytes f allocates, the encoders' pooled buffers dropped first.
func allocated(f func()) uint64 {
	runtime.GC()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestReadPatchMemory: a 48 MB answer costs the transport under half its size
// (it was twice for a 2025-11-25 read, buffered whole, and five times for a
// 2026-07-28 one, decoded and encoded again to add its cache hints).
func TestReadPatchMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates hundreds of MB")
	}
	text := strings.Repeat(`{"cell_type":"code","source":"print(\"hello\")"}`, 36<<20/48)
	for _, modern := range []bool{false, true} {
		t.Run(fmt.Sprintf("modern=%v", modern), func(t *testing.T) {
			outcome := resources.ReadOutcome{URI: "notebook://work", TTL: time.Minute, Modern: modern}
			o := &resources.ReadOutcome{}
			h := sdkHandler{o: o, outcome: outcome, resp: sdkAnswer(7, modern, true, false, text)}
			req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			plain := &countingWriter{header: http.Header{}}
			sdk := allocated(func() { h.ServeHTTP(plain, req) })
			w := &countingWriter{header: http.Header{}}
			through := allocated(func() { serveRead(w, req, o, h, DefaultMaxRequestBytes, quietLog) })
			extra := int64(through) - int64(sdk)
			t.Logf("answer %d bytes; the SDK allocates %d, the transport %d more (%.2fx the answer)", plain.n, sdk, extra, float64(extra)/float64(plain.n))
			if extra > int64(plain.n)/2 {
				t.Errorf("the transport allocates %d bytes for a %d-byte answer, want under half", extra, plain.n)
			}
			if w.status != http.StatusOK || w.n < plain.n || !bytes.HasPrefix(w.head, []byte(`{"jsonrpc":"2.0","id":7,"result":{`)) {
				t.Errorf("status %d, %d bytes (want %d or more), starting %.200s", w.status, w.n, plain.n, w.head)
			}
			if modern && !bytes.Contains(w.head, []byte(`"ttlMs":60000,"cacheScope":"private","contents":`)) {
				t.Errorf("not patched: %.300s", w.head)
			}
		})
	}
}
