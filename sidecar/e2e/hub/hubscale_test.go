package hub

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

// The hub-mode scale benchmark's shape: users' stores on disk, notebooks per store,
// recorded histories in the pool, template stores assembled from it, Jupyter's
// checkpoint interval.
const (
	hubNotebooks       = 20
	hubPoolSize        = 40
	hubTemplates       = 8
	checkpointInterval = 100
)

// TestHubScale measures hub mode at scale behind a real JupyterHub (issue 9, Scale): 1,000
// users' SQLite stores of 20 notebooks each, written by the pycrdt-like writer with a
// checkpoint every 100 rows from recorded @jupyter/ydoc sessions; 50 users active, their
// mcp-go clients (2026-07-28 stateless and 2025-11-25 sessions) reading every notebook.
// It reports the sidecar's RSS idle, with the 50 users active and after the idle timeout
// released them, against what the same 1,000 notebooks take decoded alone (the live Go
// heap they add to this process, and the RSS of a process that only holds them), and the
// first read of an idle user's notebook over many users. It takes minutes, so it runs
// only with E2E_HUBSCALE=1 and without -race (E2E_HUBSCALE_USERS, _ACTIVE, _COLD and
// _SETTLE override the user counts and how long RSS is watched after the release).
func TestHubScale(t *testing.T) {
	if os.Getenv("E2E_HUBSCALE") != "1" {
		t.Skip("set E2E_HUBSCALE=1 to measure")
	}
	if sidecartest.RaceBuild {
		t.Skip("measure memory without -race")
	}
	users, active, cold := sidecartest.EnvInt(t, "E2E_HUBSCALE_USERS", 1000), sidecartest.EnvInt(t, "E2E_HUBSCALE_ACTIVE", 50), sidecartest.EnvInt(t, "E2E_HUBSCALE_COLD", 200)
	settle := time.Duration(sidecartest.EnvInt(t, "E2E_HUBSCALE_SETTLE", 180)) * time.Second
	if active+cold > users {
		t.Fatalf("%d active and %d cold users need %d users, have %d", active, cold, active+cold, users)
	}
	const idle = 15 * time.Second
	root := t.TempDir()

	begin := time.Now()
	pool := historyPool(t)
	tpls := buildTemplates(t, filepath.Join(root, "templates"), pool)
	names := make([]string, users)
	for i := range names {
		names[i] = fmt.Sprintf("u%04d", i)
		makeHome(t, root, names[i], tpls[i%len(tpls)])
	}
	lo, hi := rowRange(pool)
	t.Logf("HUBSCALE stores: %d users × %d notebooks from %d recorded sessions (%d templates, %d–%d rows a notebook, one checkpoint every %d rows), %.1f MB a store, built in %v",
		users, hubNotebooks, len(pool), len(tpls), lo, hi, checkpointInterval, fileMB(t, filepath.Join(root, "home", names[0], ".jupyter_ystore.db")), time.Since(begin).Round(time.Second))

	port := testenv.FreePort(t)
	hub := jhubtest.Start(t, fmt.Sprintf("http://127.0.0.1:%d", port))
	// Only the users who make requests need to be Hub users; a busy Hub creates a
	// few dozen a second, so in batches.
	for i := 0; i < active+cold; i += 25 {
		hub.AddUsers(names[i:min(i+25, active+cold)]...)
	}
	tokens := make([]jhubtest.Token, active+cold)
	for i := range tokens {
		tokens[i] = hub.Token(names[i])
	}
	t.Setenv("JUPYTER_MCP_SIDECAR_LOG_LEVEL", "info") // a thousand loads at debug would be the benchmark
	sc := sidecartest.LaunchOn(t, root, port, hubConfig(hub.APIURL, root, "idle_timeout: "+idle.String()), "serve")
	endpoint := sc.URL + "/services/mcp/mcp"
	rss := func() float64 { return testenv.ProcStatus(t, sc.Cmd.Process.Pid, "VmRSS") }
	heap := func() string {
		m := func(name string) float64 { return sc.Metric(name) / 1e6 }
		return fmt.Sprintf("anonymous %.1f MB, file-backed %.1f MB; Go heap in use %.1f MB, next GC at %.1f MB, stacks %.1f MB, Go runtime total minus released %.1f MB, %v goroutines, %d open .db files, %d inotify instances",
			testenv.ProcStatus(t, sc.Cmd.Process.Pid, "RssAnon"), testenv.ProcStatus(t, sc.Cmd.Process.Pid, "RssFile"),
			m("go_memstats_heap_inuse_bytes"), m("go_memstats_next_gc_bytes"), m("go_memstats_stack_inuse_bytes"), m("go_memstats_sys_bytes")-m("go_memstats_heap_released_bytes"),
			sc.Metric("go_goroutines"), testenv.OpenFiles(t, sc.Cmd.Process.Pid, ".db"), testenv.OpenFiles(t, sc.Cmd.Process.Pid, "inotify"))
	}

	time.Sleep(2 * time.Second) // the freshly started process settles before the idle sample: a measurement's pace, not a wait
	baseline := rss()
	t.Logf("HUBSCALE idle baseline: RSS %.1f MB (%s)", baseline, heap())

	// Active: every client reads all of its user's notebooks, then keeps reading one so
	// that the idle timeout releases no user while RSS is sampled.
	clients := make([]*sidecartest.GoClient, active)
	var unbound atomic.Int64 // reads answered "not bound" before the user's bindings were loaded
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			clients[i] = mustGoAs(t, endpoint, i%5 != 0, tokens[i])
			for j := range hubNotebooks {
				if body := readBound(t, clients[i], fmt.Sprintf("notebook://nb%02d", j), &unbound); !strings.Contains(body, `"cells"`) {
					t.Errorf("%s reads nb%02d: %.200s", names[i], j, body)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("HUBSCALE %d users active (%d with 2025-11-25 sessions), %d notebooks read in %v; %d reads answered \"not bound\" first",
		active, (active+4)/5, active*hubNotebooks, time.Since(start).Round(time.Millisecond), unbound.Swap(0))
	stop := make(chan struct{})
	var keep sync.WaitGroup
	keep.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(idle / 3):
			}
			for _, c := range clients {
				if _, err := c.TryRead("notebook://nb00"); err != nil {
					t.Error(err)
				}
			}
		}
	})
	var activeRSS, activeAnon float64
	for range 5 {
		time.Sleep(time.Second) // the sampling pace
		activeRSS, activeAnon = max(activeRSS, rss()), max(activeAnon, testenv.ProcStatus(t, sc.Cmd.Process.Pid, "RssAnon"))
	}
	activeHeap := heap()
	close(stop)
	keep.Wait()
	if n := sc.Metric("jupyter_mcp_sidecar_hub_user_loads_total"); n != float64(active) {
		t.Fatalf("%v user loads while %d users were active: a user was released and loaded again", n, active)
	}

	alone := notebooksHeap(t, root, names[:active])
	t.Logf("HUBSCALE %d users active: RSS %.1f MB (%s); their %d notebooks alone: Go heap %.1f MB; RSS / notebooks = %.2f×, (RSS − idle baseline) / notebooks = %.2f×",
		active, activeRSS, activeHeap, active*hubNotebooks, alone, activeRSS/alone, (activeRSS-baseline)/alone)
	aloneRSS, aloneAnon := notebooksRSS(t, root, names[:active])
	t.Logf("HUBSCALE the same %d notebooks held by a process that does nothing else: RSS %.1f MB (anonymous %.1f MB); the sidecar's RSS / that = %.2f×, anonymous / anonymous = %.2f×",
		active*hubNotebooks, aloneRSS, aloneAnon, activeRSS/aloneRSS, activeAnon/aloneAnon)

	// Released: the clients go away and the idle timeout releases every user.
	for i, c := range clients {
		endSession(t, endpoint, c, tokens[i])
	}
	released := time.Now()
	testenv.Eventually(t, idle+time.Minute, fmt.Sprintf("%d users released after their last request", active), func() bool {
		return sc.Metric("jupyter_mcp_sidecar_hub_user_releases_total") >= float64(active)
	}, func() string {
		return fmt.Sprintf("%v released", sc.Metric("jupyter_mcp_sidecar_hub_user_releases_total"))
	})
	t.Logf("HUBSCALE every user released %v after the clients left (idle timeout %v): RSS %.1f MB (%s)",
		time.Since(released).Round(time.Second), idle, rss(), heap())
	for at := 15 * time.Second; at <= settle; at *= 2 {
		time.Sleep(time.Until(released.Add(at))) // the sampling schedule
		t.Logf("HUBSCALE %v after the clients left: RSS %.1f MB (%.2f× the idle baseline; %s)", at, rss(), rss()/baseline, heap())
	}

	// Cold: one idle user at a time makes their first request and reads a notebook.
	mean := func(histogram string, since [2]float64) time.Duration {
		sum, count := sc.Metric(histogram+"_sum")-since[0], sc.Metric(histogram+"_count")-since[1]
		return time.Duration(sum / count * 1e9).Round(time.Millisecond)
	}
	mark := func(histogram string) [2]float64 {
		return [2]float64{sc.Metric(histogram + "_sum"), sc.Metric(histogram + "_count")}
	}
	const loadHist, lookupHist = "jupyter_mcp_sidecar_hub_user_load_seconds", "jupyter_mcp_sidecar_auth_jupyterhub_lookup_seconds"
	loadMark, lookupMark := mark(loadHist), mark(lookupHist)
	lat, dials := make([]time.Duration, 0, cold), make([]time.Duration, 0, cold)
	for i := active; i < active+cold; i++ {
		begin := time.Now()
		c := mustGoAs(t, endpoint, true, tokens[i])
		dials = append(dials, time.Since(begin))
		if body := readBound(t, c, fmt.Sprintf("notebook://nb%02d", i%hubNotebooks), &unbound); !strings.Contains(body, `"cells"`) {
			t.Fatalf("%s's first read: %.200s", names[i], body)
		}
		lat = append(lat, time.Since(begin))
		c.Close()
	}
	slices.Sort(lat)
	slices.Sort(dials)
	t.Logf("HUBSCALE cold: the client's initialize alone (Hub token lookup and the user's load happen there) p50 %v, p99 %v; load average %s",
		dials[len(dials)/2].Round(time.Millisecond), dials[len(dials)*99/100].Round(time.Millisecond), testenv.LoadAvg())
	loads := sc.Metric("jupyter_mcp_sidecar_hub_user_loads_total") - float64(active)
	t.Logf("HUBSCALE first read of an idle user's notebook (connect with a new Hub token + read), %d users (%d first reads answered \"not bound\", their time is to the read that served): p50 %v, p99 %v, max %v; in the sidecar, the Hub's token lookup averages %v, the user's load (store open to first read done) %v",
		cold, unbound.Load(), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond),
		mean(lookupHist, lookupMark), mean(loadHist, loadMark))
	if loads != float64(cold) {
		t.Errorf("%v cold loads, want %d", loads, cold)
	}
}

// readBound reads uri, reading again while the user's persisted bindings are not loaded
// yet (hub mode marks a user loaded when the store's first read is done, while the
// user's MCP server loads the bindings concurrently); each such answer counts in unbound.
func readBound(t *testing.T, c *sidecartest.GoClient, uri string, unbound *atomic.Int64) string {
	var body string
	var err error
	if testenv.Within(testenv.Wait, func() bool {
		if body, err = c.TryRead(uri); err == nil || !strings.Contains(err.Error(), "no notebook is bound") {
			return true
		}
		unbound.Add(1)
		return false
	}) != nil || err != nil {
		t.Error(err)
		return ""
	}
	return body
}

// historyPool is the first hubPoolSize recorded sessions with at least one checkpoint
// interval of updates: each stored notebook then loads as a checkpoint and < 100 rows.
func historyPool(t *testing.T) []*ysessions.Session {
	var pool []*ysessions.Session
	for _, s := range ysessions.All(t) {
		if len(s.Updates) >= checkpointInterval && len(pool) < hubPoolSize {
			pool = append(pool, s)
		}
	}
	if len(pool) < hubPoolSize {
		t.Fatalf("%d recorded sessions of ≥ %d updates, want %d", len(pool), checkpointInterval, hubPoolSize)
	}
	return pool
}

// template is a store of hubNotebooks rooms that users' stores are copies of.
type template struct {
	store   string
	fileIDs []string
}

// buildTemplates writes hubTemplates stores, each of hubNotebooks sessions of the pool
// (a different selection each), with the pycrdt-like writer, one writer per template.
func buildTemplates(t *testing.T, dir string, pool []*ysessions.Session) []template {
	tpls := make([]template, hubTemplates)
	var wg sync.WaitGroup
	for k := range tpls {
		tpls[k].store = filepath.Join(dir, fmt.Sprintf("t%d", k), ".jupyter_ystore.db")
		if err := os.MkdirAll(filepath.Dir(tpls[k].store), 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range hubNotebooks {
			tpls[k].fileIDs = append(tpls[k].fileIDs, fmt.Sprintf("%08x-0000-4000-8000-%012x", k, j))
		}
		w := sidecartest.StartWriter(t, tpls[k].store)
		wg.Go(func() {
			for j, id := range tpls[k].fileIDs {
				writeHistory(t, w, ".notebook:"+id+".y", pool[(k*7+j)%len(pool)])
			}
		})
	}
	wg.Wait()
	return tpls
}

// writeHistory stores a session's updates in room as Jupyter does, replacing the room's
// checkpoint every checkpointInterval updates (the checkpoint holds the update written
// with it).
func writeHistory(t *testing.T, w sidecartest.Writer, room string, s *ysessions.Session) {
	doc := yjs.NewDoc()
	for i, u := range s.Updates {
		if _, err := doc.ApplyUpdate(u.Update); err != nil {
			t.Errorf("%s update %d: %v", s.Name, i, err)
			return
		}
		cmd := map[string]any{"op": "write", "room": room, "update": base64.StdEncoding.EncodeToString(u.Update)}
		if (i+1)%checkpointInterval == 0 {
			state, err := doc.EncodeStateAsUpdate(nil)
			if err != nil {
				t.Errorf("%s state: %v", s.Name, err)
				return
			}
			cmd["op"], cmd["state"] = "checkpoint", base64.StdEncoding.EncodeToString(state)
		}
		w.Send(cmd)
	}
}

// makeHome gives user a copy of tpl's store, a fileid database naming its notebooks
// nbJJ.ipynb in the user's root directory, and name bindings nbJJ → nbJJ.ipynb as
// use_notebook persists them.
func makeHome(t *testing.T, root, user string, tpl template) {
	home := filepath.Join(root, "home", user)
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(tpl.store)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".jupyter_ystore.db"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	nameNotebooks(t, root, user, tpl.fileIDs)
}

// nameNotebooks gives user a fileid database naming the notebooks of fileIDs nbJJ.ipynb
// in the user's root directory (root/home/user), and name bindings nbJJ → nbJJ.ipynb
// as use_notebook persists them in root/state.
func nameNotebooks(t *testing.T, root, user string, fileIDs []string) {
	home := filepath.Join(root, "home", user)
	db, err := sql.Open("sqlite", filepath.Join(home, "file_id_manager.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(fileid.Schema); err != nil {
		t.Fatal(err)
	}
	bound := map[string]string{}
	for j, id := range fileIDs {
		nb := fmt.Sprintf("nb%02d", j)
		bound[nb] = nb + ".ipynb"
		if _, err := tx.Exec(`INSERT INTO Files(id, path) VALUES (?, ?)`, id, filepath.Join(home, nb+".ipynb")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	state, err := json.Marshal(map[string]any{"version": 1, "notebooks": bound})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "state", user+".names.json"), state, 0o644); err != nil {
		t.Fatal(err)
	}
}

// notebooksHeap is what users' notebooks alone take: the growth of this process's live
// Go heap (after GC) once every room of their stores is loaded the way the sidecar
// loads it (the SQLite tailer's Load, then ynotebook) and only the notebooks are kept.
func notebooksHeap(t *testing.T, root string, users []string) float64 {
	live := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := live()
	nbs, err := loadNotebooks(root, users)
	if err != nil {
		t.Fatal(err)
	}
	after := live()
	runtime.KeepAlive(nbs)
	return float64(after-before) / 1e6
}

// loadNotebooks loads every room of users' stores the way the sidecar does (the SQLite
// tailer's Load, then ynotebook) and keeps only the notebooks.
func loadNotebooks(root string, users []string) ([]*ynotebook.Notebook, error) {
	var nbs []*ynotebook.Notebook
	for _, u := range users {
		tl, err := sqlite.New(sqlite.Config{Path: filepath.Join(root, "home", u, ".jupyter_ystore.db")})
		if err != nil {
			return nil, err
		}
		events, err := tl.Load(context.Background())
		if err != nil {
			return nil, err
		}
		for _, ev := range events {
			nb := ynotebook.New()
			for _, row := range ev.Rows {
				if _, err := nb.Apply(row.Update); err != nil {
					return nil, err
				}
			}
			nbs = append(nbs, nb)
		}
	}
	if len(nbs) != len(users)*hubNotebooks {
		return nil, fmt.Errorf("%d notebooks loaded, want %d", len(nbs), len(users)*hubNotebooks)
	}
	return nbs, nil
}

// holdEnv makes this test binary a process that only loads and holds users'
// notebooks (holdNotebooks), whose RSS notebooksRSS measures.
const holdEnv = "E2E_HUBSCALE_HOLD"

// holdNotebooks loads the notebooks of the users spec names (the stores' root and the
// users, one a line), says "held" and keeps them until its input closes.
func holdNotebooks(spec string) int {
	lines := strings.Split(spec, "\n")
	nbs, err := loadNotebooks(lines[0], lines[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
	runtime.KeepAlive(nbs)
	return 0
}

// notebooksRSS is what users' notebooks alone take in a process of their own: the RSS
// (and its anonymous part) of this test binary run to load and hold only them, the
// largest of 5 samples 1 s apart, as the sidecar's is sampled.
func notebooksRSS(t *testing.T, root string, users []string) (rss, anon float64) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holdEnv+"="+strings.Join(append([]string{root}, users...), "\n"))
	holder := testenv.StartChild(t, cmd, testenv.CleanExit)
	defer func() {
		if err := holder.Stop(); err != nil {
			t.Errorf("the process holding the notebooks: %v", err)
		}
	}()
	if line, err := bufio.NewReader(holder.Out).ReadString('\n'); line != "held\n" {
		t.Fatalf("the process holding the notebooks said %q, %v", line, err)
	}
	for range 5 {
		time.Sleep(time.Second) // the sampling pace
		rss, anon = max(rss, testenv.ProcStatus(t, cmd.Process.Pid, "VmRSS")), max(anon, testenv.ProcStatus(t, cmd.Process.Pid, "RssAnon"))
	}
	return rss, anon
}

// endSession ends a client: a 2025-11-25 session is deleted with its user's token
// (mcp-go's own DELETE does not carry the Authorization header).
func endSession(t *testing.T, endpoint string, c *sidecartest.GoClient, tok jhubtest.Token) {
	id := c.Client.GetSessionId()
	c.Close()
	if c.Modern || id == "" {
		return
	}
	req, err := http.NewRequest(http.MethodDelete, endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+tok.Value)
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func fileMB(t *testing.T, path string) float64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return float64(fi.Size()) / 1e6
}

// rowRange is the fewest and the most updates of a session in the pool.
func rowRange(pool []*ysessions.Session) (int, int) {
	lo, hi := len(pool[0].Updates), len(pool[0].Updates)
	for _, s := range pool {
		lo, hi = min(lo, len(s.Updates)), max(hi, len(s.Updates))
	}
	return lo, hi
}
