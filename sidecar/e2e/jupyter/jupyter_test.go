package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
)

// The tests against the real stack (issue 18): a real Jupyter server with
// jupyter-collaboration writes the store, Python clients edit through its collaboration
// websocket and run cells on a real kernel, and after every step the built sidecar must
// serve what the server itself sees (the oracle: jupyter_ydoc's YNotebook.get() of a
// client joined to the room), tell its subscribers of both eras, and keep /readyz true.
// docs/COMPATIBILITY.md lists the scenarios and their results.

// tinyPNG is a 1×1 PNG, base64.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// kernelCells are run on ipykernel: every kind of output JupyterLab writes.
var kernelCells = [][2]string{
	{"k-stream", "import sys\nprint('to stdout')\nprint('more', 42)\nprint('to stderr', file=sys.stderr)\n6 * 7"},
	{"k-error", "1 / 0"},
	{"k-image", "import base64\nfrom IPython.display import Image, display\ndisplay(Image(data=base64.b64decode('" + tinyPNG + "')))"},
	{"k-html", "from IPython.display import HTML, display\ndisplay(HTML('<b>bold</b>'))\n{'a': [1, 2]}"},
}

// TestJupyterStack runs the scenarios that can share one Jupyter server, in order: the
// later ones (restart, a store moved aside, the old layout) change the store under all
// of them.
func TestJupyterStack(t *testing.T) {
	nb := func(id string) string {
		return jupytertest.NotebookJSON([2]string{id + "-1", "x = 1"}, [2]string{id + "-2", "y = 2"})
	}
	names := map[string]string{"edit": "edit.ipynb", "run": "run.ipynb", "evict": "evict.ipynb",
		"ckpt": "ckpt.ipynb", "gone": "gone.ipynb", "again": "again.ipynb", "old": "old.ipynb"}
	notebooks := map[string]string{"run.ipynb": jupytertest.NotebookJSON(kernelCells...)}
	for n, p := range names {
		if n != "run" {
			notebooks[p] = nb(n)
		}
	}
	s := startStack(t, jupytertest.Options{Notebooks: notebooks}, names)

	t.Run("no store before a notebook is opened: ready", func(t *testing.T) {
		// A fresh server writes its store only once a room is opened; a pod's sidecar
		// must be ready meanwhile (KubeSpawner waits for every container of the pod).
		if _, err := os.Stat(s.srv.StorePath); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the server has a store before any notebook was opened (stat: %v): this check needs none", err)
		}
		body := sidecartest.WaitStatus(t, s.sc, "/readyz", http.StatusOK)
		var r struct {
			State string `json:"state"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil || r.State != "waiting for the store: none yet" {
			t.Fatalf("/readyz %s: want the state saying the store is awaited", body)
		}
		s.join(t, "edit.ipynb", "o")
		testenv.Eventually(t, testenv.Wait, "/readyz without the waiting state once the store is written", func() bool {
			code, body := s.sc.Get("/readyz")
			return code == http.StatusOK && !strings.Contains(body, `"state"`)
		})
	})

	t.Run("file id REST API", func(t *testing.T) {
		// ystore/fileid's REST resolver against jupyter_server_fileid's real route.
		id := s.join(t, "edit.ipynb", "o")
		r, err := fileid.NewREST(fileid.RESTConfig{BaseURL: s.srv.URL, Token: jupytertest.Token})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if got, err := r.Path(ctx, id); err != nil || got != "edit.ipynb" {
			t.Errorf("REST resolver: %q, %v; want edit.ipynb", got, err)
		}
	})

	t.Run("concurrent editing", func(t *testing.T) {
		const p = "edit.ipynb"
		s.join(t, p, "o", "a", "b")
		s.same(t, "edit", p)
		steps := []struct {
			who, op string
			args    map[string]any
		}{
			{"a", "type", map[string]any{"index": 0, "text": "\nprint(x)", "chunk": 1}},
			{"b", "insert_cell", map[string]any{"index": 1, "cell": map[string]any{"id": "md", "cell_type": "markdown", "source": "# Title", "metadata": map[string]any{}}}},
			{"b", "set_metadata", map[string]any{"key": "agent", "value": map[string]any{"step": 1.0}}},
			{"a", "set_metadata", map[string]any{"index": 0, "key": "tags", "value": []any{"a", "b"}}},
			{"b", "move_cell", map[string]any{"from": 1, "to": 0}},
			{"a", "type", map[string]any{"index": 0, "text": "Ünïcode 🎉 ", "at": 0}},
			{"b", "delete_cell", map[string]any{"index": 2}},
			{"a", "set_outputs", map[string]any{"index": 1, "execution_count": 3.0, "outputs": []any{
				map[string]any{"output_type": "stream", "name": "stdout", "text": "1\n"},
				map[string]any{"output_type": "execute_result", "execution_count": 3.0, "metadata": map[string]any{},
					"data": map[string]any{"text/plain": "1"}}}}},
		}
		for _, st := range steps {
			s.step(t, "edit", st.who, p, st.op, st.args)
		}

		// b leaves, both edit (b offline), b rejoins with its stale document.
		s.do(t, map[string]any{"op": "leave", "client": "b", "path": p})
		s.edit(t, "b", p, "type", map[string]any{"index": 0, "text": " offline edit"})
		s.edit(t, "b", p, "insert_cell", map[string]any{"index": 0, "cell": map[string]any{"id": "stale", "cell_type": "code", "source": "stale()", "metadata": map[string]any{}}})
		s.drainSubs()
		s.edit(t, "a", p, "type", map[string]any{"index": 1, "text": "\nz = 3"})
		s.edit(t, "a", p, "delete_cell", map[string]any{"index": 0})
		s.told(t, "edit")
		s.same(t, "edit", p)
		s.drainSubs()
		s.join(t, p, "b")
		s.told(t, "edit")
		s.same(t, "edit", p)
	})

	t.Run("kernel outputs", func(t *testing.T) {
		const p = "run.ipynb"
		s.join(t, p, "o", "a")
		for i := range kernelCells {
			s.step(t, "run", "a", p, "execute", map[string]any{"index": i})
		}
		want, err := s.oracle(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{`"stream"`, `"error"`, `"image/png"`, `"text/html"`, `"execute_result"`, `"display_data"`, `"stderr"`} {
			if !strings.Contains(string(want), kind) {
				t.Errorf("the kernel's outputs have no %s: %s", kind, want)
			}
		}
		// Run again: outputs cleared and rewritten, the execution count moves on.
		s.step(t, "run", "a", p, "execute", map[string]any{"index": 0})
	})

	t.Run("checkpoints", func(t *testing.T) {
		const p = "ckpt.ipynb"
		id := s.join(t, p, "o", "a")
		s.step(t, "ckpt", "a", p, "type", map[string]any{"index": 0, "text": strings.Repeat("0123456789", 16), "chunk": 1})
		testenv.Eventually(t, testenv.Wait, "a checkpoint of the room", func() bool {
			return len(queryStore(t, s.srv.StorePath, "SELECT 1 FROM ycheckpoints WHERE path = ?", jupytertest.RoomKey(id))) > 0
		})
		s.step(t, "ckpt", "a", p, "type", map[string]any{"index": 1, "text": " # after the checkpoint"})
	})

	t.Run("room evicted and reopened", func(t *testing.T) {
		const p = "evict.ipynb"
		id := s.join(t, p, "o", "a")
		s.step(t, "evict", "a", p, "type", map[string]any{"index": 0, "text": "\nbefore = 'eviction'"})
		last, err := s.oracle(p)
		if err != nil {
			t.Fatal(err)
		}
		// One at a time: jupyter-collaboration 5.0.4 cleans a room only if the client
		// closing is its last one, and two closing at once each still see the other.
		s.forget(t, p, "o")
		time.Sleep(time.Second) // stimulus pacing: the server drops the first client before the second leaves
		s.forget(t, p, "a")
		testenv.Eventually(t, testenv.Wait, "the room evicted (document_cleanup_delay)", func() bool {
			return strings.Contains(s.srv.Log(), "Room json:notebook:"+id+" deleted")
		})
		// No room: the store and the saved file are the truth.
		s.sameAs(t, "evict", false, func() ([]byte, error) { return last, nil })
		s.sameAs(t, "evict", true, func() ([]byte, error) { return s.savedFile(p) })
		s.probe.ready(t)
		s.join(t, p, "o", "a")
		s.same(t, "evict", p)
		s.step(t, "evict", "a", p, "type", map[string]any{"index": 1, "text": "\nafter = 'reopen'"})
	})

	t.Run("rename", func(t *testing.T) { renameScenario(t, s, "old.ipynb", "renamed.ipynb") })

	t.Run("deleted", func(t *testing.T) {
		const p = "gone.ipynb"
		s.join(t, p, "o", "a")
		s.step(t, "gone", "a", p, "type", map[string]any{"index": 0, "text": "\ndoomed = True"})
		s.forget(t, p, "o", "a")
		s.drainSubs()
		if code, body := s.srv.REST(http.MethodDelete, "/api/contents/"+p, nil); code != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", code, body)
		}
		// The server has no such notebook any more: neither may the sidecar.
		testenv.Eventually(t, 10*time.Second, "notebook://gone no longer served (path refresh: 2 s)", func() bool {
			_, err := s.subs[0].TryRead("notebook://gone")
			return err != nil
		})
		s.told(t, "gone")
	})

	t.Run("deleted and re-created", func(t *testing.T) {
		const p = "again.ipynb"
		s.join(t, p, "o", "a")
		s.edit(t, "a", p, "type", map[string]any{"index": 0, "text": "\nfirst = 'life'"})
		s.same(t, "again", p)
		s.forget(t, p, "o", "a")
		if code, body := s.srv.REST(http.MethodDelete, "/api/contents/"+p, nil); code != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", code, body)
		}
		s.drainSubs()
		var content any
		_ = json.Unmarshal([]byte(jupytertest.NotebookJSON([2]string{"second-1", "second = 'life'"})), &content)
		if code, body := s.srv.REST(http.MethodPut, "/api/contents/"+p, map[string]any{"type": "notebook", "format": "json", "content": content}); code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("PUT: %d %s", code, body)
		}
		s.join(t, p, "o", "a")
		s.edit(t, "a", p, "type", map[string]any{"index": 0, "text": "\nagain = True"})
		s.told(t, "again")
		s.same(t, "again", p)
	})

	t.Run("server restart", func(t *testing.T) {
		const p = "edit.ipynb"
		s.probe.notReady()
		s.srv.Restart(nil)
		for _, w := range []string{"o", "a", "b"} {
			s.do(t, map[string]any{"op": "leave", "client": w, "path": p})
		}
		s.join(t, p, "o", "a")
		s.same(t, "edit", p)
		s.step(t, "edit", "a", p, "type", map[string]any{"index": 0, "text": " # after restart"})
		if n := s.probe.notReady(); len(n) > 0 {
			t.Errorf("/readyz not ready across a server restart (the store stayed): %v", n)
		}
	})

	t.Run("store moved aside (user_version)", func(t *testing.T) {
		const p = "edit.ipynb"
		s.forget(t, p, "o", "a", "b")
		s.srv.Restart(func() { sidecartest.ExecSQL(t, s.srv.StorePath, "PRAGMA user_version = 1") })
		s.join(t, p, "o", "a")
		testenv.Eventually(t, testenv.Wait, "pycrdt-store moved the store aside", func() bool {
			_, err := os.Stat(strings.TrimSuffix(s.srv.StorePath, ".db") + "(1).db")
			return err == nil
		})
		s.same(t, "edit", p)
		s.step(t, "edit", "a", p, "type", map[string]any{"index": 0, "text": " # new store"})
		// The notebooks whose rooms are closed are in the old file only: the saved files
		// are their truth.
		s.sameAs(t, "evict", true, func() ([]byte, error) { return s.savedFile("evict.ipynb") })
	})

	t.Run("store of the older layout (no ycheckpoints)", func(t *testing.T) {
		// pycrdt-store 0.1.5 cannot open it: CREATE TABLE yupdates fails (logged,
		// swallowed), the room's load fails on the missing ycheckpoints and is taken
		// for "not in the store", so the room is rebuilt from the file with client id 0
		// and written over a store that already holds another client-0 history. The
		// sidecar must read that store as pycrdt does.
		const p = "edit.ipynb"
		s.forget(t, p, "o", "a")
		s.srv.Restart(func() { sidecartest.ExecSQL(t, s.srv.StorePath, "DROP TABLE ycheckpoints") })
		id := s.join(t, p, "o", "a")
		s.drainSubs()
		s.edit(t, "a", p, "type", map[string]any{"index": 0, "text": " # old layout"})
		if _, err := s.storeView(id)(); err != nil {
			// pycrdt refuses the garbled rows (the server could not load the room from its
			// store again); the sidecar must not serve them as a healthy notebook: it
			// refuses them too, and /readyz names the room degraded.
			t.Logf("UPSTREAM: the store is garbled: %v", err)
			var code int
			var body string
			testenv.Eventually(t, testenv.Wait, "/readyz reports the garbled room degraded", func() bool {
				code, body = s.sc.Get("/readyz")
				return code == http.StatusServiceUnavailable && strings.Contains(body, id)
			}, func() string { return fmt.Sprintf("/readyz %d %s", code, body) })
			return
		}
		s.sameAs(t, "edit", false, s.storeView(id))
		if s.serverAgrees(t, p, id) {
			t.Log("the server's view and its store agree")
		}
	})
}

// renameScenario renames from to through the contents API (JupyterLab's file browser)
// while a name bound with use_notebook follows it.
func renameScenario(t *testing.T, s *stack, from, to string) {
	c := s.subs[0]
	c.Bind("moving", from)
	c.Subscribe("notebook://moving")
	s.join(t, from, "o", "a")
	s.drainSubs()
	s.edit(t, "a", from, "type", map[string]any{"index": 0, "text": "\nbefore = 'rename'"})
	sidecartest.Await(t, c, testenv.Wait, "notebook://moving")
	s.same(t, "moving", from)
	s.drainSubs()
	if code, body := s.srv.REST(http.MethodPatch, "/api/contents/"+from, map[string]any{"path": to}); code != http.StatusOK {
		t.Fatalf("PATCH rename: %d %s", code, body)
	}
	sidecartest.Await(t, c, testenv.Wait, "notebook://moving")
	// The room keeps its file id: the clients joined before the rename stay in it.
	s.sameAs(t, "moving", false, func() ([]byte, error) { return s.oracle(from) })
	s.drainSubs()
	s.edit(t, "a", from, "type", map[string]any{"index": 0, "text": "\nafter = 'rename'"})
	sidecartest.Await(t, c, testenv.Wait, "notebook://moving")
	s.sameAs(t, "moving", false, func() ([]byte, error) { return s.oracle(from) })
	// A client opening the new path joins the same room.
	s.join(t, to, "o")
	s.same(t, "moving", to)
}

// savedFile is the notebook as saved on disk, through the contents API.
func (s *stack) savedFile(path string) ([]byte, error) {
	code, body := s.srv.REST(http.MethodGet, "/api/contents/"+path+"?content=1&type=notebook", nil)
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", path, code, body)
	}
	var model struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(body, &model); err != nil {
		return nil, err
	}
	return model.Content, nil
}

// TestJupyterRenameLocalFileID is the rename with jupyter_server_fileid's
// LocalFileIdManager, which tracks files by inode.
func TestJupyterRenameLocalFileID(t *testing.T) {
	s := startStack(t, jupytertest.Options{FileIDManager: jupytertest.LocalFileIDManager,
		Notebooks: map[string]string{"dir/old.ipynb": jupytertest.NotebookJSON([2]string{"l-1", "x = 1"})}},
		map[string]string{"old": "dir/old.ipynb"})
	renameScenario(t, s, "dir/old.ipynb", "dir/new.ipynb")
}

// TestJupyterSquash turns pycrdt-store's inactivity squash on: the first write after
// squash_after_inactivity_of seconds without one replaces the room's rows by one merged
// row.
func TestJupyterSquash(t *testing.T) {
	const p = "sq.ipynb"
	const inactivity = 4 * time.Second
	s := startStack(t, jupytertest.Options{SquashAfterInactivity: inactivity,
		Notebooks: map[string]string{p: jupytertest.NotebookJSON([2]string{"s-1", "x = 1"}, [2]string{"s-2", "y = 2"})}},
		map[string]string{"sq": p})
	id := s.join(t, p, "o", "a")
	// The squash merges every row into one that keeps the newest row's timestamp: it has
	// happened once no row is older than that (the client may have sent its typing as
	// one update or many, so the number of rows says nothing). On a starved machine the
	// server may write one typing's rows further apart than the inactivity, squashing
	// them already: type again until rows older than the newest remain.
	key := jupytertest.RoomKey(id)
	var newest any
	older := func() int {
		return len(queryStore(t, s.srv.StorePath, "SELECT 1 FROM yupdates WHERE path = ? AND timestamp < ?", key, newest))
	}
	for try := 0; ; try++ {
		s.edit(t, "a", p, "type", map[string]any{"index": 0, "text": fmt.Sprintf("\nbefore%d = 'squash'", try), "chunk": 3})
		s.same(t, "sq", p)
		newest = queryStore(t, s.srv.StorePath, "SELECT max(timestamp) FROM yupdates WHERE path = ?", key)[0][0]
		if older() > 0 {
			break
		}
		if try == 4 {
			t.Fatal("one row only after 5 typings: every write came after the inactivity, nothing left to squash")
		}
	}
	time.Sleep(inactivity + time.Second) // stimulus pacing: the room inactive past squash_after_inactivity_of
	s.drainSubs()
	s.edit(t, "a", p, "type", map[string]any{"index": 1, "text": "\nafter = 'squash'"})
	testenv.Eventually(t, testenv.Wait, "the squash", func() bool { return older() == 0 })
	// pycrdt-store 0.1.5 applies the squashed rows only when it decompresses them, so
	// without compression the merged row is an empty document: the store loses the
	// notebook while the server keeps it. The sidecar must read the store as pycrdt does:
	// its cells (an empty document's JSON differs: jupyter_ydoc gives metadata {} and
	// nbformat 0, ystore/ynotebook leaves those keys out).
	var got, want string
	testenv.Eventually(t, testenv.Wait, "notebook://sq has the store's cells", func() bool {
		w, err := s.storeView(id)()
		g, err2 := s.subs[0].TryRead("notebook://sq")
		got, want = g, string(w)
		return err == nil && err2 == nil && reflect.DeepEqual(parseNotebook([]byte(g), false)["cells"], parseNotebook(w, false)["cells"])
	}, func() string { return "got " + got + " want " + want })
	if s.serverAgrees(t, p, id) {
		t.Log("the squashed store still holds the server's notebook")
	}
}

// TestJupyterWriterLoad is issue 18's "never in the writer's way": while a Python client
// types 20 updates/s into 10 notebooks through the real server and 200 readers read
// through the sidecar, the server logs no lock error, the store holds every update
// (its state vector covers the oracle's), and the sidecar ends equal to the oracle. It
// measures commit → notification (p50/p99, default debounce). JUPYTER_LOAD_DURATION
// (default 30s) makes it a benchmark, JUPYTER_LOAD_READERS (default 200) a control, and
// JUPYTER_LOAD_SIDECAR=off the control without the sidecar: the sidecar is stopped before
// the load, and only the server's own losses are counted. It needs a sidecar built
// without -race (the race detector's slowdown is not what an operator runs), so it skips
// under -race.
func TestJupyterWriterLoad(t *testing.T) {
	if sidecartest.RaceBuild {
		t.Skip("a timing property: .ci/run runs it without -race")
	}
	dur := 30 * time.Second
	if v := os.Getenv("JUPYTER_LOAD_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		dur = d
	}
	const notebooks, rate = 10, 20
	readers := 200
	if v := os.Getenv("JUPYTER_LOAD_READERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		readers = n
	}
	knownDefect(t, "upstream: a starved Jupyter server loses store writes to SQLite lock timeouts (pycrdt-store holds the write lock across worker-thread hops; sqlite-anyio logs and drops), with no sidecar running too (JUPYTER_LOAD_SIDECAR=off): docs/COMPATIBILITY.md")
	names := map[string]string{}
	nbs := map[string]string{}
	for i := range notebooks {
		p := fmt.Sprintf("load%d.ipynb", i)
		names[fmt.Sprintf("load%d", i)] = p
		nbs[p] = jupytertest.NotebookJSON([2]string{fmt.Sprintf("load%d-1", i), "typed = '"})
	}
	s := startStack(t, jupytertest.Options{Notebooks: nbs}, names)
	writer := s.srv.Client()     // the load blocks its process: the oracle is s.py
	rooms := map[string]string{} // room key → name
	var paths []string
	for i := range notebooks {
		p := fmt.Sprintf("load%d.ipynb", i)
		paths = append(paths, p)
		id := s.join(t, p, "o")
		writer.Do(map[string]any{"op": "join", "client": "a", "path": p})
		rooms[jupytertest.RoomKey(id)] = fmt.Sprintf("load%d", i)
	}
	for n, p := range names {
		s.same(t, n, p)
	}
	if os.Getenv("JUPYTER_LOAD_SIDECAR") == "off" {
		for _, c := range s.subs {
			c.Close()
		}
		s.sc.Stop()
		res := writer.Do(map[string]any{"op": "load", "client": "a", "paths": paths, "rate": rate, "seconds": dur.Seconds()})
		t.Logf("load without the sidecar: %v edits (%v late)", res["edits"], res["late"])
		s.serverKeptEveryWrite(t, rooms, names)
		return
	}

	// Every notification's receipt time, per URI, from the 2026-07-28 subscriber.
	type note struct {
		uri string
		at  time.Time
	}
	sub := s.subs[0]
	stop := make(chan struct{})
	collected := make(chan []note)
	go func() {
		var all []note
		for {
			select {
			case u := <-sub.Notes:
				all = append(all, note{u, <-sub.Times})
			case <-stop:
				collected <- all
				return
			}
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	readerClients := make([]*sidecartest.GoClient, 4)
	for i := range readerClients {
		readerClients[i] = sidecartest.DialGo(t, s.sc.MCPURL(), i%2 == 0)
	}
	reads := make(chan int, readers)
	readErrs := make(chan error, readers)
	for r := range readers {
		go func() {
			n := 0
			var first error
			c := readerClients[r%len(readerClients)]
			for ctx.Err() == nil {
				if _, err := c.TryRead(fmt.Sprintf("notebook://load%d", r%notebooks)); err != nil && ctx.Err() == nil && first == nil {
					first = err
				}
				n++
			}
			reads <- n
			readErrs <- first
		}()
	}
	start := time.Now()
	res := writer.Do(map[string]any{"op": "load", "client": "a", "paths": paths, "rate": rate, "seconds": dur.Seconds()})
	cancel()
	total := 0
	for range readers {
		total += <-reads
		if err := <-readErrs; err != nil {
			t.Errorf("a reader: %v", err)
		}
	}
	t.Logf("load: %v edits (%v late) in %v; %d reads by %d readers", res["edits"], res["late"], time.Since(start).Round(time.Millisecond), total, readers)

	t.Logf("sidecar read transactions: %s", s.sc.Histogram("jupyter_mcp_sidecar_sqlite_read_tx_seconds"))
	s.serverKeptEveryWrite(t, rooms, names)
	for key, name := range rooms {
		// The sidecar reads the store as pycrdt does, lost rows or not …
		s.sameAs(t, name, false, s.storeView(strings.TrimSuffix(strings.TrimPrefix(key, ".notebook:"), ".y")))
	}
	close(stop)
	all := <-collected
	defer func() {
		// … and, with every update stored, that is the server's view.
		for n, p := range names {
			s.same(t, n, p)
		}
	}()
	// Commit → notification: for every row written during the load, the first
	// notification of its notebook received at or after the row's timestamp.
	byURI := map[string][]time.Time{}
	for _, n := range all {
		byURI[n.uri] = append(byURI[n.uri], n.at)
	}
	var lags []time.Duration
	for key, name := range rooms {
		times := byURI["notebook://"+name]
		for _, row := range queryStore(t, s.srv.StorePath, "SELECT timestamp FROM yupdates WHERE path = ? AND timestamp >= ? ORDER BY timestamp", key, float64(start.UnixNano())/1e9) {
			ts := time.Unix(0, int64(row[0].(float64)*1e9))
			for _, at := range times {
				if !at.Before(ts) {
					lags = append(lags, at.Sub(ts))
					break
				}
			}
		}
	}
	if len(lags) == 0 {
		t.Fatal("no notification followed any row")
	}
	p50, p99 := percentiles(lags)
	t.Logf("LAG commit→notification (debounce 250ms, %d notebooks, %d updates/s, %d readers, %v): p50 %v p99 %v (%d rows)",
		notebooks, rate, readers, dur, p50.Round(time.Millisecond), p99.Round(time.Millisecond), len(lags))
}

// serverKeptEveryWrite checks that the store comes to hold every update of the server's
// documents (its state vector covers the oracle's: the server writes the store behind
// its documents, the more so on a busy machine) and that the server logged no lock error.
func (s *stack) serverKeptEveryWrite(t *testing.T, rooms, names map[string]string) {
	t.Helper()
	for key, name := range rooms {
		p := names[name]
		var behind string
		err := testenv.Within(testenv.Wait, func() bool {
			st := s.do(t, map[string]any{"op": "state", "client": "o", "path": p})
			store := s.do(t, map[string]any{"op": "store", "db": s.srv.StorePath, "room": key})
			osv, _ := st["sv"].(map[string]any)
			ssv, _ := store["sv"].(map[string]any)
			behind = ""
			for client, clock := range osv {
				if c, _ := ssv[client].(float64); c < clock.(float64) {
					behind = fmt.Sprintf("client %s up to clock %v, the server's document %v", client, c, clock)
				}
			}
			return behind == ""
		})
		if err != nil {
			t.Errorf("%s: the store has %s: updates lost", p, behind)
		}
	}
	if n := s.srv.LockErrors(); n != 0 {
		t.Errorf("%d store writes lost to SQLite locking in the server's log (sqlite-anyio logs and drops them)", n)
	}
}

// percentiles returns the p50 and p99 of ds (sorted in place).
func percentiles(ds []time.Duration) (time.Duration, time.Duration) {
	slices.Sort(ds)
	return ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)]
}

// knownDefect skips a test of a defect found against the real stack and not fixed yet,
// saying what it is, unless SIDECAR_TEST_KNOWN_DEFECTS=1 runs it (and it fails). Each
// one is listed as failing in docs/COMPATIBILITY.md and stays open in its issue; the
// test is the check of its fix.
func knownDefect(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("SIDECAR_TEST_KNOWN_DEFECTS") != "1" {
		t.Skip("known defect, not fixed yet (SIDECAR_TEST_KNOWN_DEFECTS=1 runs it): " + what)
	}
}
