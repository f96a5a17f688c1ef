package sidecarcmd

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/testutil"
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
	addr := testutil.FreeAddr(t)
	var stdout, stderr testutil.LockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		root := newRoot(&stdout, &stderr)
		root.SetArgs([]string{"serve", "--demo", "--listen", addr, "--log-level", "warn"})
		done <- root.ExecuteContext(ctx)
	}()

	base := "http://" + addr
	testutil.Eventually(t, testutil.Wait, "GET /readyz = 200", func() bool {
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
	testutil.Eventually(t, testutil.Wait, "notebook://demo readable with cells", func() bool {
		var ok bool
		first, ok = readNotebook(ctx, t, c)
		return ok
	})
	testutil.Eventually(t, testutil.Wait, "notebook://demo changing", func() bool {
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

// serve with no token configured generates one, prints it, and requires it.
func TestServeGeneratesToken(t *testing.T) {
	dir := isolate(t)
	addr := testutil.FreeAddr(t)
	var stderr testutil.LockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		root := newRoot(&testutil.LockedBuffer{}, &stderr)
		root.SetArgs([]string{"serve", "--store", dir + "/.jupyter_ystore.db", "--fileid-db", dir + "/fileid.db",
			"--listen", addr, "--log-level", "warn"})
		done <- root.ExecuteContext(ctx)
	}()
	re := regexp.MustCompile(`Authorization: Bearer ([0-9a-f]{48})`)
	var token string
	testutil.Eventually(t, testutil.Wait, "a generated token on stderr", func() bool {
		m := re.FindStringSubmatch(stderr.String())
		if m != nil {
			token = m[1]
		}
		return m != nil
	})
	post := func(auth string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testutil.Eventually(t, testutil.Wait, "the MCP endpoint answering with the token", func() bool { return post(token) == http.StatusOK })
	if code := post(""); code != http.StatusUnauthorized {
		t.Errorf("no token: status %d, want 401", code)
	}
	if code := post("wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: status %d, want 401", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after cancel: %v", err)
	}
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
	addr := testutil.FreeAddr(t)
	var stderr testutil.LockedBuffer
	cmd := exec.Command(os.Args[0], "serve", "--demo", "--listen", addr, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "JMS_TEST_RUN_MAIN=1", "TMPDIR="+tmp)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, testutil.Wait, "GET /healthz = 200", func() bool {
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
