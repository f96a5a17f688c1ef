package store

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// fifoDrain is the drain deadline of the named-pipe tests' sidecars.
const fifoDrain = 2 * time.Second

// startOnFIFO starts the binary with a named pipe at its store path.
func startOnFIFO(t *testing.T) (dir string, sc *sidecartest.Sidecar) {
	t.Helper()
	dir = t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, ".jupyter_ystore.db"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JUPYTER_MCP_SIDECAR_SERVER_DRAIN_TIMEOUT", fifoDrain.String())
	return dir, sidecartest.StartSidecar(t, dir, sidecartest.Options{})
}

// saysFIFO waits until /readyz answers 503 saying that the store path is a named pipe,
// and reports whether it did (failing t if not).
func saysFIFO(t *testing.T, sc *sidecartest.Sidecar) bool {
	t.Helper()
	var code int
	var body string
	err := testenv.Within(testenv.Wait, func() bool {
		code, body = sc.Get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "not a regular file") && strings.Contains(body, "named pipe")
	})
	if err != nil {
		t.Errorf("/readyz answered %d %s, want 503 saying the store path is a named pipe", code, body)
	}
	return err == nil
}

// A named pipe at the store path, which blocked the tailer in open(2) for good, leaves
// the process stoppable: SIGTERM ends it within server.drain_timeout.
func TestFIFOAtStorePathStopsOnSIGTERM(t *testing.T) {
	_, sc := startOnFIFO(t)
	saysFIFO(t, sc) // and whatever it says, SIGTERM must end it
	start := time.Now()
	if err := sc.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-sc.Done:
		took := time.Since(start)
		t.Logf("exited %v after SIGTERM (drain_timeout %v): %v", took.Round(time.Millisecond), fifoDrain, err)
		if took > fifoDrain {
			t.Errorf("exited %v after SIGTERM, more than drain_timeout %v", took, fifoDrain)
		}
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want a clean exit", err)
		}
	case <-time.After(fifoDrain + 10*time.Second):
		_ = sc.Cmd.Process.Kill()
		<-sc.Done
		t.Fatalf("still running %v after SIGTERM (drain_timeout %v): killed", time.Since(start).Round(time.Millisecond), fifoDrain)
	}
}

// The store file put at the path in the named pipe's place is read: ready, and the
// notebook served.
func TestFIFOAtStorePathRecovers(t *testing.T) {
	dir, sc := startOnFIFO(t)
	if !saysFIFO(t, sc) {
		return
	}
	store := filepath.Join(dir, ".jupyter_ystore.db")
	if err := os.Remove(store); err != nil {
		t.Fatal(err)
	}
	steps := sidecartest.Session(t)
	sidecartest.StartPreloaded(t, store, steps)
	sidecartest.WaitStatus(t, sc, "/readyz", http.StatusOK)
	c := sidecartest.DialGo(t, sc.MCPURL(), true)
	c.Bind(sidecartest.NbName, sidecartest.NbPath)
	// Ready means reading, not caught up: the rows committed before are read soon after.
	sidecartest.EventuallyJSON(t, "notebook once the store file is back", func() string { return c.Read(sidecartest.NbURI) }, sidecartest.MustJSON(t, steps[sidecartest.Preloaded-1].After))
}
