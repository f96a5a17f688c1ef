package jupytertest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
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

// NeedBrowser skips the test without Chromium, Node or testdata/browser's npm packages,
// or fails it on CI, and returns the Chromium executable.
func NeedBrowser(t testing.TB) string {
	t.Helper()
	chromium, err := Chromium()
	testenv.Need(t, err, "apt-get install chromium (as root), or export "+ChromiumEnv)
	_, err = exec.LookPath("node")
	testenv.Need(t, err, "install Node.js 20")
	_, err = os.Stat(testdata("browser", "node_modules", "playwright-core"))
	testenv.Need(t, err, "cd testdata/browser && npm ci")
	return chromium
}

// Browser starts testdata/browser/driver.mjs, people in JupyterLab in headless Chromium,
// on the server (started with Options.Lab); it ends when the test ends. Its commands are
// those of the driver's header.
func (s *Server) Browser() *Client {
	s.t.Helper()
	if !s.opts.Lab {
		s.t.Fatal(errors.New("jupytertest: a browser needs a server started with Options.Lab"))
	}
	chromium := NeedBrowser(s.t)
	cmd := exec.Command("node", testdata("browser", "driver.mjs"), "--url", s.URL, "--token", Token, "--chromium", chromium)
	cmd.Dir = testdata("browser")
	return process(s.t, cmd)
}

// labSettings turns off what JupyterLab would fetch from the internet (news, update
// checks) and the notification asking about it, in the user settings of the server.
func (s *Server) labSettings() {
	s.t.Helper()
	dir := filepath.Join(s.Dir, "config", "lab", "user-settings", "@jupyterlab", "apputils-extension")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	settings := `{"fetchNews": "false", "checkForUpdates": false}`
	if err := os.WriteFile(filepath.Join(dir, "notification.jupyterlab-settings"), []byte(settings), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// HubLogin starts testdata/browser/hublogin.mjs: people logging in with a JupyterHub in
// headless Chromium, one fresh browser context a login unless the login names a
// session, a person's browser kept between logins (its "login" command, in the script's
// header); it ends when the test ends.
func HubLogin(t testing.TB) *Client {
	t.Helper()
	chromium := NeedBrowser(t)
	cmd := exec.Command("node", testdata("browser", "hublogin.mjs"), "--chromium", chromium)
	cmd.Dir = testdata("browser")
	return process(t, cmd)
}
