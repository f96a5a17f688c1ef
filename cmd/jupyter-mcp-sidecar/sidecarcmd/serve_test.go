package sidecarcmd

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// readNotebook reads notebook://demo and returns its cells' sources joined.
func readNotebook(ctx context.Context, t *testing.T, c *client.Client) (string, bool) {
	t.Helper()
	res, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "notebook://demo"}})
	if err != nil || len(res.Contents) != 1 {
		return "", false
	}
	text, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok {
		t.Fatalf("notebook://demo content is %T", res.Contents[0])
	}
	var nb struct {
		NBFormat int `json:"nbformat"`
		Cells    []struct {
			Source any `json:"source"`
		} `json:"cells"`
	}
	if err := json.Unmarshal([]byte(text.Text), &nb); err != nil {
		t.Fatalf("notebook://demo is not nbformat JSON: %v\n%s", err, text.Text)
	}
	if nb.NBFormat != 4 || len(nb.Cells) == 0 {
		return "", false
	}
	b, _ := json.Marshal(nb.Cells)
	return string(b), true
}

// serve --demo, as the README's first command: the notebook is served without a token and
// keeps changing; SIGTERM-like cancellation stops it cleanly.
func TestServeDemo(t *testing.T) {
	isolate(t)
	addr := testenv.FreeAddr(t)
	var stdout, stderr testenv.LockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		root := newRoot(&stdout, &stderr)
		root.SetArgs([]string{"serve", "--demo", "--listen", addr, "--log-level", "warn"})
		done <- root.ExecuteContext(ctx)
	}()

	base := "http://" + addr
	testenv.Eventually(t, testenv.Wait, "GET /readyz = 200", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if help := stderr.String(); !strings.Contains(help, base+"/mcp") || !strings.Contains(help, "notebook://demo") {
		t.Errorf("serve --demo did not say how to connect:\n%s", help)
	}

	c, err := client.NewStreamableHttpClient(base + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "serve-demo-test", Version: "1"},
	}}); err != nil {
		t.Fatal(err)
	}
	var first string
	testenv.Eventually(t, testenv.Wait, "notebook://demo readable with cells", func() bool {
		var ok bool
		first, ok = readNotebook(ctx, t, c)
		return ok
	})
	testenv.Eventually(t, testenv.Wait, "notebook://demo changing", func() bool {
		now, ok := readNotebook(ctx, t, c)
		return ok && now != first
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve --demo after cancel: %v\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second): // the drain timeout (10 s) and a margin: stopping in time is part of stopping cleanly
		t.Fatal("serve --demo did not stop within 15s of cancellation")
	}
}

// serve with no token configured generates one and requires it. The token goes to a
// file readable by its user only, which the log names; the log (JSON here, as a
// collector reads it) is JSON lines only and never holds the token.
func TestServeGeneratesToken(t *testing.T) {
	dir := isolate(t)
	addr := testenv.FreeAddr(t)
	stderr, stop := runServe(t, "serve", "--store", dir+"/.jupyter_ystore.db", "--fileid-db", dir+"/fileid.db",
		"--listen", addr, "--log-level", "info", "--log-format", "json")
	var tokenFile string
	testenv.Eventually(t, testenv.Wait, "the generated token's file in the log", func() bool {
		for _, rec := range jsonLines(t, stderr.String()) {
			if f, ok := rec["token_file"].(string); ok {
				tokenFile = f
			}
		}
		return tokenFile != ""
	}, stderr.String)
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^[0-9a-f]{48}$`).MatchString(token) {
		t.Fatalf("%s holds %q, want 48 hex digits", tokenFile, b)
	}
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v; want 0600", tokenFile, err, fi.Mode())
	}
	testenv.Eventually(t, testenv.Wait, "the MCP endpoint answering with the token", func() bool { return postInitialize(addr, token) == http.StatusOK })
	if code := postInitialize(addr, ""); code != http.StatusUnauthorized {
		t.Errorf("no token: status %d, want 401", code)
	}
	if code := postInitialize(addr, "wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: status %d, want 401", code)
	}
	if err := stop(); err != nil {
		t.Fatalf("serve after cancel: %v", err)
	}
	logs := stderr.String()
	jsonLines(t, logs)
	if strings.Contains(logs, token) {
		t.Fatalf("the token is in the log:\n%s", logs)
	}
}

// serve in hub mode admits the Hub's tokens and none of server.token's: it generates
// no token, writes no token file and logs none.
func TestServeInHubModeMakesNoToken(t *testing.T) {
	dir := isolate(t)
	t.Setenv("STATE_DIRECTORY", dir)
	addr := testenv.FreeAddr(t)
	stderr, stop := runServe(t, "serve", "--config", writeConfig(t, dir,
		"hub: {enabled: true, api_url: http://127.0.0.1:9/hub/api, api_token: svc-secret, state_dir: "+dir+"}\n"),
		"--listen", addr, "--log-level", "info", "--log-format", "json")
	testenv.Eventually(t, testenv.Wait, "hub mode started", func() bool {
		return strings.Contains(stderr.String(), "sidecar started in hub mode")
	}, stderr.String)
	if err := stop(); err != nil {
		t.Fatalf("serve after cancel: %v", err)
	}
	for _, rec := range jsonLines(t, stderr.String()) {
		if f, ok := rec["token_file"]; ok {
			t.Errorf("hub mode generated a token (file %v), which it never uses", f)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, generatedTokenName)); !os.IsNotExist(err) {
		t.Errorf("%s beside the state: %v, want none", generatedTokenName, err)
	}
}

// runServe runs the command line args in a goroutine, its log in the buffer returned;
// stop cancels it and returns what it returned.
func runServe(t *testing.T, args ...string) (log *testenv.LockedBuffer, stop func() error) {
	t.Helper()
	log = &testenv.LockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() {
		root := newRoot(&testenv.LockedBuffer{}, log)
		root.SetArgs(args)
		done <- root.ExecuteContext(ctx)
	}()
	return log, func() error { cancel(); return <-done }
}

// postInitialize posts an MCP initialize to addr's /mcp with the bearer token tok
// ("" for none) and returns the status, 0 when no answer came.
func postInitialize(addr, tok string) int {
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// jsonLines decodes a JSON log, failing the test on any line that is not a JSON object.
func jsonLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.Lines(logs) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line that is not JSON: %q\n%s", line, logs)
		}
		recs = append(recs, rec)
	}
	return recs
}

// TestMain lets the test binary run as jupyter-mcp-sidecar itself, for tests that send
// it signals.
func TestMain(m *testing.M) {
	if os.Getenv("JMS_TEST_RUN_MAIN") == "1" {
		os.Exit(Main(Build{}))
	}
	os.Exit(m.Run())
}

// SIGTERM stops `serve --demo` cleanly: exit status 0, temporary store removed.
func TestServeStopsOnSIGTERM(t *testing.T) {
	isolate(t)
	tmp := t.TempDir()
	addr := testenv.FreeAddr(t)
	var stderr testenv.LockedBuffer
	cmd := exec.Command(os.Args[0], "serve", "--demo", "--listen", addr, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "JMS_TEST_RUN_MAIN=1", "TMPDIR="+tmp)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.Wait, "GET /healthz = 200", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second): // the drain timeout (10 s) and a margin for a loaded machine
		_ = cmd.Process.Kill()
		t.Fatalf("still running 20s after SIGTERM\n%s", stderr.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "jupyter-mcp-sidecar-demo-*")); len(left) != 0 {
		t.Errorf("demo store left behind: %v", left)
	}
}

// serve with server.insecure_no_auth warns loudly when its listener is reachable from
// other hosts, and says nothing more on loopback.
func TestServeWarnsInsecureNoAuth(t *testing.T) {
	for _, tc := range []struct {
		host string
		warn bool
	}{
		{"127.0.0.1", false},
		{"0.0.0.0", true},
	} {
		t.Run(tc.host, func(t *testing.T) {
			dir := isolate(t)
			addr := net.JoinHostPort(tc.host, strconv.Itoa(testenv.FreePort(t)))
			var stderr testenv.LockedBuffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				root := newRoot(&testenv.LockedBuffer{}, &stderr)
				root.SetArgs([]string{"serve", "--store", dir + "/.jupyter_ystore.db", "--fileid-db", dir + "/fileid.db",
					"--listen", addr, "--insecure-no-auth", "--log-format", "json"})
				done <- root.ExecuteContext(ctx)
			}()
			testenv.Eventually(t, testenv.Wait, "the MCP server listening", func() bool {
				return strings.Contains(stderr.String(), `"msg":"mcp server listening"`)
			}, stderr.String)
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("serve after cancel: %v", err)
			}
			warned := false
			for _, rec := range jsonLines(t, stderr.String()) {
				msg, _ := rec["msg"].(string)
				warned = warned || (rec["level"] == "WARN" && strings.Contains(msg, "AUTHENTICATION IS DISABLED") && rec["listen"] == addr)
			}
			if warned != tc.warn {
				t.Fatalf("listening on %s without auth: warned %v, want %v\n%s", addr, warned, tc.warn, stderr.String())
			}
		})
	}
}
