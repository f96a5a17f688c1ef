package jupyter

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// connsTo counts the established TCP connections process pid holds to port.
func connsTo(t *testing.T, pid, port int) int {
	t.Helper()
	inodes := map[string]bool{}
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[l[8:len(l)-1]] = true
		}
	}
	n := 0
	for _, table := range []string{"tcp", "tcp6"} {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "01" || !inodes[f[9]] { // 01: ESTABLISHED
				continue
			}
			if _, p, ok := strings.Cut(f[2], ":"); ok {
				if v, _ := strconv.ParseInt(p, 16, 32); int(v) == port {
					n++
				}
			}
		}
	}
	return n
}

// commitToApplied is the sidecar's histogram of a row's commit → its application.
const commitToApplied = "jupyter_mcp_sidecar_commit_to_applied_seconds"

// kernelConnections is the number of websockets Jupyter counts on kernel id.
func kernelConnections(t *testing.T, srv *jupytertest.Server, id string) int {
	t.Helper()
	code, body := srv.REST(http.MethodGet, "/api/kernels/"+id, nil)
	var k struct{ Connections int }
	if code != http.StatusOK || json.Unmarshal(body, &k) != nil {
		t.Fatalf("kernel %s: %d %s", id, code, body)
	}
	return k.Connections
}

// broadcastArrival is when the server's broadcast of the edit sent at t0 to path reached
// the listening client w of the room (the first transaction w took at or after t0),
// clearing w's earlier arrivals.
func broadcastArrival(t *testing.T, py *jupytertest.Client, path string, t0 time.Time) time.Time {
	t.Helper()
	times, _ := py.Do(map[string]any{"op": "arrivals", "client": "w", "path": path})["times"].([]any)
	for _, at := range times {
		if f, ok := at.(float64); ok {
			if ts := time.UnixMicro(int64(f * 1e6)); !ts.Before(t0) {
				return ts
			}
		}
	}
	t.Fatalf("client w of %s took no transaction after the edit sent at %v (%v)", path, t0, times)
	return time.Time{}
}

// TestJupyterMCPServerBench (E2E_MCPSERVER_BENCH=1) runs the same edits against the real
// jupyter-mcp-server twice: with its own watchers (JUPYTER_MCP_WATCH_NOTEBOOKS=true, a
// websocket per bound notebook) and with JUPYTER_MCP_WATCH_NOTEBOOKS=false fed by the
// sidecar (docs/EVENTS.md's recipe), with 1, 20 and 100 bound notebooks: a person's edit
// over the websocket → the subscribed 2026-07-28 client's notification (p50/p99), the
// connections jupyter-mcp-server holds to Jupyter, its RSS and its CPU during the edits.
// Numbers: docs/BENCHMARKS.md.
func TestJupyterMCPServerBench(t *testing.T) {
	if os.Getenv("E2E_MCPSERVER_BENCH") != "1" {
		t.Skip("E2E_MCPSERVER_BENCH=1 runs the benchmark")
	}
	const total, edited, edits = 100, 20, 60
	nbs := map[string]string{}
	for n := range total {
		nbs[fmt.Sprintf("nb%03d.ipynb", n)] = jupytertest.NotebookJSON([2]string{"c0", "v = 0"})
	}
	fs := startFeedStack(t, nbs)
	kernel := startKernel(t, fs.srv)
	port, _ := strconv.Atoi(fs.srv.URL[strings.LastIndexByte(fs.srv.URL, ':')+1:])
	py := fs.srv.Client()
	for n := range edited {
		// p edits; w only listens, as a watcher's websocket does: when the server's
		// broadcast of p's update reaches a client of the room.
		for _, client := range []string{"p", "w"} {
			py.Do(map[string]any{"op": "join", "client": client, "path": fmt.Sprintf("nb%03d.ipynb", n)})
		}
	}
	fs.tap.settled(t)
	type run struct {
		short, name string
		bound       int
		watch       bool // JUPYTER_MCP_WATCH_NOTEBOOKS=true, no feed
		kernel      bool // use_notebook binds each notebook to the kernel: a kernel client per notebook
	}
	// Bound without a kernel first: a binding to the kernel leaves a Jupyter session for
	// the notebook, which a later use_notebook without kernel_id would attach to.
	var runs []run
	for _, bound := range []int{1, 20, 100} {
		runs = append(runs, run{"nokernel", "sidecar feed, no kernel (START_NEW_CODE_SANDBOX=false, no kernel_id)", bound, false, false})
	}
	for _, bound := range []int{1, 20, 100} {
		runs = append(runs, run{"watchers", "watchers (JUPYTER_MCP_WATCH_NOTEBOOKS=true)", bound, true, true},
			run{"feed", "sidecar feed (JUPYTER_MCP_WATCH_NOTEBOOKS=false)", bound, false, true})
	}
	var rows, hops []string
	seq := 0
	for _, mode := range runs {
		bound := mode.bound
		t.Run(fmt.Sprintf("%d/%s", bound, mode.short), func(t *testing.T) {
			var extra []string
			if mode.watch {
				extra = []string{"JUPYTER_MCP_WATCH_NOTEBOOKS=true", "JUPYTER_MCP_SIDECAR_FEED_URL="}
			}
			if !mode.kernel {
				extra = append(extra, "START_NEW_CODE_SANDBOX=false")
			}
			jms := fs.startJMS(t, extra)
			pid := jms.cmd.Process.Pid
			agent := sidecartest.StartTS(t, fs.clients, "sdk2.mjs", jms.url, "2026-07-28", mcpServerToken)
			var uris []string
			for n := range bound {
				name := fmt.Sprintf("nb%03d", n)
				args := map[string]any{"notebook_name": name, "notebook_path": name + ".ipynb"}
				if mode.kernel {
					args["kernel_id"] = kernel
				}
				callTool(t, agent, "use_notebook", args)
				uris = append(uris, "notebook://"+name)
			}
			listener := sidecartest.StartTS(t, fs.clients, "sdk2.mjs", jms.url, "2026-07-28", mcpServerToken)
			listener.Subscribe(uris...)
			if mode.watch {
				testenv.Eventually(t, 2*testenv.Wait, "a watcher per bound notebook", func() bool {
					return strings.Count(jms.logs.String(), "Watching notebook") >= bound
				})
			}
			conns := connsTo(t, pid, port)
			kconns := kernelConnections(t, fs.srv, kernel)
			applied0 := fs.sc.Metrics(commitToApplied+"_sum", commitToApplied+"_count")
			cpu0 := testenv.ProcCPU(t, pid)
			start := time.Now()
			var lat, toRow, toWS, wsToRow, rowToFeed, feedToNote, rowToNote []time.Duration
			for i := range edits {
				n := i % min(bound, edited)
				path, uri := fmt.Sprintf("nb%03d.ipynb", n), fmt.Sprintf("notebook://nb%03d", n)
				seq++
				t0 := time.Now()
				py.Do(map[string]any{"op": "set_source", "client": "p", "path": path, "index": 0, "source": fmt.Sprintf("v = %d", seq)})
				for {
					got := testenv.Receive(t, testenv.Wait, "the notification of "+uri, listener.Updates())
					if got == uri {
						break
					}
				}
				heard := time.Now()
				// The sidecar's event of the same edit (it tails the store in both modes):
				// the row's commit time and when the event left the feed.
				ev := fs.tap.arrival(t, path, t0)
				ws := broadcastArrival(t, py, path, t0)
				lat = append(lat, heard.Sub(t0))
				toRow = append(toRow, ev.commit.Sub(t0))
				toWS = append(toWS, ws.Sub(t0))
				wsToRow = append(wsToRow, ev.commit.Sub(ws))
				rowToFeed = append(rowToFeed, ev.at.Sub(ev.commit))
				feedToNote = append(feedToNote, heard.Sub(ev.at))
				rowToNote = append(rowToNote, heard.Sub(ev.commit))
				time.Sleep(300 * time.Millisecond) // stimulus pacing: past both debounces, one edit per burst
			}
			wall := time.Since(start)
			cpu1, rss := testenv.ProcCPU(t, pid), testenv.ProcStatus(t, pid, "VmRSS")
			applied1 := fs.sc.Metrics(commitToApplied+"_sum", commitToApplied+"_count")
			applied := time.Duration((applied1[0] - applied0[0]) / max(applied1[1]-applied0[1], 1) * float64(time.Second))
			ms := func(ds []time.Duration) string {
				p50, p99 := percentiles(ds)
				return fmt.Sprintf("%v / %v", p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond))
			}
			p50, p99 := percentiles(lat)
			row := fmt.Sprintf("| %s | %d | %d | %v | %v | %d (%d kernel) | %.0f MB | %.1f %% |", mode.name, bound, len(lat),
				p50.Round(time.Millisecond), p99.Round(time.Millisecond), conns, kconns,
				rss*1e6/(1<<20), 100*float64(cpu1-cpu0)/float64(wall))
			hop := fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %v | %s | %s |", mode.name, bound, ms(toWS), ms(wsToRow), ms(toRow), ms(rowToFeed),
				applied.Round(100*time.Microsecond), ms(feedToNote), ms(rowToNote))
			t.Log(row)
			t.Log(hop)
			rows = append(rows, row)
			hops = append(hops, hop)
		})
	}
	t.Logf("\n| mode | bound notebooks | edits | p50 | p99 | connections to Jupyter (of which kernel websockets) | RSS | CPU during the edits |\n|---|---|---|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
	t.Logf("\nhops, p50 / p99:\n| mode | bound notebooks | edit sent → broadcast at a client | broadcast → store row | edit sent → store row | row → sidecar's feed event | row → applied (mean) | feed event → notification | row → notification |\n|---|---|---|---|---|---|---|---|---|\n%s", strings.Join(hops, "\n"))
}
