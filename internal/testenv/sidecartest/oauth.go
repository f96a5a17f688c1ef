package sidecartest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/browser"
)

// LoginWait bounds a person's login in Chromium: the browser's start and four pages of
// the Hub and the sidecar, each 1-10 s on a loaded 2-core machine.
const LoginWait = 2 * time.Minute

// StartOAuthTS runs testdata/mcpclient/sdk1oauth.mjs: the official SDK's OAuth client,
// listening on its loopback redirect URI, has Chromium open the authorization URL, where
// user logs in at the Hub and approves; it then binds notebook://analysis and subscribes
// to it.
func StartOAuthTS(t *testing.T, endpoint, user string) *TSClient {
	t.Helper()
	chromium := browser.Need(t)
	dir := filepath.Join(RepoRoot, "testdata", "mcpclient")
	testenv.Need(t, StatErr(filepath.Join(dir, "node_modules")), "npm ci in testdata/mcpclient")
	redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", testenv.FreePort(t))
	c, out := startNode(t, dir, "sdk1oauth.mjs", 1000, "--url", endpoint, "--redirect", redirect,
		"--chromium", chromium, "--user", user, "--name", NbName, "--path", NbPath, "--subscribe", NbURI)
	br := bufio.NewReader(out)
	first := make(chan []byte, 1)
	go func() { line, _ := br.ReadBytes('\n'); first <- line }()
	var login struct {
		Event, Error string
		Seen         []string
		Status       int
	}
	line := testenv.Receive(t, LoginWait, "sdk1oauth.mjs's login as "+user, first)
	if json.Unmarshal(line, &login) != nil || login.Event != "login" || fmt.Sprint(login.Seen) != "[login authorize consent]" || login.Status != http.StatusOK {
		t.Fatalf("sdk1oauth.mjs's login as %s: %s, want the Hub's login form and authorization page, the sidecar's consent page approved, then the callback page", user, line)
	}
	ready := make(chan tsEvent, 1)
	go c.readLoop(br, ready)
	if ev := testenv.Receive(t, testenv.Wait, "sdk1oauth.mjs connected as "+user, ready); ev.Event != "ready" {
		t.Fatalf("sdk1oauth.mjs after the login as %s: %+v", user, ev)
	}
	return c
}

// StatErr is why p cannot be stat'ed, or nil.
func StatErr(p string) error { _, err := os.Stat(p); return err }
