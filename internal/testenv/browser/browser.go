// Package browser is the Go side of the browser driver of testdata/browser: people in
// headless Chromium (Debian's, driven through playwright-core) working in the JupyterLab
// of a jupytertest server (driver.mjs) or logging in with a JupyterHub (hublogin.mjs),
// each a jupytertest.Client taking the commands of its script's header.
//
// Without Chromium, Node or testdata/browser's npm packages the test is skipped, or
// fails on CI (CI=true).
package browser

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
)

// ChromiumEnv names the environment variable holding the Chromium executable the browser
// driver runs (.ci/run exports Debian's /usr/bin/chromium); without it, chromium on PATH.
const ChromiumEnv = "SIDECAR_TEST_CHROMIUM"

// Chromium returns the Chromium executable, or why there is none.
func Chromium() (string, error) {
	if c := os.Getenv(ChromiumEnv); c != "" {
		if _, err := os.Stat(c); err != nil {
			return "", err
		}
		return c, nil
	}
	return exec.LookPath("chromium")
}

// Need skips the test without Chromium, Node or testdata/browser's npm packages,
// or fails it on CI, and returns the Chromium executable.
func Need(t testing.TB) string {
	t.Helper()
	chromium, err := Chromium()
	testenv.Need(t, err, "apt-get install chromium (as root), or export "+ChromiumEnv)
	_, err = exec.LookPath("node")
	testenv.Need(t, err, "install Node.js 20")
	_, err = os.Stat(testenv.Testdata("browser", "node_modules", "playwright-core"))
	testenv.Need(t, err, "cd testdata/browser && npm ci")
	return chromium
}

// Lab starts testdata/browser/driver.mjs, people in JupyterLab in headless Chromium, on
// s (started with Options.Lab); it ends when the test ends. Its commands are those of
// the driver's header.
func Lab(t testing.TB, s *jupytertest.Server) *jupytertest.Client {
	t.Helper()
	if !s.Options().Lab {
		t.Fatal(errors.New("browser: JupyterLab needs a server started with Options.Lab"))
	}
	chromium := Need(t)
	cmd := exec.Command("node", testenv.Testdata("browser", "driver.mjs"), "--url", s.URL, "--token", jupytertest.Token, "--chromium", chromium)
	cmd.Dir = testenv.Testdata("browser")
	return jupytertest.Process(t, cmd)
}

// HubLogin starts testdata/browser/hublogin.mjs: people logging in with a JupyterHub in
// headless Chromium, one fresh browser context a login unless the login names a
// session, a person's browser kept between logins (its "login" command, in the script's
// header); it ends when the test ends.
func HubLogin(t testing.TB) *jupytertest.Client {
	t.Helper()
	chromium := Need(t)
	cmd := exec.Command("node", testenv.Testdata("browser", "hublogin.mjs"), "--chromium", chromium)
	cmd.Dir = testenv.Testdata("browser")
	return jupytertest.Process(t, cmd)
}
