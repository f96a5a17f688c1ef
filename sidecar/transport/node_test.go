package transport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// The Node drivers live in testdata/mcpclient (npm ci there installs them).
var mcpclientDir = filepath.Join("..", "..", "testdata", "mcpclient")

func requireNode(t *testing.T) {
	t.Helper()
	_, err := os.Stat(filepath.Join(mcpclientDir, "node_modules", "@modelcontextprotocol"))
	if err == nil {
		_, err = exec.LookPath("node")
	}
	testenv.Need(t, err, "node, and npm ci in testdata/mcpclient")
}

// event is one JSON line a driver prints.
type event struct {
	Event          string          `json:"event"`
	URI            string          `json:"uri"`
	SubscriptionID any             `json:"subscriptionId"`
	T              float64         `json:"t"`
	ID             any             `json:"id"`
	Result         json.RawMessage `json:"result"`
	Error          string          `json:"error"`
	Code           any             `json:"code"`
	Protocol       string          `json:"protocolVersion"`
}

// nodeClient is a running driver script.
type nodeClient struct {
	*testenv.Child
	events chan event
	mu     sync.Mutex
	seq    int
}

func startNode(t *testing.T, script, url string, args ...string) *nodeClient {
	t.Helper()
	cmd := exec.Command("node", append([]string{script, "--url", url, "--token", testToken}, args...)...)
	cmd.Dir = mcpclientDir
	n := &nodeClient{Child: testenv.StartChild(t, cmd, testenv.AnyExit), events: make(chan event, 100000)}
	go func() {
		sc := bufio.NewScanner(n.Out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e event
			if err := json.Unmarshal(sc.Bytes(), &e); err == nil {
				n.events <- e
			}
		}
		close(n.events)
	}()
	n.expect(t, 20*time.Second, func(e event) bool { return e.Event == "ready" })
	return n
}

// expect returns the first event matching ok, failing on timeout, on a fatal
// error line or when the driver exits.
func (n *nodeClient) expect(t *testing.T, within time.Duration, ok func(event) bool) event {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case e, open := <-n.events:
			if !open {
				t.Fatalf("driver exited: %s", n.Stderr.String())
			}
			if e.Event == "error" && e.ID == nil {
				t.Fatalf("driver failed: %s\n%s", e.Error, n.Stderr.String())
			}
			if ok(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("no expected event within %v (stderr: %s)", within, n.Stderr.String())
		}
	}
}

// do sends a command and returns its result event.
func (n *nodeClient) do(t *testing.T, cmd map[string]any) event {
	t.Helper()
	n.mu.Lock()
	n.seq++
	id := float64(n.seq)
	n.mu.Unlock()
	cmd["id"] = id
	b, _ := json.Marshal(cmd)
	if _, err := n.In.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
	return n.expect(t, 10*time.Second, func(e event) bool {
		return (e.Event == "result" || e.Event == "error") && e.ID == id
	})
}

// updates collects resources/updated events until quiet for d.
func (n *nodeClient) updatesUntilQuiet(t *testing.T, d time.Duration) []event {
	t.Helper()
	var got []event
	for {
		select {
		case e, open := <-n.events:
			if !open {
				t.Fatalf("driver exited: %s", n.Stderr.String())
			}
			if e.Event == "updated" {
				got = append(got, e)
			}
		case <-time.After(d):
			return got
		}
	}
}

var drivers = []struct{ script, era string }{
	{"sdk1.mjs", era20251125},
	{"sdk2.mjs", era20260728},
}

func TestNodeDrivers(t *testing.T) {
	requireNode(t)
	for _, d := range drivers {
		t.Run(d.era, func(t *testing.T) {
			lib := newLibrary(t, testPath)
			reg := prometheus.NewRegistry()
			r := serve(t, served{Config: resources.Config{Registerer: reg}, Transport: Config{SessionGrace: 200 * time.Millisecond}}, lib)
			r.serving(t) // a baseline taken before Run started its goroutines would be too low
			baseGoroutines := settledGoroutines()
			n := startNode(t, d.script, r.url, "--name", "work", "--path", testPath,
				"--subscribe", "notebook://work", "--subscribe", "notebook://work/cells/c1")

			// bind + subscribe → a change reaches the client and a read returns it (the latency is
			// measured without -race: E2E_LATENCY).
			start := time.Now()
			r.srv.NotebookChanged(testPath, lib.edit(t, testPath, "source-c1"), noOrigin)
			seen := map[string]any{}
			for len(seen) < 2 {
				e := n.expect(t, testenv.Wait-time.Since(start), func(e event) bool { return e.Event == "updated" })
				seen[e.URI] = e.SubscriptionID
			}
			if _, ok := seen["notebook://work/cells/c1"]; !ok {
				t.Fatalf("updates %v lack the cell", seen)
			}
			if d.era == era20260728 && seen["notebook://work"] == nil {
				t.Fatalf("2026-07-28 notification without a subscription id: %v", seen)
			}
			res := n.do(t, map[string]any{"op": "read", "uri": "notebook://work/cells/c1"})
			if res.Event != "result" || !strings.Contains(string(res.Result), "hello, world") {
				t.Fatalf("read after change: %+v", res)
			}
			res = n.do(t, map[string]any{"op": "read", "uri": "notebook://work/cells/nope"})
			if res.Event != "error" {
				t.Fatalf("read of an unknown cell succeeded: %+v", res)
			}

			// 1,000 changes in bursts: every quiet period after a burst yields the URIs.
			// (The changes are literals: what is published depends only on them.)
			const bursts, perBurst = 20, 50
			change := ynotebook.Changes{Cells: map[string]ynotebook.CellChange{"c1": {Source: true}}}
			total := map[string]int{}
			for b := range bursts {
				for range perBurst {
					r.srv.NotebookChanged(testPath, change, noOrigin)
				}
				got := n.updatesUntilQuiet(t, 400*time.Millisecond)
				uris := map[string]bool{}
				for _, e := range got {
					uris[e.URI] = true
					total[e.URI]++
				}
				if !uris["notebook://work"] || !uris["notebook://work/cells/c1"] {
					t.Fatalf("burst %d: quiet period yielded %d updates for %v", b, len(got), uris)
				}
			}
			for uri, count := range total {
				if count > bursts*perBurst {
					t.Fatalf("%s: %d notifications for %d changes", uri, count, bursts*perBurst)
				}
			}
			if dropped := counterValue(t, reg, "jupyter_mcp_sidecar_mcp_notifications_dropped_total", d.era); dropped != 0 {
				t.Fatalf("%v notifications dropped", dropped)
			}

			// unsubscribe stops delivery.
			for _, uri := range []string{"notebook://work", "notebook://work/cells/c1"} {
				if res := n.do(t, map[string]any{"op": "unsubscribe", "uri": uri}); res.Event != "result" {
					t.Fatalf("unsubscribe %s: %+v", uri, res)
				}
			}
			r.srv.NotebookChanged(testPath, lib.edit(t, testPath, "source-c1"), noOrigin)
			if got := n.updatesUntilQuiet(t, 500*time.Millisecond); len(got) != 0 {
				t.Fatalf("updates after unsubscribe: %+v", got)
			}

			// disconnect cleans up: registry, session ids and goroutines return to their base.
			if res := n.do(t, map[string]any{"op": "subscribe", "uri": "notebook://work"}); res.Event != "result" {
				t.Fatalf("resubscribe: %+v", res)
			}
			_ = n.Cmd.Process.Kill()
			testenv.Eventually(t, testenv.Wait, "the killed client's session and subscriptions gone", func() bool {
				perEra, subs, _ := stats(r)
				return perEra[era20251125]+perEra[era20260728] == 0 && subs == 0 && liveSessions(r) == 0
			}, func() string {
				perEra, subs, _ := stats(r)
				return fmt.Sprintf("sessions %v, subscriptions %d, session ids %d", perEra, subs, liveSessions(r))
			})
			// The session's grace, the SDK's stream pump and the heartbeat wind down.
			testenv.Eventually(t, testenv.Wait, "goroutines back to their base", func() bool { return runtime.NumGoroutine() <= baseGoroutines+2 }, func() string {
				buf := make([]byte, 1<<20)
				return fmt.Sprintf("%d goroutines, %d before\n%s", runtime.NumGoroutine(), baseGoroutines, buf[:runtime.Stack(buf, true)])
			})
		})
	}
}

// settledGoroutines returns the goroutine count once it stops changing: a baseline
// measured over time, so it samples at intervals rather than waiting for an event.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 50 {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

// liveSessions counts the 2025-11-25 session ids the server still honours.
func liveSessions(r *running) int { return r.tr.(*httpTransport).sessions.count() }

// counterValue is the value of the counter family name with label era in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, era string) float64 {
	t.Helper()
	return testenv.Sum(testenv.Gather(t, reg), name, "era", era)
}
