package jupyter

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/browser"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// The tests with a person in JupyterLab (issue 20): real JupyterLab 4.6 in headless
// Chromium (testdata/browser/driver.mjs) on the real stack of jupyter_test.go, the built
// sidecar tailing its store. After every step the sidecar must serve what the page shows
// (the editor's CodeMirror text, the rendered outputs and prompts, the page's own
// notebook document) and its subscribers of both eras must have been told.

// pngCell draws a 48×24 PNG with the standard library and displays it.
const pngCell = `import struct, zlib
from IPython.display import Image, display
w, h = 48, 24
raw = b''.join(b'\x00' + b''.join(bytes((x * 5, y * 10, 160)) for x in range(w)) for y in range(h))
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
display(Image(data=png))`

// labCells are run with Shift+Enter on ipykernel: a stream of each kind, an error, a
// value, an image and HTML.
var labCells = [][2]string{
	{"r-print", "import sys\nprint('héllo 日本 🎉')\nprint('to stderr', file=sys.stderr)"},
	{"r-error", "1 / 0"},
	{"r-value", "6 * 7"},
	{"r-image", pngCell},
	{"r-html", "from IPython.display import HTML\nHTML('<b>bold</b>')"},
}

// lab is the stack with JupyterLab and people in it.
type lab struct {
	*stack
	b *jupytertest.Client
}

// startLab starts JupyterLab with notebooks, the sidecar (names bound, extra config) and
// the browser driver.
func startLab(t *testing.T, notebooks, names map[string]string, extra string) *lab {
	t.Helper()
	browser.Need(t)
	s := startStackWith(t, jupytertest.Options{Lab: true, Notebooks: notebooks}, names, extra)
	return &lab{stack: s, b: browser.Lab(t, s.srv)}
}

// watch starts another sidecar on the server's store with extra configuration.
func (l *lab) watch(t *testing.T, extra string) *sidecartest.Sidecar {
	t.Helper()
	return sidecartest.Launch(t, t.TempDir(), fmt.Sprintf("store:\n  backend: sqlite\n  sqlite: {path: %q}\nfileid: {db_path: %q, root_dir: %q}\n%s",
		l.srv.StorePath, l.srv.FileIDPath, l.srv.Root, extra), "serve")
}

// do runs one driver command, failing t.
func (l *lab) do(t *testing.T, cmd map[string]any) jupytertest.Reply {
	t.Helper()
	r, err := l.b.Try(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// pageCell is what the person sees of a cell (the driver's cellsView).
type pageCell struct {
	ID             string `json:"id"`
	CellType       string `json:"cell_type"`
	Editor         string `json:"editor"` // CodeMirror's state
	Source         string `json:"source"` // the cell model's
	Prompt         string `json:"prompt"`
	ExecutionCount any    `json:"execution_count"`
	Outputs        []struct {
		Mime string  `json:"mime"` // data-mime-type of the rendered output
		Text string  `json:"text"` // its innerText
		Img  *string `json:"img"`  // an <img>'s src
	} `json:"outputs"`
}

// cells returns what page shows of path's cells.
func (l *lab) cells(page, path string) ([]pageCell, error) {
	r, err := l.b.Try(map[string]any{"op": "cells", "page": page, "path": path})
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(r["cells"])
	var cs []pageCell
	return cs, json.Unmarshal(b, &cs)
}

// pageModel is the page's own notebook document (its shared model's JSON).
func (l *lab) pageModel(page, path string) func() ([]byte, error) {
	return func() ([]byte, error) {
		r, err := l.b.Try(map[string]any{"op": "model", "page": page, "path": path})
		if err != nil {
			return nil, err
		}
		return json.Marshal(r["nb"])
	}
}

// samePage waits until the sidecar serves name as page shows path: the notebook, every
// cell and every output equal to the page's document, and every cell resource to what
// is on the screen (editor text, prompt, rendered outputs in the type JupyterLab chose).
func (l *lab) samePage(t *testing.T, name, page, path string) []pageCell {
	t.Helper()
	l.sameAs(t, name, false, l.pageModel(page, path))
	var cs []pageCell
	var diff string
	testenv.Eventually(t, testenv.Wait, "the cell resources of notebook://"+name+" show what the page does", func() bool {
		var err error
		if cs, err = l.cells(page, path); err != nil {
			diff = err.Error()
			return false
		}
		diff = l.screenMismatch(name, cs)
		return diff == ""
	}, func() string { return diff })
	l.probe.ready(t)
	return cs
}

// screenMismatch compares the cell resources of name with what the page shows; "" when
// they agree, else the first difference.
func (l *lab) screenMismatch(name string, cs []pageCell) string {
	reader := l.subs[0]
	for i, c := range cs {
		if c.Editor != c.Source {
			return fmt.Sprintf("cell %d: the editor shows %q, its model holds %q", i, c.Editor, c.Source)
		}
		uri := sidecartest.CellURI(name, c.ID)
		text, err := reader.TryRead(uri)
		if err != nil {
			return err.Error()
		}
		var doc servedCell
		if err := json.Unmarshal([]byte(text), &doc); err != nil {
			return fmt.Sprintf("%s: %v", uri, err)
		}
		if doc.Index != i || doc.CellType != c.CellType || doc.Source != c.Editor {
			return fmt.Sprintf("%s: served index %d %s %q; the page shows cell %d %s %q", uri, doc.Index, doc.CellType, doc.Source, i, c.CellType, c.Editor)
		}
		if c.CellType != "code" {
			continue
		}
		prompt := "[ ]:"
		if n, ok := doc.ExecutionCount.(float64); ok {
			prompt = fmt.Sprintf("[%d]:", int(n))
		}
		if !reflect.DeepEqual(doc.ExecutionCount, c.ExecutionCount) || c.Prompt != prompt {
			return fmt.Sprintf("%s: execution_count %v, the page's prompt %q (model %v)", uri, doc.ExecutionCount, c.Prompt, c.ExecutionCount)
		}
		if len(doc.Outputs) != len(c.Outputs) {
			return fmt.Sprintf("%s: %d outputs, the page renders %d", uri, len(doc.Outputs), len(c.Outputs))
		}
		for j, o := range c.Outputs {
			mime, body, err := readOutput(reader, doc.Outputs[j].URI)
			if err != nil {
				return err.Error()
			}
			if msg := renderedMatches(o.Mime, o.Text, o.Img, mime, body); msg != "" {
				return fmt.Sprintf("%s: %s", doc.Outputs[j].URI, msg)
			}
		}
	}
	return ""
}

// renderedMatches compares an output resource (mime, body) with the output JupyterLab
// rendered (its data-mime-type, text and image source).
func renderedMatches(pageMime, text string, img *string, mime, body string) string {
	switch pageMime {
	case "application/vnd.jupyter.stdout", "application/vnd.jupyter.stderr":
		if strings.HasPrefix(mime, "application/vnd.jupyter.error") || strings.Contains(body, `"ename"`) {
			var e struct{ Ename, Evalue string }
			if json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(text, e.Ename) || !strings.Contains(text, e.Evalue) {
				return fmt.Sprintf("error %s; the page shows %q", body, text)
			}
			return ""
		}
		if body != text {
			return fmt.Sprintf("stream %q; the page shows %q", body, text)
		}
		return ""
	}
	if mime != pageMime {
		return fmt.Sprintf("served as %s; JupyterLab renders it as %s", mime, pageMime)
	}
	switch {
	case img != nil:
		src := strings.TrimPrefix(*img, "data:"+mime+";base64,")
		page, err1 := base64.StdEncoding.DecodeString(src)
		served, err2 := base64.StdEncoding.DecodeString(body)
		if err1 != nil || err2 != nil || len(served) == 0 || string(page) != string(served) {
			return fmt.Sprintf("image of %d bytes (%v); the page shows %d bytes (%v)", len(served), err2, len(page), err1)
		}
	case mime == "text/plain":
		if body != text {
			return fmt.Sprintf("text %q; the page shows %q", body, text)
		}
	case mime == "text/html":
		if text == "" || !strings.Contains(body, text) {
			return fmt.Sprintf("HTML %q; the page shows %q", body, text)
		}
	}
	return ""
}

// note is a notification with its receipt time.
type note struct {
	uri string
	at  time.Time
}

// timedNote waits within d for c's next notification and its receipt time. The client
// queues the time before the URI, so the two stay paired as long as every reader of its
// notifications in the test reads both (the browser tests do: not drain, not await).
func timedNote(c *sidecartest.GoClient, d time.Duration) (note, bool) {
	select {
	case u := <-c.Notes:
		return note{u, <-c.Times}, true
	case <-time.After(d):
		return note{}, false
	}
}

// flushNotes forgets c's notifications so far.
func flushNotes(c *sidecartest.GoClient) {
	for {
		select {
		case <-c.Notes:
			<-c.Times
		default:
			return
		}
	}
}

// heardAfter waits until every subscriber was told of notebook://name at or after from,
// and returns, per subscriber, how long after from the first such notification came.
func (l *lab) heardAfter(t *testing.T, name string, from time.Time) []time.Duration {
	t.Helper()
	var lags []time.Duration
	for _, c := range l.subs {
		deadline := time.Now().Add(testenv.Wait)
		var seen []string
		for {
			n, ok := timedNote(c, time.Until(deadline))
			if !ok {
				t.Fatalf("%s: not told of notebook://%s at or after %s within %v; told of %v", c.Name(), name, from.Format("15:04:05.000"), testenv.Wait, seen)
			}
			seen = append(seen, n.uri+"@"+n.at.Format("15:04:05.000"))
			if n.uri == "notebook://"+name && !n.at.Before(from) {
				lags = append(lags, n.at.Sub(from))
				break
			}
		}
	}
	return lags
}

// flushSubs forgets what every subscriber was told so far.
func (l *lab) flushSubs() {
	for _, c := range l.subs {
		flushNotes(c)
	}
}

// roomKey is the store's room of path, by the server's file id.
func (l *lab) roomKey(t *testing.T, path string) string {
	t.Helper()
	code, body := l.srv.REST(http.MethodGet, "/api/fileid/id?path="+url.QueryEscape(path), nil)
	var r struct{ ID string }
	if code != http.StatusOK || json.Unmarshal(body, &r) != nil || r.ID == "" {
		t.Fatalf("file id of %s: %d %s", path, code, body)
	}
	return jupytertest.RoomKey(r.ID)
}

// rowsSince returns the timestamps of room's store rows at or after from.
func (l *lab) rowsSince(t *testing.T, room string, from time.Time) []time.Time {
	t.Helper()
	var ts []time.Time
	for _, r := range queryStore(t, l.srv.StorePath, "SELECT timestamp FROM yupdates WHERE path = ? AND timestamp >= ? ORDER BY timestamp", room, float64(from.UnixNano())/1e9) {
		ts = append(ts, time.Unix(0, int64(r[0].(float64)*1e9)))
	}
	return ts
}

// typed turns the driver's key times (ms since the epoch) into times.
func typed(r jupytertest.Reply) []time.Time {
	var ts []time.Time
	raw, _ := r["times"].([]any)
	for _, v := range raw {
		ms, _ := v.(float64)
		ts = append(ts, time.UnixMilli(int64(ms)))
	}
	return ts
}

// step runs driver commands as one step of a person, then waits until the subscribers
// were told of notebook://name and the sidecar serves what page shows of path.
func (l *lab) step(t *testing.T, name, page, path string, cmds ...map[string]any) []pageCell {
	t.Helper()
	l.flushSubs()
	start := time.Now()
	for _, c := range cmds {
		l.do(t, c)
	}
	l.heardAfter(t, name, start)
	return l.samePage(t, name, page, path)
}

// TestJupyterLab is a person (two, at times) in JupyterLab in a real browser, and what
// the agents see: typing, running cells, editing the notebook's structure and metadata,
// undoing, renaming, two people at once, closing and reopening the tab.
func TestJupyterLab(t *testing.T) {
	nb2 := func(id string) string {
		return jupytertest.NotebookJSON([2]string{id + "-1", "x = 1"}, [2]string{id + "-2", "y = 2"})
	}
	notebooks := map[string]string{"typed.ipynb": nb2("t"), "run.ipynb": jupytertest.NotebookJSON(labCells...),
		"cells.ipynb": nb2("c"), "two.ipynb": nb2("w"), "rename.ipynb": nb2("m")}
	names := map[string]string{"typed": "typed.ipynb", "run": "run.ipynb", "cells": "cells.ipynb", "two": "two.ipynb"}
	jupytertest.Need(t)
	browser.Need(t)
	l := startLab(t, notebooks, names, "")
	// A configured publisher replaces the MCP subscribers (docs/EVENTS.md): the change
	// events come from a second sidecar on the same store.
	events := sidecartest.StartReceiver(t)
	l.watch(t, "publisher: "+events.Publisher+"\n")

	t.Run("typing", func(t *testing.T) {
		const p = "typed.ipynb"
		l.do(t, map[string]any{"op": "open", "page": "ann", "path": p})
		l.samePage(t, "typed", "ann", p)
		room := l.roomKey(t, p)
		l.flushSubs()
		text := "\ns = 'café é 日本 🎉'\nprint(s, len(s))"
		keys := typed(l.do(t, map[string]any{"op": "type", "page": "ann", "path": p, "index": 0, "text": text, "delay": 40}))
		cs := l.samePage(t, "typed", "ann", p)
		if want := "x = 1" + text; cs[0].Editor != want {
			t.Errorf("the editor shows %q after typing, want %q", cs[0].Editor, want)
		}
		// The last key's row in the store, and the notification after it within the
		// debounce's ceiling.
		last := keys[len(keys)-1]
		rows := l.rowsSince(t, room, last)
		if len(rows) == 0 {
			t.Fatalf("no store row at or after the last key (%v)", last)
		}
		for i, lag := range l.heardAfter(t, "typed", rows[0]) {
			t.Logf("%s: last key → store %v, store → notification %v", l.subs[i].Name(), rows[0].Sub(last).Round(time.Millisecond), lag.Round(time.Millisecond))
			if lag > sidecartest.Delivery {
				t.Errorf("%s: told %v after the last key's row, over the debounce ceiling (%v)", l.subs[i].Name(), lag, sidecartest.Delivery)
			}
		}
		shot := filepath.Join(t.TempDir(), "typed.png")
		if dir := os.Getenv("BROWSER_SCREENSHOT_DIR"); dir != "" {
			shot = filepath.Join(dir, "jupyterlab-typed.png")
			if err := os.WriteFile(filepath.Join(dir, "jupyterlab-typed-cell.json"), []byte(l.subs[0].Read(sidecartest.CellURI("typed", cs[0].ID))+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		l.do(t, map[string]any{"op": "screenshot", "page": "ann", "file": shot})
	})

	t.Run("running cells", func(t *testing.T) {
		const p = "run.ipynb"
		l.do(t, map[string]any{"op": "open", "page": "ann", "path": p})
		l.samePage(t, "run", "ann", p)
		// One at a time: JupyterLab cancels the cells queued after one that fails.
		var cs []pageCell
		for i := range labCells {
			cs = l.step(t, "run", "ann", p, map[string]any{"op": "select", "page": "ann", "path": p, "index": i},
				map[string]any{"op": "keys", "page": "ann", "keys": []string{"Enter", "Shift+Enter"}},
				map[string]any{"op": "wait_idle", "page": "ann", "path": p})
		}
		var mimes []string
		for _, c := range cs[:len(labCells)] {
			if len(c.Outputs) == 0 {
				t.Errorf("cell %s rendered no output", c.ID)
			}
			for _, o := range c.Outputs {
				mimes = append(mimes, o.Mime)
			}
		}
		for _, m := range []string{"application/vnd.jupyter.stdout", "application/vnd.jupyter.stderr", "text/plain", "image/png", "text/html"} {
			if !strings.Contains(strings.Join(mimes, " "), m) {
				t.Errorf("no output rendered as %s: %v", m, mimes)
			}
		}
		// Run the first again: its outputs replaced, its count moved on.
		l.do(t, map[string]any{"op": "select", "page": "ann", "path": p, "index": 0})
		l.step(t, "run", "ann", p, map[string]any{"op": "keys", "page": "ann", "keys": []string{"Control+Enter"}},
			map[string]any{"op": "wait_idle", "page": "ann", "path": p})
	})

	t.Run("cells and metadata", func(t *testing.T) {
		const p = "cells.ipynb"
		page := func(op string, args map[string]any) map[string]any {
			cmd := map[string]any{"op": op, "page": "ann", "path": p}
			for k, v := range args {
				cmd[k] = v
			}
			return cmd
		}
		sel := func(i int) map[string]any { return page("select", map[string]any{"index": i}) }
		keys := func(k ...string) map[string]any { return page("keys", map[string]any{"keys": k}) }
		l.do(t, page("open", nil))
		l.samePage(t, "cells", "ann", p)
		steps := []struct {
			what string
			cmds []map[string]any
			want func([]pageCell) string
		}{
			{"insert a cell below (B) and type in it", []map[string]any{sel(0), keys("b"),
				page("type", map[string]any{"index": 1, "text": "z = 3 # inserted"})},
				func(cs []pageCell) string { return ids(cs, "c-1", "*", "c-2") }},
			{"move it up (Ctrl+Shift+Up)", []map[string]any{sel(1), keys("Control+Shift+ArrowUp")},
				func(cs []pageCell) string { return ids(cs, "*", "c-1", "c-2") }},
			{"move it down (command)", []map[string]any{sel(0), page("command", map[string]any{"command": "notebook:move-cell-down"})},
				func(cs []pageCell) string { return ids(cs, "c-1", "*", "c-2") }},
			{"markdown (M)", []map[string]any{sel(2), keys("m")},
				func(cs []pageCell) string { return types(cs, "code", "code", "markdown") }},
			{"back to code (Y)", []map[string]any{sel(2), keys("y")},
				func(cs []pageCell) string { return types(cs, "code", "code", "code") }},
			{"delete (D, D)", []map[string]any{sel(0), keys("d", "d")},
				func(cs []pageCell) string { return ids(cs, "*", "c-2") }},
			{"undo the deletion (Z)", []map[string]any{sel(0), keys("z")},
				func(cs []pageCell) string { return ids(cs, "c-1", "*", "c-2") }},
			{"notebook metadata", []map[string]any{page("set_metadata", map[string]any{"key": "agent_notes", "value": map[string]any{"by": "ann", "tags": []any{"é", "日本"}}})}, nil},
		}
		for _, st := range steps {
			cs := l.step(t, "cells", "ann", p, st.cmds...)
			if st.want != nil {
				if msg := st.want(cs); msg != "" {
					t.Errorf("%s: the page shows %s", st.what, msg)
				}
			}
		}
		nb := l.subs[0].Read("notebook://cells")
		if !strings.Contains(nb, `"agent_notes"`) {
			t.Errorf("notebook://cells lacks the metadata set in the page: %s", nb)
		}
	})

	t.Run("two people", func(t *testing.T) {
		const p = "two.ipynb"
		l.do(t, map[string]any{"op": "open", "page": "ann", "path": p})
		l.do(t, map[string]any{"op": "open", "page": "bob", "path": p})
		l.flushSubs()
		start := time.Now()
		l.do(t, map[string]any{"op": "type_many", "ops": []any{
			map[string]any{"page": "ann", "path": p, "index": 0, "text": " # ann était là", "delay": 25},
			map[string]any{"page": "bob", "path": p, "index": 1, "text": " # bob 日本 🎉", "delay": 25},
		}})
		l.heardAfter(t, "two", start)
		cs := l.samePage(t, "two", "ann", p)
		l.samePage(t, "two", "bob", p)
		if cs[0].Source != "x = 1 # ann était là" || cs[1].Source != "y = 2 # bob 日本 🎉" {
			t.Errorf("after both typed: %q, %q", cs[0].Source, cs[1].Source)
		}
		l.do(t, map[string]any{"op": "close", "page": "bob"})
	})

	t.Run("rename", func(t *testing.T) {
		const from, to = "rename.ipynb", "renamed é.ipynb"
		c := l.subs[0]
		c.Bind("moving", from)
		for _, sub := range l.subs {
			sub.Subscribe("notebook://moving", sidecartest.CellURI("moving", "m-1"))
		}
		l.do(t, map[string]any{"op": "open", "page": "ann", "path": from})
		l.step(t, "moving", "ann", from, map[string]any{"op": "type", "page": "ann", "path": from, "index": 0, "text": " # before"})
		for len(events.Events) > 0 {
			<-events.Events
		}
		l.flushSubs()
		start := time.Now()
		l.do(t, map[string]any{"op": "rename", "page": "ann", "from": from, "to": to})
		l.heardAfter(t, "moving", start)
		var renamed sidecartest.Received
		for renamed.Ev.RenamedFrom == "" {
			renamed = events.Next(t, testenv.Wait)
		}
		if renamed.Ev.RenamedFrom != from || renamed.Ev.Path != to {
			t.Errorf("rename event: path %q renamed_from %q, want %q from %q", renamed.Ev.Path, renamed.Ev.RenamedFrom, to, from)
		}
		// The event came from the second sidecar; this one follows the rename on its own.
		var list string
		testenv.Eventually(t, testenv.Wait, "list_notebooks naming moving at its new path", func() bool {
			list = c.CallTool("list_notebooks", nil)
			return strings.Contains(list, `{"name":"moving","path":"`+to+`"`) && !strings.Contains(list, `"present":false`)
		}, func() string { return list })
		l.samePage(t, "moving", "ann", to)
		l.step(t, "moving", "ann", to, map[string]any{"op": "type", "page": "ann", "path": to, "index": 1, "text": " # after"})
	})

	t.Run("closed and reopened", func(t *testing.T) {
		// Twice: the first reopening may mark the cells trusted (jupyter_server does once
		// it has signed the file it saved: a change of the document, which is served);
		// the second must change nothing, and announce nothing.
		const p = "typed.ipynb"
		room := strings.TrimSuffix(strings.TrimPrefix(l.roomKey(t, p), ".notebook:"), ".y")
		for round := range 2 {
			l.samePage(t, "typed", "ann", p)
			for len(events.Events) > 0 {
				<-events.Events
			}
			before := l.subs[0].Read("notebook://typed")
			deleted := strings.Count(l.srv.Log(), "Room json:notebook:"+room+" deleted")
			l.do(t, map[string]any{"op": "close", "page": "ann"})
			l.flushSubs()
			testenv.Eventually(t, testenv.Wait, "the room deleted (document_cleanup_delay)", func() bool {
				return strings.Count(l.srv.Log(), "Room json:notebook:"+room+" deleted") > deleted
			})
			l.sameAs(t, "typed", false, func() ([]byte, error) { return []byte(before), nil })
			l.do(t, map[string]any{"op": "open", "page": "ann", "path": p})
			l.samePage(t, "typed", "ann", p)
			after, err := l.pageModel("ann", p)()
			if err != nil {
				t.Fatal(err)
			}
			if sidecartest.JSONSame(before, after) {
				// Nothing changed: nothing may be announced (within the debounce ceiling).
				for _, c := range l.subs {
					if n, ok := timedNote(c, sidecartest.Delivery); ok {
						t.Errorf("%s: told of %s at %s though nothing served changed across close and reopen%s", c.Name(), n.uri, n.at.Format("15:04:05.000"), eventsOf(events, p))
					}
				}
				continue
			}
			if round == 1 || !reflect.DeepEqual(parseNotebook([]byte(before), true), parseNotebook(after, true)) {
				t.Errorf("reopening %d changed the notebook:\nbefore %s\n after %s", round+1, before, after)
			}
			t.Logf("reopening %d: the server marked the cells trusted, the rest is as before", round+1)
		}
	})
}

// ids checks the page's cell ids against want ("*" any id not in want), or says what
// they are.
func ids(cs []pageCell, want ...string) string {
	var got []string
	ok := len(cs) == len(want)
	for i, c := range cs {
		got = append(got, c.ID)
		if ok && want[i] != "*" && want[i] != c.ID {
			ok = false
		}
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("cells %v, want %v", got, want)
}

// types checks the page's cell types against want, or says what they are.
func types(cs []pageCell, want ...string) string {
	var got []string
	for _, c := range cs {
		got = append(got, c.CellType)
	}
	if reflect.DeepEqual(got, want) {
		return ""
	}
	return fmt.Sprintf("cell types %v, want %v", got, want)
}

// TestJupyterLabTypingLatency measures a person typing continuously in JupyterLab (issue
// 20, docs/BENCHMARKS.md): keystroke → notifications/resources/updated with the default
// debounce (250 ms / 2 s) and with it off (a second sidecar on the same store), keystroke
// → a resources/read that contains it, keystroke → the store's row (the lower bound: the
// commit every reader of the store waits for), and Ctrl+Enter → the output readable.
// The anchor, in the same run for the same keys: the real jupyter-mcp-server with its own
// watcher (JUPYTER_MCP_WATCH_NOTEBOOKS=true: a document websocket per bound notebook,
// 250 ms / 2 s debounce), its subscriber's notifications and its resources/read.
// BROWSER_BENCH=1 runs it (BROWSER_BENCH_DURATION, default 60s, of typing); it needs a
// sidecar built without -race and the jupyter-mcp-server environment.
func TestJupyterLabTypingLatency(t *testing.T) {
	if os.Getenv("BROWSER_BENCH") != "1" {
		t.Skip("a benchmark: BROWSER_BENCH=1 runs it")
	}
	if sidecartest.RaceBuild {
		t.Skip("a timing measurement: run it without -race")
	}
	dur := envDuration(t, "BROWSER_BENCH_DURATION", 60*time.Second)
	const p, runs, delay = "bench.ipynb", 10, 120 // delay: ms between keys, about 6 keys/s with the key itself
	nb := jupytertest.NotebookJSON([2]string{"b-1", ""}, [2]string{"b-2", "n = globals().get('n', 0) + 1\nprint(n)"})
	py := needMCPServer(t)
	l := startLab(t, map[string]string{p: nb}, map[string]string{"bench": p}, "")
	off := l.watch(t, "notebooks: {bench: \""+p+"\"}\nnotifications: {debounce: 0s}\n")
	subs := map[string]*sidecartest.GoClient{"default": l.subs[0], "off": sidecartest.DialGo(t, off.MCPURL(), true)}
	subs["off"].Subscribe("notebook://bench")
	l.do(t, map[string]any{"op": "open", "page": "ann", "path": p})
	l.samePage(t, "bench", "ann", p)
	room := l.roomKey(t, p)
	// The anchor: jupyter-mcp-server watching the notebook itself (no feed), bound by an
	// agent with use_notebook (it attaches to the page's kernel session), and a 2026-07-28
	// subscriber of its own.
	jms := startJMS(t, py, l.srv, readRecipe(t), "", "", "JUPYTER_MCP_WATCH_NOTEBOOKS=true", "JUPYTER_MCP_SIDECAR_FEED_URL=",
		"START_NEW_CODE_SANDBOX=false") // no kernel of its own: use_notebook attaches to the page's
	watcher, err := sidecartest.DialGoAs(t, jms.url, true, "Bearer "+mcpServerToken)
	if err != nil {
		t.Fatal(err)
	}
	watcher.Bind("bench", p)
	testenv.Eventually(t, testenv.Wait, "jupyter-mcp-server watching the notebook", func() bool {
		return jms.logs.Contains("Watching notebook [bench]")
	}, jms.logs.String)
	watcher.Subscribe("notebook://bench")
	subs["watcher"] = watcher

	// What the agents see while the person types: every notification, and reads of the
	// cell back to back.
	stop := make(chan struct{})
	type collected struct {
		name  string
		notes []note
	}
	notesCh := make(chan collected)
	for name, c := range subs {
		flushNotes(c)
		go func() {
			var all []note
			for {
				select {
				case <-stop:
					notesCh <- collected{name, all}
					return
				default:
				}
				if n, ok := timedNote(c, 100*time.Millisecond); ok && n.uri == "notebook://bench" {
					all = append(all, n)
				}
			}
		}()
	}
	type read struct {
		at     time.Time
		source string
	}
	// reads reads the cell through c back to back, at most one read every 10 ms (the
	// sidecar's reads: the measure's resolution; jupyter-mcp-server opens a document
	// websocket per read, which sets its own).
	reads := func(c *sidecartest.GoClient) chan []read {
		ch := make(chan []read)
		go func() {
			var all []read
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					ch <- all
					return
				case <-tick.C:
				}
				text, err := c.TryRead(sidecartest.CellURI("bench", "b-1"))
				var cell struct{ Source any } // jupyter-mcp-server's is a list of lines
				if err == nil {
					err = json.Unmarshal([]byte(text), &cell)
				}
				if err != nil {
					t.Errorf("%s: %v", c.Name(), err)
					continue
				}
				all = append(all, read{time.Now(), multiline(cell.Source)})
			}
		}()
		return ch
	}
	reader := sidecartest.DialGo(t, l.sc.MCPURL(), true)
	watcherReader, err := sidecartest.DialGoAs(t, jms.url, true, "Bearer "+mcpServerToken)
	if err != nil {
		t.Fatal(err)
	}
	readsCh, watcherReadsCh := reads(reader), reads(watcherReader)

	line := "total = total + 1  # the quick brown fox, é 日本 🎉\n"
	per := time.Duration(delay+30) * time.Millisecond
	n := int(dur / per)
	text := string([]rune(strings.Repeat(line, n/len([]rune(line))+1))[:n])
	start := time.Now()
	keys := typed(l.do(t, map[string]any{"op": "type", "page": "ann", "path": p, "index": 0, "text": text, "delay": delay}))
	typing := time.Since(start)
	l.samePage(t, "bench", "ann", p)

	// Ctrl+Enter on the second cell, runs times: until its output reads the run's number.
	var exec []time.Duration
	for i := 1; i <= runs; i++ {
		l.do(t, map[string]any{"op": "select", "page": "ann", "path": p, "index": 1})
		at := typed(l.do(t, map[string]any{"op": "keys", "page": "ann", "keys": []string{"Control+Enter"}}))[0]
		want := fmt.Sprintf("%d\n", i)
		testenv.Eventually(t, testenv.Wait, "the run's output readable", func() bool {
			_, body, err := readOutput(reader, sidecartest.CellURI("bench", "b-2")+"/outputs/0")
			return err == nil && body == want
		})
		exec = append(exec, time.Since(at))
		l.do(t, map[string]any{"op": "wait_idle", "page": "ann", "path": p})
	}
	time.Sleep(3 * time.Second) // observation window: the last flush (max_delay 2 s) arrives
	close(stop)
	got := map[string][]note{}
	for range subs {
		c := <-notesCh
		got[c.name] = c.notes
	}
	sidecarReads, watcherReads := <-readsCh, <-watcherReadsCh

	// Keystroke i is in a read (or a row, or announced) once it came at or after it.
	typedText := []rune(text)
	after := func(times []time.Time) []time.Duration {
		var lags []time.Duration
		for _, k := range keys {
			for _, at := range times {
				if !at.Before(k) {
					lags = append(lags, at.Sub(k))
					break
				}
			}
		}
		return lags
	}
	// Key i is in the first read (from the one holding key i-1 on) whose source starts
	// with the text typed up to it.
	readLags := func(what string, rs []read) []time.Duration {
		var lags []time.Duration
		j := 0
		for i, k := range keys {
			prefix := string(typedText[:i+1])
			for j < len(rs) && !strings.HasPrefix(rs[j].source, prefix) {
				j++
			}
			if j == len(rs) {
				t.Fatalf("%s: no read contains key %d (%d reads)", what, i, len(rs))
			}
			lags = append(lags, rs[j].at.Sub(k))
		}
		return lags
	}
	rowTimes := l.rowsSince(t, room, keys[0])
	report := func(what string, lags []time.Duration) (p50, p99 time.Duration) {
		if len(lags) == 0 {
			t.Errorf("%s: nothing measured", what)
			return 0, 0
		}
		p50, p99 = percentiles(lags)
		t.Logf("LAG %s: p50 %v p99 %v max %v (%d)", what, p50.Round(time.Millisecond), p99.Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond), len(lags))
		return p50, p99
	}
	t.Logf("typed %d keys in %v (%.1f keys/s); %d reads through the sidecar, %d through jupyter-mcp-server", len(keys),
		typing.Round(time.Millisecond), float64(len(keys))/typing.Seconds(), len(sidecarReads), len(watcherReads))
	report(fmt.Sprintf("keystroke → store row (commit, the lower bound; %d rows)", len(rowTimes)), after(rowTimes))
	notified := map[string][2]time.Duration{}
	for _, name := range []string{"watcher", "default", "off"} {
		var ts []time.Time
		for _, n := range got[name] {
			ts = append(ts, n.at)
		}
		what := "sidecar, debounce " + name
		if name == "watcher" {
			what = "jupyter-mcp-server's watcher, JUPYTER_MCP_WATCH_NOTEBOOKS=true"
		}
		p50, p99 := report(fmt.Sprintf("keystroke → notifications/resources/updated (%s, %d notifications)", what, len(ts)), after(ts))
		notified[name] = [2]time.Duration{p50, p99}
	}
	sp50, sp99 := report("keystroke → resources/read containing it (sidecar)", readLags("sidecar", sidecarReads))
	wp50, wp99 := report("keystroke → resources/read containing it (jupyter-mcp-server)", readLags("jupyter-mcp-server", watcherReads))
	report("Ctrl+Enter → output resource readable", exec)
	ratio := func(a, b time.Duration) string { return fmt.Sprintf("%.2f×", float64(a)/float64(max(b, 1))) }
	for _, name := range []string{"default", "off"} {
		t.Logf("RATIO notification, sidecar (debounce %s) ÷ the watcher: p50 %s, p99 %s", name,
			ratio(notified[name][0], notified["watcher"][0]), ratio(notified[name][1], notified["watcher"][1]))
	}
	t.Logf("RATIO resources/read containing the key, sidecar ÷ jupyter-mcp-server: p50 %s, p99 %s", ratio(sp50, wp50), ratio(sp99, wp99))
}

// envDuration is the duration the environment variable name holds, or dflt.
func envDuration(t *testing.T, name string, dflt time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return dflt
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// eventsOf lists the change events of path that c received so far (for a failure's message).
func eventsOf(c sidecartest.Consumer, path string) string {
	var b strings.Builder
	for len(c.Events) > 0 {
		r := <-c.Events
		if strings.Contains(string(r.Raw), `"path":"`+path+`"`) {
			fmt.Fprintf(&b, "\n  event at %s: %s", r.At.Format("15:04:05.000"), r.Raw)
		}
	}
	return b.String()
}

// TestRenderedMatches holds the comparison of an output resource with what JupyterLab
// rendered: each kind agrees with itself and disagrees with a changed copy.
func TestRenderedMatches(t *testing.T) {
	png := "data:image/png;base64," + tinyPNG
	other := "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("not the png"))
	cases := []struct {
		name, pageMime, text string
		img                  *string
		mime, body           string
		ok                   bool
	}{
		{"stream", "application/vnd.jupyter.stdout", "héllo\n", nil, "text/plain", "héllo\n", true},
		{"stream differs", "application/vnd.jupyter.stdout", "héllo\n", nil, "text/plain", "hello\n", false},
		{"error", "application/vnd.jupyter.stderr", "ZeroDivisionError: division by zero", nil, "application/vnd.jupyter.error+json",
			`{"ename":"ZeroDivisionError","evalue":"division by zero","traceback":[]}`, true},
		{"error differs", "application/vnd.jupyter.stderr", "ZeroDivisionError: division by zero", nil, "application/vnd.jupyter.error+json",
			`{"ename":"ValueError","evalue":"division by zero","traceback":[]}`, false},
		{"value", "text/plain", "42", nil, "text/plain", "42", true},
		{"value differs", "text/plain", "42", nil, "text/plain", "43", false},
		{"image", "image/png", "", &png, "image/png", tinyPNG, true},
		{"image bytes differ", "image/png", "", &other, "image/png", tinyPNG, false},
		{"other type than JupyterLab's", "text/html", "bold", nil, "text/plain", "bold", false},
		{"html", "text/html", "bold", nil, "text/html", "<b>bold</b>", true},
	}
	for _, c := range cases {
		msg := renderedMatches(c.pageMime, c.text, c.img, c.mime, c.body)
		if (msg == "") != c.ok {
			t.Errorf("%s: %q, want agreement %v", c.name, msg, c.ok)
		}
	}
}
