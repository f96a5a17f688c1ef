package jupyter

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish/publishtest"
)

// mcpServerVenvEnv names the virtual environment holding the real jupyter-mcp-server
// (testdata/jupyter-mcp-server/requirements.txt) with this repository's
// jupyter_mcp_sidecar_feed installed: .ci/run builds it.
const mcpServerVenvEnv = "SIDECAR_TEST_MCP_SERVER_VENV"

// mcpServerToken is the bearer token of jupyter-mcp-server's MCP endpoint (--mcp-token).
const mcpServerToken = "e2e-jupyter-mcp-server-token"

// recipe is docs/EVENTS.md's recipe: the sidecar's whole YAML and jupyter-mcp-server's
// shell lines, its start command included.
type recipe struct {
	yaml string
	sh   []string
}

// The recipe's placeholders, which the tests replace with their own paths, addresses
// and secrets; nothing else of the recipe is changed.
const (
	recipeStore     = "/srv/jupyter/.jupyter_ystore.db"
	recipeFileID    = "/home/jupyter/.local/share/jupyter/file_id_manager.db"
	recipeRoot      = "/srv/jupyter"
	recipeFeedAddr  = "127.0.0.1:8766"
	recipeFeedToken = "a-long-random-secret"
	recipeJupyter   = "http://127.0.0.1:8888"
	recipeJMSPort   = "--port 4041"
	recipeStart     = "jupyter-mcp-server start "
)

// readRecipe takes the recipe's yaml and sh blocks from docs/EVENTS.md, as written.
func readRecipe(t *testing.T) recipe {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sidecartest.RepoRoot, "docs", "EVENTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Recipe: jupyter-mcp-server with `JUPYTER_MCP_WATCH_NOTEBOOKS=false`")
	if start < 0 {
		t.Fatal("docs/EVENTS.md has no recipe section")
	}
	doc = doc[start:]
	block := func(lang string) string {
		m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(doc)
		if m == nil {
			t.Fatalf("the recipe has no %s block", lang)
		}
		return m[1]
	}
	return recipe{yaml: block("yaml"), sh: strings.Split(strings.TrimSpace(block("sh")), "\n")}
}

// feedStack is a real Jupyter server, the built sidecar on its store serving the sse
// feed as docs/EVENTS.md's recipe configures it, and the test's own tap on that feed.
type feedStack struct {
	srv       *jupytertest.Server
	py        string // jupyter-mcp-server's environment's python
	rc        recipe
	feedAddr  string
	feedToken string
	tap       *feedTap
	clients   string // testdata/mcpclient
	sc        *sidecartest.Sidecar
	scDir     string // the sidecar's directory and configuration, for a restart
	scCfg     string
}

// startFeedStack starts the stack with notebooks (API path → nbformat JSON); it skips
// (fails on CI) without the jupyter-mcp-server environment or the TypeScript clients.
func startFeedStack(t *testing.T, notebooks map[string]string) *feedStack {
	t.Helper()
	jupytertest.Need(t)
	fs := &feedStack{py: needMCPServer(t), rc: readRecipe(t),
		clients: filepath.Join(sidecartest.RepoRoot, "testdata", "mcpclient"), feedToken: "e2e-feed-token-0123456789"}
	if _, err := os.Stat(filepath.Join(fs.clients, "node_modules")); err != nil {
		testenv.Need(t, err, "npm ci in testdata/mcpclient")
	}
	fs.srv = jupytertest.Start(t, jupytertest.Options{Notebooks: notebooks})
	fs.feedAddr = testenv.FreeAddr(t)
	// The recipe's YAML is the sidecar's whole configuration (sidecartest.Launch adds the listener,
	// the token and the log format of every test).
	cfg := strings.NewReplacer(recipeStore, fs.srv.StorePath, recipeFileID, fs.srv.FileIDPath, recipeRoot, fs.srv.Root,
		recipeFeedAddr, fs.feedAddr, recipeFeedToken, fs.feedToken).Replace(fs.rc.yaml)
	fs.scDir, fs.scCfg = t.TempDir(), cfg
	fs.sc = sidecartest.Launch(t, fs.scDir, cfg, "serve")
	fs.tap = tapFeed(t, "http://"+fs.feedAddr+"/events", fs.feedToken)
	return fs
}

// needMCPServer is the python of the jupyter-mcp-server environment, with this
// repository's jupyter_mcp_sidecar_feed installed; it skips (fails on CI) without it.
func needMCPServer(t *testing.T) string {
	t.Helper()
	venv := os.Getenv(mcpServerVenvEnv)
	var err error
	if venv == "" {
		err = fmt.Errorf("%s is not set", mcpServerVenvEnv)
	}
	testenv.Need(t, err, "export "+mcpServerVenvEnv+"=$(scripts/jupyter-venv.sh testdata/jupyter-mcp-server/requirements.txt) and pip install ./jupyter_mcp_sidecar_feed into it")
	py := filepath.Join(venv, "bin", "python")
	if out, err := exec.Command(py, "-c", "import importlib.metadata as m; print(m.version('jupyter-mcp-sidecar-feed'), m.version('jupyter-mcp-server'))").CombinedOutput(); err != nil {
		testenv.Need(t, fmt.Errorf("%s: %s", err, out), "pip install ./jupyter_mcp_sidecar_feed into "+venv)
	} else {
		t.Logf("installed: jupyter-mcp-sidecar-feed, jupyter-mcp-server: %s", strings.TrimSpace(string(out)))
	}
	return py
}

// restartSidecar stops the sidecar and starts it again on the same store and feed
// address (a new run: the feed's ids of the old one are a gap).
func (fs *feedStack) restartSidecar(t *testing.T) {
	t.Helper()
	fs.sc.Stop()
	fs.sc = sidecartest.Launch(t, fs.scDir, fs.scCfg, "serve")
}

// startJMS starts one jupyter-mcp-server replica with the recipe's environment, plus
// extra variables (later ones win).
func (fs *feedStack) startJMS(t *testing.T, extra []string) *jmsProcess {
	t.Helper()
	return startJMS(t, fs.py, fs.srv, fs.rc, fs.feedAddr, fs.feedToken, extra...)
}

// jmsProcess is one running jupyter-mcp-server.
type jmsProcess struct {
	url  string // its MCP endpoint
	cmd  *exec.Cmd
	logs *testenv.LockedBuffer
}

// startJMS starts the real jupyter-mcp-server on jupyter as the recipe's shell lines
// say, run by bash as written (the feed at feedAddr, the recipe's placeholders
// replaced), with extra variables exported before its start command (later ones win).
// It waits until the server serves and its feed has reached the sidecar (a stream open,
// or the token refused).
func startJMS(t *testing.T, py string, jupyter *jupytertest.Server, rc recipe, feedAddr, feedToken string, extra ...string) *jmsProcess {
	t.Helper()
	if len(rc.sh) == 0 || rc.sh[0] != "pip install ./jupyter_mcp_sidecar_feed" {
		t.Fatalf("the recipe starts with %q; .ci/run installs ./jupyter_mcp_sidecar_feed", rc.sh)
	}
	port := testenv.FreePort(t)
	p := &jmsProcess{url: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), logs: &testenv.LockedBuffer{}}
	replace := strings.NewReplacer(recipeFeedAddr, feedAddr, recipeFeedToken, feedToken, recipeJupyter, jupyter.URL,
		recipeJMSPort, fmt.Sprintf("--port %d", port))
	var script, exported []string
	started := false
	for _, line := range rc.sh[1:] { // pip install: done by .ci/run into the environment (needMCPServer)
		line = replace.Replace(line)
		if strings.HasPrefix(line, recipeStart) {
			for _, kv := range extra {
				script = append(script, "export "+shellQuote(kv))
			}
			started = true
		}
		if kv, ok := strings.CutPrefix(line, "export "); ok && !started {
			exported = append(exported, kv)
		}
		script = append(script, line)
	}
	if !started {
		t.Fatalf("the recipe has no %q command", strings.TrimSpace(recipeStart))
	}
	// The last value of a variable is the one used; an empty feed URL turns the package off.
	feedOn := false
	for _, kv := range append(exported, extra...) {
		if v, ok := strings.CutPrefix(kv, "JUPYTER_MCP_SIDECAR_FEED_URL="); ok {
			feedOn = v != ""
		}
	}
	// jupyter-mcp-server is the environment's console script, run by its python: the
	// environment was built elsewhere and moved, so the script's #! names the old place.
	bin := t.TempDir()
	shim := fmt.Sprintf("#!/bin/sh\nexec %s %s \"$@\"\n", shellQuote(py), shellQuote(filepath.Join(filepath.Dir(py), "jupyter-mcp-server")))
	if err := os.WriteFile(filepath.Join(bin, "jupyter-mcp-server"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command("bash", "-e", "-c", strings.Join(script, "\n"))
	p.cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"JUPYTER_TOKEN="+jupytertest.Token, "MCP_TOKEN="+mcpServerToken, "COLUMNS=400", "PYTHONUNBUFFERED=1")
	p.cmd.Dir = t.TempDir()
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("jupyter-mcp-server logs:\n%s", p.logs.String())
		}
	})
	testenv.Eventually(t, 90*time.Second, "jupyter-mcp-server serving with its feed at the sidecar", func() bool {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			conn.Close()
		}
		return err == nil && (p.logs.Contains("sidecar feed: stream open") || p.logs.Contains("refused the token") || !feedOn)
	}, p.logs.String)
	return p
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// feedTap is the test's own consumer of the sse feed: the events per path, when each
// arrived, and the first of them for the schema check at the end of the test.
type feedTap struct {
	mu       sync.Mutex
	events   map[string]int
	arrivals map[string][]tapArrival
	payloads [][]byte
}

// tapArrival is one change event as the tap received it.
type tapArrival struct {
	at     time.Time // received
	commit time.Time // the event's time: the commit time of the newest row behind it
}

// maxArrivals bounds the arrivals kept per path.
const maxArrivals = 10000

func tapFeed(t *testing.T, url, tok string) *feedTap {
	t.Helper()
	var resp *http.Response
	testenv.Eventually(t, testenv.Wait, "the sse feed answering", func() bool {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		var err error
		resp, err = http.DefaultClient.Do(req)
		return err == nil
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tap the feed: %s", resp.Status)
	}
	t.Cleanup(func() { resp.Body.Close() })
	f := &feedTap{events: map[string]int{}, arrivals: map[string][]tapArrival{}}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range f.payloads {
			var ev publish.Event
			publishtest.Validate(t, p, &ev)
		}
	})
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		kind := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				kind = line[7:]
			case strings.HasPrefix(line, "data: ") && kind == "change":
				at := time.Now()
				var ev struct {
					Path string
					Time time.Time
				}
				if json.Unmarshal([]byte(line[6:]), &ev) == nil {
					f.mu.Lock()
					f.events[ev.Path]++
					if len(f.arrivals[ev.Path]) < maxArrivals {
						f.arrivals[ev.Path] = append(f.arrivals[ev.Path], tapArrival{at, ev.Time})
					}
					if len(f.payloads) < 2000 {
						f.payloads = append(f.payloads, []byte(line[6:]))
					}
					f.mu.Unlock()
				}
			}
		}
	}()
	return f
}

func (f *feedTap) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.events[path]
}

// arrival waits for the first event of path whose newest row was committed at or after
// from, and returns it.
func (f *feedTap) arrival(t *testing.T, path string, from time.Time) tapArrival {
	t.Helper()
	var got tapArrival
	testenv.Eventually(t, testenv.Wait, "the feed's event of "+path, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, a := range f.arrivals[path] {
			if !a.commit.Before(from) {
				got = a
				return true
			}
		}
		return false
	})
	return got
}

// heard counts what a client was told, per URI, as it arrives.
type heard struct {
	mu  sync.Mutex
	got map[string]int
}

func listenTo(c sidecartest.MCPClient) *heard {
	h := &heard{got: map[string]int{}}
	go func() {
		for uri := range c.Updates() {
			h.mu.Lock()
			h.got[uri]++
			h.mu.Unlock()
		}
	}()
	return h
}

func (h *heard) n(uri string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[uri]
}

func (h *heard) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(h.got)
}

// callTool calls a tool of jupyter-mcp-server through the TypeScript client and fails on
// an error result.
func callTool(t *testing.T, c *sidecartest.TSClient, name string, args map[string]any) string {
	t.Helper()
	raw := c.Do(map[string]any{"op": "call", "name": name, "arguments": args})
	var res struct {
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || res.IsError {
		t.Fatalf("%s: %s", name, raw)
	}
	return string(raw)
}

// cellsOf is the ids and sources of a notebook resource's cells.
func cellsOf(t *testing.T, text string) (ids, sources []string) {
	t.Helper()
	var nb struct {
		Cells []struct {
			ID     string `json:"id"`
			Source any    `json:"source"`
		} `json:"cells"`
	}
	if err := json.Unmarshal([]byte(text), &nb); err != nil {
		t.Fatalf("notebook resource: %v\n%.500s", err, text)
	}
	for _, c := range nb.Cells {
		ids = append(ids, c.ID)
		sources = append(sources, multiline(c.Source))
	}
	return ids, sources
}

// TestJupyterMCPServerFeed runs the real jupyter-mcp-server with
// JUPYTER_MCP_WATCH_NOTEBOOKS=false and jupyter_mcp_sidecar_feed, configured exactly as
// docs/EVENTS.md's recipe says, on the sidecar's sse feed of a real Jupyter server's
// store. The official TypeScript clients of both eras connect to jupyter-mcp-server,
// and each hears, once, with the right cell URIs, a person's edit over the websocket,
// an agent's insert_cell / overwrite_cell_source / execute_cell through
// jupyter-mcp-server, and a .ipynb rewritten on disk with no room open; its
// resources/read returns the new content.
func TestJupyterMCPServerFeed(t *testing.T) {
	const path, diskPath = "team/a.ipynb", "disk.ipynb"
	fs := startFeedStack(t, map[string]string{
		path:     jupytertest.NotebookJSON([2]string{"c1", "x = 1"}, [2]string{"c2", "print(x)"}),
		diskPath: jupytertest.NotebookJSON([2]string{"d1", "y = 1"}),
	})
	srv, tap, dir := fs.srv, fs.tap, fs.clients
	jms := fs.startJMS(t, nil)
	if code, st := jms.feedStatus(t); code != http.StatusOK || st["state"] != "live" {
		t.Fatalf("GET /api/sidecar-feed: %d %v, want 200 live", code, st)
	}
	agent := sidecartest.StartTS(t, dir, "sdk2.mjs", jms.url, "2026-07-28", mcpServerToken)
	// "work" last: execute_cell runs in the current notebook.
	callTool(t, agent, "use_notebook", map[string]any{"notebook_name": "disk", "notebook_path": diskPath})
	callTool(t, agent, "use_notebook", map[string]any{"notebook_name": "work", "notebook_path": path})
	listeners := []*sidecartest.TSClient{
		sidecartest.StartTS(t, dir, "sdk1.mjs", jms.url, "2025-11-25", mcpServerToken),
		sidecartest.StartTS(t, dir, "sdk2.mjs", jms.url, "2026-07-28", mcpServerToken),
	}
	var hs []*heard
	for _, l := range listeners {
		l.Subscribe("notebook://work", sidecartest.CellURI("work", "c1"), sidecartest.CellURI("work", "c2"), sidecartest.CellURI("work", "c2")+"/outputs/0",
			"notebook://disk", sidecartest.CellURI("disk", "d1"))
		hs = append(hs, listenTo(l))
	}

	// mark is what the feed sent of a path and each listener heard, before an action.
	type mark struct {
		events int
		heard  []map[string]int
	}
	snapshot := func(nbPath string, uris ...string) mark {
		m := mark{events: tap.count(nbPath)}
		for _, h := range hs {
			got := map[string]int{}
			for _, u := range uris {
				got[u] = h.n(u)
			}
			m.heard = append(m.heard, got)
		}
		return m
	}
	// once waits until the feed sent an event of sidecartest.NbPath since m and every listener heard
	// each of uris since, and the notebook URI (uris[0]) exactly as often as the feed sent
	// events: once per change, never a second time for one (the tool's own publish of an
	// edit suppressed while the feed announces it).
	once := func(what, nbPath string, m mark, uris ...string) {
		t.Helper()
		testenv.Eventually(t, testenv.Wait, what+": the feed's event", func() bool { return tap.count(nbPath) > m.events })
		for i, h := range hs {
			testenv.Eventually(t, testenv.Wait, fmt.Sprintf("%s: %s told", what, listeners[i].Name()), func() bool {
				for _, u := range uris[1:] {
					if h.n(u) <= m.heard[i][u] {
						return false
					}
				}
				return h.n(uris[0])-m.heard[i][uris[0]] == tap.count(nbPath)-m.events
			}, h.String)
			// The feed's event reaches the tap a moment before jupyter-mcp-server's
			// announcement of it reaches the listener: a second announcement of the same
			// change would show within that moment as more than the feed sent.
			if testenv.Within(time.Second, func() bool {
				return h.n(uris[0])-m.heard[i][uris[0]] > tap.count(nbPath)-m.events
			}) == nil {
				t.Fatalf("%s: %s heard %s more often than the feed sent events (%d): %s", what, listeners[i].Name(),
					uris[0], tap.count(nbPath)-m.events, h.String())
			}
		}
	}

	// A person edits c1 over the websocket.
	person := srv.Client()
	m := snapshot(path, "notebook://work", sidecartest.CellURI("work", "c1"))
	person.Do(map[string]any{"op": "join", "client": "p", "path": path})
	person.Do(map[string]any{"op": "set_source", "client": "p", "path": path, "index": 0, "source": "x = 41"})
	once("a person's edit", path, m, "notebook://work", sidecartest.CellURI("work", "c1"))
	for _, l := range listeners {
		testenv.Eventually(t, testenv.Wait, l.Name()+" reads the person's edit", func() bool {
			return strings.Contains(l.Read(sidecartest.CellURI("work", "c1")), "x = 41")
		})
	}

	// The agent edits through jupyter-mcp-server's own tools.
	m = snapshot(path, "notebook://work", sidecartest.CellURI("work", "c2"))
	callTool(t, agent, "overwrite_cell_source", map[string]any{"notebook_name": "work", "cell_index": 1, "cell_source": "print(6 * 7)"})
	once("overwrite_cell_source", path, m, "notebook://work", sidecartest.CellURI("work", "c2"))
	m = snapshot(path, "notebook://work")
	callTool(t, agent, "insert_cell", map[string]any{"notebook_name": "work", "cell_index": 2, "cell_type": "code", "cell_source": "z = 3"})
	once("insert_cell", path, m, "notebook://work")
	for _, l := range listeners {
		ids, sources := cellsOf(t, l.Read("notebook://work"))
		if len(ids) != 3 || sources[2] != "z = 3" || sources[1] != "print(6 * 7)" {
			t.Fatalf("%s reads %v %q after the agent's edits", l.Name(), ids, sources)
		}
	}
	m = snapshot(path, "notebook://work", sidecartest.CellURI("work", "c2"), sidecartest.CellURI("work", "c2")+"/outputs/0")
	callTool(t, agent, "execute_cell", map[string]any{"notebook_name": "work", "cell_index": 1, "timeout": 120})
	once("execute_cell", path, m, "notebook://work", sidecartest.CellURI("work", "c2"), sidecartest.CellURI("work", "c2")+"/outputs/0")
	for _, l := range listeners {
		testenv.Eventually(t, testenv.Wait, l.Name()+" reads the output", func() bool {
			return strings.Contains(l.Read(sidecartest.CellURI("work", "c2")+"/outputs/0"), "42")
		})
	}

	// The .ipynb of the other notebook rewritten on disk with no room open: the store
	// knows its room (a person opened it), which is closed again.
	deleted := func(id string) int { return strings.Count(srv.Log(), "Room json:notebook:"+id+" deleted") }
	diskID, _ := person.Do(map[string]any{"op": "join", "client": "p", "path": diskPath})["file_id"].(string)
	n := deleted(diskID)
	person.Do(map[string]any{"op": "forget", "client": "p", "path": diskPath})
	testenv.Eventually(t, 2*testenv.Wait, "the room of "+diskPath+" closed (document_cleanup_delay)", func() bool { return deleted(diskID) > n })
	m = snapshot(diskPath, "notebook://disk", sidecartest.CellURI("disk", "d1"))
	srv.WriteFile(diskPath, jupytertest.NotebookJSON([2]string{"d1", "y = 2"}))
	once("a file rewritten on disk", diskPath, m, "notebook://disk", sidecartest.CellURI("disk", "d1"))
	for _, l := range listeners {
		testenv.Eventually(t, testenv.Wait, l.Name()+" reads the file's content", func() bool {
			return strings.Contains(l.Read(sidecartest.CellURI("disk", "d1")), "y = 2")
		})
	}

	// The sidecar restarts: jupyter-mcp-server's feed reconnects (with backoff), is told
	// of the gap (Last-Event-ID of the old run) and announces every bound notebook whole.
	m = snapshot(path, "notebook://work", "notebook://disk")
	opened := strings.Count(jms.logs.String(), "sidecar feed: stream open")
	fs.restartSidecar(t)
	for i, h := range hs {
		testenv.Eventually(t, 2*testenv.Wait, listeners[i].Name()+" told of every bound notebook after the gap", func() bool {
			return h.n("notebook://work") > m.heard[i]["notebook://work"] && h.n("notebook://disk") > m.heard[i]["notebook://disk"]
		}, h.String)
	}
	if !jms.logs.Contains(`events lost ({"v":1,"reason":"restart"`) {
		t.Errorf("jupyter-mcp-server's feed was not told of the restart as a gap")
	}
	if n := strings.Count(jms.logs.String(), "sidecar feed: stream open"); n <= opened {
		t.Errorf("no \"stream open\" after the reconnect (%d before, %d after)", opened, n)
	}
	if !jms.logs.Contains("sidecar feed") || strings.Contains(jms.logs.String(), "Watching notebook") {
		t.Errorf("jupyter-mcp-server watched a notebook itself (or never read the feed)")
	}
}

// feedStatus is jupyter-mcp-server's GET /api/sidecar-feed: its status and body.
func (p *jmsProcess) feedStatus(t *testing.T) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(p.url, "/mcp") + "/api/sidecar-feed")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET /api/sidecar-feed: %s: %v", resp.Status, err)
	}
	return resp.StatusCode, body
}

// TestJupyterMCPServerFeedWrongToken: jupyter-mcp-server started by the recipe with a
// feed token the sidecar does not know says so loudly, an ERROR naming the variable to
// fix, and its status route answers 503 "refused" (its tools still work).
func TestJupyterMCPServerFeedWrongToken(t *testing.T) {
	fs := startFeedStack(t, map[string]string{"a.ipynb": jupytertest.NotebookJSON([2]string{"c1", "x = 1"})})
	jms := fs.startJMS(t, []string{"JUPYTER_MCP_SIDECAR_FEED_TOKEN=not-the-sidecars-token-0123"})
	if !regexp.MustCompile(`ERROR.*refused the token \(HTTP 401\): JUPYTER_MCP_SIDECAR_FEED_TOKEN`).MatchString(jms.logs.String()) {
		t.Errorf("no ERROR naming the feed token:\n%s", jms.logs.String())
	}
	if code, st := jms.feedStatus(t); code != http.StatusServiceUnavailable || st["state"] != "refused" {
		t.Fatalf("GET /api/sidecar-feed: %d %v, want 503 refused", code, st)
	}
	agent := sidecartest.StartTS(t, fs.clients, "sdk2.mjs", jms.url, "2026-07-28", mcpServerToken)
	callTool(t, agent, "use_notebook", map[string]any{"notebook_name": "a", "notebook_path": "a.ipynb"})
}

// settled waits until the feed has sent nothing for a second: the writes of a setup
// (rooms opened, notebooks loaded) are all announced before a test counts.
func (f *feedTap) settled(t *testing.T) {
	t.Helper()
	total := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		for _, c := range f.events {
			n += c
		}
		return n
	}
	testenv.Eventually(t, 2*testenv.Wait, "the feed quiet for a second", func() bool {
		n := total()
		return testenv.Within(time.Second, func() bool { return total() != n }) != nil
	})
}

// startKernel starts one kernel on the Jupyter server for use_notebook to bind notebooks
// to (instead of a kernel per notebook).
func startKernel(t *testing.T, srv *jupytertest.Server) string {
	t.Helper()
	code, body := srv.REST(http.MethodPost, "/api/kernels", map[string]any{"name": "python3"})
	var k struct{ ID string }
	if code != http.StatusCreated || json.Unmarshal(body, &k) != nil || k.ID == "" {
		t.Fatalf("start a kernel: %d %s", code, body)
	}
	return k.ID
}

// TestJupyterMCPServerFeedReplicas: two jupyter-mcp-server replicas on one sidecar feed,
// 20 notebooks bound on each, a client of each era on each replica subscribed to all of
// them; 500 edits across the 20 by four writers over the websocket (two per notebook).
// Every client hears each notebook's URI exactly as often as the feed sent events of it
// (0 lost, 0 duplicates; the sidecar's debounce is the only coalescing) and reads the
// last edit through its replica.
func TestJupyterMCPServerFeedReplicas(t *testing.T) {
	const notebooks, edits, writers = 20, 500, 4
	nbs := map[string]string{}
	for n := range notebooks {
		nbs[fmt.Sprintf("nb%02d.ipynb", n)] = jupytertest.NotebookJSON([2]string{"c0", "v = 0"})
	}
	fs := startFeedStack(t, nbs)
	kernel := startKernel(t, fs.srv)
	var clients []*sidecartest.TSClient
	var hs []*heard
	for r := range 2 {
		jms := fs.startJMS(t, nil)
		agent := sidecartest.StartTS(t, fs.clients, "sdk2.mjs", jms.url, "2026-07-28", mcpServerToken)
		var uris []string
		for n := range notebooks {
			name := fmt.Sprintf("nb%02d", n)
			callTool(t, agent, "use_notebook", map[string]any{"notebook_name": name, "notebook_path": name + ".ipynb", "kernel_id": kernel})
			uris = append(uris, "notebook://"+name)
		}
		for _, era := range [][2]string{{"sdk1.mjs", "2025-11-25"}, {"sdk2.mjs", "2026-07-28"}} {
			c := sidecartest.StartTS(t, fs.clients, era[0], jms.url, era[1], mcpServerToken)
			c.Subscribe(uris...)
			clients = append(clients, c)
			hs = append(hs, listenTo(c))
		}
		t.Logf("replica %d: %s", r, jms.url)
	}
	py := fs.srv.Client()
	for w := range writers {
		for n := w % 2; n < notebooks; n += 2 {
			py.Do(map[string]any{"op": "join", "client": fmt.Sprintf("w%d", w), "path": fmt.Sprintf("nb%02d.ipynb", n)})
		}
	}
	fs.tap.settled(t)
	base := make([]map[string]int, len(hs))
	tapBase := map[string]int{}
	for n := range notebooks {
		tapBase[fmt.Sprintf("nb%02d.ipynb", n)] = fs.tap.count(fmt.Sprintf("nb%02d.ipynb", n))
	}
	for i, h := range hs {
		base[i] = map[string]int{}
		for n := range notebooks {
			base[i][fmt.Sprintf("nb%02d", n)] = h.n(fmt.Sprintf("notebook://nb%02d", n))
		}
	}

	// Paced (stimulus pacing, not a wait): 20 ms apart, a notebook's edits come 400 ms
	// apart, past the sidecar's 250 ms debounce, so most are events of their own.
	pace := time.NewTicker(20 * time.Millisecond)
	defer pace.Stop()
	start := time.Now()
	for i := range edits {
		<-pace.C
		n := i % notebooks
		w := n%2 + 2*((i/notebooks)%2) // the notebook's two writers in turn
		py.Do(map[string]any{"op": "set_source", "client": fmt.Sprintf("w%d", w), "path": fmt.Sprintf("nb%02d.ipynb", n),
			"index": 0, "source": fmt.Sprintf("v = %d", i)})
	}
	t.Logf("%d edits in %v", edits, time.Since(start))

	// diff is, per notebook, what a client heard beyond the feed's events since the base.
	diff := func(i int) (short, over []string) {
		for n := range notebooks {
			name := fmt.Sprintf("nb%02d", n)
			heardN := hs[i].n("notebook://"+name) - base[i][name]
			sent := fs.tap.count(name+".ipynb") - tapBase[name+".ipynb"]
			switch {
			case heardN < sent || sent == 0:
				short = append(short, fmt.Sprintf("%s heard %d of %d", name, heardN, sent))
			case heardN > sent:
				over = append(over, fmt.Sprintf("%s heard %d, %d sent", name, heardN, sent))
			}
		}
		return short, over
	}
	events := 0
	for i, c := range clients {
		testenv.Eventually(t, 2*testenv.Wait, c.Name()+" heard every event", func() bool {
			short, over := diff(i)
			return len(short) == 0 && len(over) == 0
		}, func() string { short, over := diff(i); return fmt.Sprint(short, over) })
	}
	for i, c := range clients {
		if testenv.Within(time.Second, func() bool { _, over := diff(i); return len(over) > 0 }) == nil {
			// A late event (a save the sidecar then serves from the file) may reach a
			// client through its server before the tap has read it from the same feed:
			// judged again once the feed is quiet and the tap has read all it sent.
			fs.tap.settled(t)
			if _, over := diff(i); len(over) > 0 {
				t.Fatalf("%s heard more than the feed sent: %v", c.Name(), over)
			}
		}
	}
	for n := range notebooks {
		events += fs.tap.count(fmt.Sprintf("nb%02d.ipynb", n)) - tapBase[fmt.Sprintf("nb%02d.ipynb", n)]
	}
	t.Logf("%d edits → %d feed events (debounced), heard exactly by each of %d clients on 2 replicas", edits, events, len(clients))
	// Each notebook, read through each replica (its sdk2 client), is what its writers see
	// (two writers replacing one source concurrently may merge: the CRDT's answer).
	for _, c := range []*sidecartest.TSClient{clients[1], clients[3]} {
		for n := range notebooks {
			path := fmt.Sprintf("nb%02d.ipynb", n)
			_, want := cellsOf(t, string(py.Notebook(fmt.Sprintf("w%d", n%2), path)))
			_, got := cellsOf(t, c.Read(fmt.Sprintf("notebook://nb%02d", n)))
			if !slices.Equal(got, want) || !strings.HasPrefix(got[0], "v = ") {
				t.Fatalf("%s reads %s as %q; its writer sees %q", c.Name(), path, got, want)
			}
		}
	}
}
