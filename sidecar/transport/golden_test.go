package transport

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/")

// exchange is one HTTP request of a golden transcript.
type exchange struct {
	name    string
	era     string // "2025-11-25" (on an initialized session), "2026-07-28" or "" (no MCP headers)
	headers map[string]string
	noAuth  bool
	body    string
}

func legacy(name, method, params string) exchange {
	return exchange{name: name, era: era20251125,
		body: fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":%q,"params":%s}`, method, params)}
}

func modern(name, method, params string) exchange {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"golden","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	params = strings.Replace(params, "{", "{"+meta+",", 1)
	if params == "{"+meta+",}" {
		params = "{" + meta + "}"
	}
	return exchange{name: name, era: era20260728,
		body: fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":%q,"params":%s}`, method, params)}
}

func read(uri string) string { return fmt.Sprintf(`{"uri":%q}`, uri) }

func TestGoldenTranscripts(t *testing.T) {
	cases := []exchange{
		legacy("read-notebook", "resources/read", read("notebook://work")),
		legacy("read-cell", "resources/read", read("notebook://work/cells/c1")),
		legacy("read-cell-markdown", "resources/read", read("notebook://work/cells/c2")),
		legacy("read-output-stream", "resources/read", read("notebook://work/cells/c1/outputs/0")),
		legacy("read-output-png", "resources/read", read("notebook://work/cells/c1/outputs/1")),
		legacy("read-output-html", "resources/read", read("notebook://work/cells/c1/outputs/2")),
		legacy("read-output-error", "resources/read", read("notebook://work/cells/c3/outputs/0")),
		legacy("read-output-json", "resources/read", read("notebook://work/cells/c4/outputs/0")),
		legacy("read-capabilities", "resources/read", read("capabilities://")),
		legacy("list-resources", "resources/list", `{}`),
		legacy("list-templates", "resources/templates/list", `{}`),
		legacy("list-tools", "tools/list", `{}`),
		legacy("tool-list-notebooks", "tools/call", `{"name":"list_notebooks","arguments":{}}`),
		legacy("tool-use-notebook-invalid-name", "tools/call", `{"name":"use_notebook","arguments":{"notebook_name":"a/b","notebook_path":"x.ipynb"}}`),
		legacy("tool-use-notebook-escape", "tools/call", `{"name":"use_notebook","arguments":{"notebook_name":"x","notebook_path":"../x.ipynb"}}`),
		legacy("error-unknown-name", "resources/read", read("notebook://nope")),
		legacy("error-unknown-cell", "resources/read", read("notebook://work/cells/nope")),
		legacy("error-unknown-output", "resources/read", read("notebook://work/cells/c1/outputs/9")),
		legacy("error-not-in-store", "resources/read", read("notebook://gone")),
		legacy("error-bad-uri", "resources/read", read("notebook://work/cells")),
		legacy("error-withheld", "resources/read", read("notebook://work/cells/c3/outputs/0")),
		legacy("subscribe", "resources/subscribe", read("notebook://work/cells/c1")),
		legacy("unsubscribe-never-subscribed", "resources/unsubscribe", read("notebook://work/cells/c9")),
		modern("modern-read-cell", "resources/read", read("notebook://work/cells/c1")),
		modern("modern-read-output", "resources/read", read("notebook://work/cells/c1/outputs/1")),
		modern("modern-error-unknown-cell", "resources/read", read("notebook://work/cells/nope")),
		modern("modern-error-withheld", "resources/read", read("notebook://work/cells/c3/outputs/0")),
		{name: "error-malformed-json", era: era20251125, body: `{"jsonrpc":"2.0","id":7,"method":"resources/read",`},
		{name: "error-batch", era: era20251125, body: ` [{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","id":8,"method":"ping"}]`},
		{name: "error-malformed-params", era: era20251125, body: `{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":42}}`},
		{name: "error-unauthorized", noAuth: true, body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`},
		{name: "error-wrong-token", headers: map[string]string{"Authorization": "Bearer wrong"}, body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`},
		{name: "error-origin", headers: map[string]string{"Origin": "https://evil.example.com"}, body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`},
		{name: "error-too-large", era: era20251125, body: `{"jsonrpc":"2.0","id":7,"method":"ping","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`},
	}
	lib := newLibrary(t, testPath)
	withheld := func(name string) bool { return strings.Contains(name, "withheld") }
	for _, gated := range []bool{false, true} {
		cfg := served{Config: resources.Config{Notebooks: map[string]string{"work": testPath, "gone": "missing.ipynb"}}, Transport: Config{MaxRequestBytes: 4096}}
		if gated {
			cfg.Gate = resources.Seam{Name: "withhold", Options: map[string]any{"templates": []any{"notebook://{name}/cells/{cell_id}/outputs/{index}"}}}
		}
		r := serve(t, cfg, lib)
		session := initialize(t, r.url)
		for _, ex := range cases {
			if withheld(ex.name) != gated {
				continue
			}
			t.Run(ex.name, func(t *testing.T) {
				got := transcript(t, r.url, session, ex)
				file := filepath.Join("testdata", "golden", ex.name+".txtar")
				if *update {
					if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(file, got, 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("%v (run go test -run TestGoldenTranscripts -update)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("transcript differs from %s (run with -update if intended)\n--- got ---\n%s", file, got)
				}
			})
		}
	}
}

// initialize opens a 2025-11-25 session and returns its id.
func initialize(t *testing.T, url string) string {
	t.Helper()
	resp := post(t, url, "", map[string]string{"Authorization": "Bearer " + testToken},
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"golden","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	resp.Body.Close()
	if session == "" {
		t.Fatal("no session id")
	}
	post(t, url, session, map[string]string{"Authorization": "Bearer " + testToken, "MCP-Protocol-Version": era20251125},
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	return session
}

func post(t *testing.T, url, session string, headers map[string]string, body string) *http.Response {
	t.Helper()
	return send(t, http.MethodPost, url, session, headers, body)
}

// send sends one request to the endpoint; a body is sent as JSON.
func send(t *testing.T, method, url, session string, headers map[string]string, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

var sessionRE = regexp.MustCompile(`mcp-session-[0-9a-f-]{36}`)

// transcript performs ex and renders request and response as a txtar archive.
func transcript(t *testing.T, url, session string, ex exchange) []byte {
	headers := map[string]string{}
	if !ex.noAuth {
		headers["Authorization"] = "Bearer " + testToken
	}
	sess := ""
	switch ex.era {
	case era20251125:
		sess = session
		headers["MCP-Protocol-Version"] = era20251125
	case era20260728:
		headers["MCP-Protocol-Version"] = era20260728
		var m struct {
			Method string `json:"method"`
			Params struct {
				URI  string `json:"uri"`
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal([]byte(ex.body), &m)
		headers["Mcp-Method"] = m.Method
		if name := m.Params.URI + m.Params.Name; name != "" {
			headers["Mcp-Name"] = name
		}
	}
	for k, v := range ex.headers {
		headers[k] = v
	}
	resp := post(t, url, sess, headers, ex.body)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var client, server bytes.Buffer
	fmt.Fprintf(&client, "POST /mcp\n")
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		v := headers[k]
		if k == "Authorization" && v == "Bearer "+testToken {
			v = "Bearer <token>"
		}
		fmt.Fprintf(&client, "%s: %s\n", k, v)
	}
	if sess != "" {
		fmt.Fprintf(&client, "Mcp-Session-Id: <session>\n")
	}
	fmt.Fprintf(&client, "\n%s\n", pretty(ex.body))
	fmt.Fprintf(&server, "%d %s\n", resp.StatusCode, http.StatusText(resp.StatusCode))
	for _, k := range []string{"Content-Type", "Www-Authenticate"} {
		if v := resp.Header.Get(k); v != "" {
			fmt.Fprintf(&server, "%s: %s\n", k, v)
		}
	}
	fmt.Fprintf(&server, "\n%s\n", pretty(sessionRE.ReplaceAllString(string(body), "<session>")))
	return txtar.Format(&txtar.Archive{
		Comment: []byte(ex.name + ": one request and the server's answer, byte for byte up to JSON indentation.\n"),
		Files:   []txtar.File{{Name: "client", Data: client.Bytes()}, {Name: "server", Data: server.Bytes()}},
	})
}

// pretty indents JSON (and the JSON of SSE data lines); other text is kept.
func pretty(s string) string {
	s = strings.TrimRight(s, "\n")
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), "", "  ") == nil {
		return b.String()
	}
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			b.Reset()
			if json.Indent(&b, []byte(data), "", "  ") == nil {
				line = "data: " + b.String()
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
