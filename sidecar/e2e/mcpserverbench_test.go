package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/e2e/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/testutil"
)

// procStat is a process's CPU time (user + system) and resident set size, from /proc.
func procStat(t *testing.T, pid int) (cpu time.Duration, rssKB int) {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rssKB, _ = strconv.Atoi(strings.Fields(v)[0])
		}
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, rssKB // USER_HZ 100
}

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
		py.Do(map[string]any{"op": "join", "client": "p", "path": fmt.Sprintf("nb%03d.ipynb", n)})
	}
	fs.tap.settled(t)
	modes := []struct {
		name  string
		extra []string
	}{
		{"watchers (JUPYTER_MCP_WATCH_NOTEBOOKS=true)", []string{"JUPYTER_MCP_WATCH_NOTEBOOKS=true", "JUPYTER_MCP_SIDECAR_FEED_URL="}},
		{"sidecar feed (JUPYTER_MCP_WATCH_NOTEBOOKS=false)", nil},
	}
	var rows []string
	seq := 0
	for _, bound := range []int{1, 20, 100} {
		for _, mode := range modes {
			t.Run(fmt.Sprintf("%d/%s", bound, mode.name[:7]), func(t *testing.T) {
				jms := fs.startJMS(t, mode.extra)
				pid := jms.cmd.Process.Pid
				agent := startTS(t, fs.clients, "sdk2.mjs", jms.url, "2026-07-28", mcpServerToken)
				var uris []string
				for n := range bound {
					name := fmt.Sprintf("nb%03d", n)
					callTool(t, agent, "use_notebook", map[string]any{"notebook_name": name, "notebook_path": name + ".ipynb", "kernel_id": kernel})
					uris = append(uris, "notebook://"+name)
				}
				listener := startTS(t, fs.clients, "sdk2.mjs", jms.url, "2026-07-28", mcpServerToken)
				listener.subscribe(uris...)
				if mode.extra != nil {
					testutil.Eventually(t, 2*testutil.Wait, "a watcher per bound notebook", func() bool {
						return strings.Count(jms.logs.String(), "Watching notebook") >= bound
					})
				}
				conns := connsTo(t, pid, port)
				cpu0, _ := procStat(t, pid)
				start := time.Now()
				var lat []time.Duration
				for i := range edits {
					n := i % min(bound, edited)
					uri := fmt.Sprintf("notebook://nb%03d", n)
					seq++
					t0 := time.Now()
					py.Do(map[string]any{"op": "set_source", "client": "p", "path": fmt.Sprintf("nb%03d.ipynb", n), "index": 0, "source": fmt.Sprintf("v = %d", seq)})
					for {
						got := testutil.Receive(t, testutil.Wait, "the notification of "+uri, listener.updates())
						if got == uri {
							break
						}
					}
					lat = append(lat, time.Since(t0))
					time.Sleep(300 * time.Millisecond) // stimulus pacing: past both debounces, one edit per burst
				}
				wall := time.Since(start)
				cpu1, rss := procStat(t, pid)
				slices.Sort(lat)
				row := fmt.Sprintf("| %s | %d | %d | %v | %v | %d | %.0f MB | %.1f %% |", mode.name, bound, len(lat),
					lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), conns,
					float64(rss)/1024, 100*float64(cpu1-cpu0)/float64(wall))
				t.Log(row)
				rows = append(rows, row)
			})
		}
	}
	t.Logf("\n| mode | bound notebooks | edits | p50 | p99 | connections to Jupyter | RSS | CPU during the edits |\n|---|---|---|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
}
