package jupyter

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// stack is a real Jupyter server, the built sidecar tailing its store as an operator
// would configure it, the Python clients (editors "a" and "b", the oracle "o"), and MCP
// subscribers of both eras to every configured name.
type stack struct {
	srv   *jupytertest.Server
	sc    *sidecartest.Sidecar
	py    *jupytertest.Client
	names map[string]string       // configured name → API path
	subs  []*sidecartest.GoClient // 2026-07-28 and 2025-11-25, subscribed to every configured notebook://
	probe *readyProbe
}

// startStack starts the server with o, then the sidecar configured with the server's
// store, file id database, root directory and names.
func startStack(t *testing.T, o jupytertest.Options, names map[string]string) *stack {
	t.Helper()
	return startStackWith(t, o, names, "")
}

// startStackWith is startStack with more sidecar configuration (YAML, top-level keys
// other than store, fileid, notebooks and server).
func startStackWith(t *testing.T, o jupytertest.Options, names map[string]string, extra string) *stack {
	t.Helper()
	srv := jupytertest.Start(t, o)
	var nbs []string
	for n, p := range names {
		nbs = append(nbs, fmt.Sprintf("%s: %q", n, p))
	}
	sort.Strings(nbs)
	cfg := fmt.Sprintf(`store:
  backend: sqlite
  sqlite: {path: %q}
fileid: {db_path: %q, root_dir: %q}
notebooks: {%s}
%s`, srv.StorePath, srv.FileIDPath, srv.Root, strings.Join(nbs, ", "), extra)
	s := &stack{srv: srv, sc: sidecartest.Launch(t, t.TempDir(), cfg, "serve"), py: srv.Client(), names: names}
	var uris []string
	for n := range names {
		uris = append(uris, "notebook://"+n)
	}
	for _, modern := range []bool{true, false} {
		c := sidecartest.DialGo(t, s.sc.MCPURL(), modern)
		c.Subscribe(uris...)
		s.subs = append(s.subs, c)
	}
	s.probe = startReadyProbe(t, s.sc)
	return s
}

// do runs one client command, failing t (a subtest's).
func (s *stack) do(t *testing.T, cmd map[string]any) jupytertest.Reply {
	t.Helper()
	r, err := s.py.Try(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// join puts each of who into path's room and returns the notebook's file id.
func (s *stack) join(t *testing.T, path string, who ...string) string {
	t.Helper()
	var id string
	for _, w := range who {
		id, _ = s.do(t, map[string]any{"op": "join", "client": w, "path": path})["file_id"].(string)
	}
	return id
}

// forget disconnects each of who from path and drops their documents.
func (s *stack) forget(t *testing.T, path string, who ...string) {
	t.Helper()
	for _, w := range who {
		s.do(t, map[string]any{"op": "forget", "client": w, "path": path})
	}
}

// edit runs an editing command as client who on path.
func (s *stack) edit(t *testing.T, who, path, op string, args map[string]any) {
	t.Helper()
	cmd := map[string]any{"op": op, "client": who, "path": path}
	for k, v := range args {
		cmd[k] = v
	}
	s.do(t, cmd)
}

// step makes one edit as client who on path, then waits until the subscribers were told
// of notebook://name and the sidecar serves what the oracle sees.
func (s *stack) step(t *testing.T, name, who, path, op string, args map[string]any) {
	t.Helper()
	s.drainSubs()
	s.edit(t, who, path, op, args)
	s.told(t, name)
	s.same(t, name, path)
}

// oracle is the server's view of path as the oracle client "o" sees it (it must have
// joined): YNotebook.get().
func (s *stack) oracle(path string) ([]byte, error) {
	r, err := s.py.Try(map[string]any{"op": "get", "client": "o", "path": path})
	if err != nil {
		return nil, err
	}
	return json.Marshal(r["nb"])
}

// storeView is what pycrdt makes of the store itself: every row of the notebook's room
// merged into one document, read by YNotebook.get(). It is the oracle where the server's
// own document and its store part ways (rows lost or rewritten by pycrdt-store).
func (s *stack) storeView(fileID string) func() ([]byte, error) {
	return func() ([]byte, error) {
		r, err := s.py.Try(map[string]any{"op": "store", "db": s.srv.StorePath, "room": jupytertest.RoomKey(fileID)})
		if err != nil {
			return nil, err
		}
		if errs, _ := r["errors"].([]any); len(errs) > 0 {
			return nil, fmt.Errorf("pycrdt cannot read the store's rows: %v", errs)
		}
		return json.Marshal(r["nb"])
	}
}

// serverAgrees logs whether the server's own view of path equals the store's (it does
// not after pycrdt-store lost or garbled rows: the server keeps serving its document
// while the store, and everything that reads it, holds another).
func (s *stack) serverAgrees(t *testing.T, path, fileID string) bool {
	t.Helper()
	server, err1 := s.oracle(path)
	store, err2 := s.storeView(fileID)()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if !sidecartest.JSONSame(string(server), store) {
		t.Logf("UPSTREAM: the server's document of %s and its store differ:\nserver %s\n store %s", path, server, store)
		return false
	}
	return true
}

// drainSubs forgets what the subscribers were told so far.
func (s *stack) drainSubs() {
	for _, c := range s.subs {
		sidecartest.Drain(c, 0)
	}
}

// told waits until every subscriber was told of notebook://name.
func (s *stack) told(t *testing.T, name string) {
	t.Helper()
	for _, c := range s.subs {
		sidecartest.Await(t, c, testenv.Wait, "notebook://"+name)
	}
}

// same waits until the sidecar serves name as the oracle sees path — the notebook, every
// cell and every output at one moment (the oracle's client hears of an edit a little
// after the store does, so both are compared until they agree) — then checks /readyz.
func (s *stack) same(t *testing.T, name, path string) {
	t.Helper()
	s.sameAs(t, name, false, func() ([]byte, error) { return s.oracle(path) })
	s.probe.ready(t)
}

// sameAs waits until notebook://name, its cells and their outputs equal what want
// returns (nbformat JSON), compared as values (key order aside). With disk, want is the
// file as saved, and only the notebook is compared, both normalised by parseNotebook.
func (s *stack) sameAs(t *testing.T, name string, disk bool, want func() ([]byte, error)) {
	t.Helper()
	reader := s.subs[0]
	var got, diff string
	var w []byte
	var err error
	testenv.Eventually(t, testenv.Wait, "notebook://"+name+" equals the server's view", func() bool {
		if w, err = want(); err != nil {
			diff = "oracle: " + err.Error()
			return false
		}
		if got, err = reader.TryRead("notebook://" + name); err != nil {
			diff = err.Error()
			return false
		}
		wantNB := parseNotebook(w, disk)
		if !reflect.DeepEqual(parseNotebook([]byte(got), disk), wantNB) {
			diff = fmt.Sprintf("\n got %s\nwant %s", got, w)
			return false
		}
		if disk {
			return true
		}
		diff = cellsMismatch(reader, name, wantNB)
		return diff == ""
	}, func() string { return diff })
}

// parseNotebook parses a notebook (nil if it is not JSON). With disk it removes what a
// room and its saved file differ in: the cell metadata "trusted", which jupyter_server's
// contents manager sets on the cells it loads into a room (false on a first load, true
// once the server has signed the file it saved) and strips on save, and the
// language_info and kernelspec placeholders jupyter_ydoc's YNotebook.set gives a file
// without them (the sidecar serves a file as the room it loads into: docs/COMPATIBILITY.md).
// The room's own view and the sidecar's are compared as they are.
func parseNotebook(b []byte, disk bool) map[string]any {
	var v map[string]any
	if json.Unmarshal(b, &v) != nil || !disk {
		return v
	}
	if md, ok := v["metadata"].(map[string]any); ok {
		for k, placeholder := range map[string]any{
			"language_info": map[string]any{"name": ""},
			"kernelspec":    map[string]any{"name": "", "display_name": ""},
		} {
			if reflect.DeepEqual(md[k], placeholder) {
				delete(md, k)
			}
		}
	}
	cells, _ := v["cells"].([]any)
	for _, c := range cells {
		if cell, ok := c.(map[string]any); ok {
			if md, ok := cell["metadata"].(map[string]any); ok {
				delete(md, "trusted")
			}
		}
	}
	return v
}

// servedCell is the body of a cell resource.
type servedCell struct {
	ID             string         `json:"id"`
	Index          int            `json:"index"`
	CellType       string         `json:"cell_type"`
	Source         string         `json:"source"`
	ExecutionCount any            `json:"execution_count"`
	Metadata       map[string]any `json:"metadata"`
	Outputs        []struct {
		Index    int    `json:"index"`
		MIMEType string `json:"mimeType"`
		URI      string `json:"uri"`
	} `json:"outputs"`
}

// cellsMismatch compares every cell resource and output resource of name with the
// oracle's notebook want; "" when they agree, else the first difference.
func cellsMismatch(reader *sidecartest.GoClient, name string, want map[string]any) string {
	cells, _ := want["cells"].([]any)
	seen := map[string]bool{}
	for i, c := range cells {
		cell, _ := c.(map[string]any)
		id, _ := cell["id"].(string)
		if seen[id] {
			return fmt.Sprintf("cell id %q twice in the oracle's notebook", id)
		}
		seen[id] = true
		uri := sidecartest.CellURI(name, id)
		text, err := reader.TryRead(uri)
		if err != nil {
			return err.Error()
		}
		var doc servedCell
		if err := json.Unmarshal([]byte(text), &doc); err != nil {
			return fmt.Sprintf("%s: %v: %s", uri, err, text)
		}
		md, _ := cell["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
		}
		if doc.ID != id || doc.Index != i || doc.CellType != cell["cell_type"] || doc.Source != cell["source"] ||
			!reflect.DeepEqual(doc.ExecutionCount, cell["execution_count"]) || !reflect.DeepEqual(doc.Metadata, md) {
			return fmt.Sprintf("%s: got %s, want cell %d %v", uri, text, i, cell)
		}
		outs, _ := cell["outputs"].([]any)
		if len(doc.Outputs) != len(outs) {
			return fmt.Sprintf("%s: %d outputs, the oracle has %d", uri, len(doc.Outputs), len(outs))
		}
		for j, o := range outs {
			out, _ := o.(map[string]any)
			e := doc.Outputs[j]
			if e.Index != j || e.URI != fmt.Sprintf("%s/outputs/%d", uri, j) {
				return fmt.Sprintf("%s: output entry %d is %+v", uri, j, e)
			}
			mime, body, err := readOutput(reader, e.URI)
			if err != nil {
				return err.Error()
			}
			if mime != e.MIMEType {
				return fmt.Sprintf("%s: served as %s, listed as %s", e.URI, mime, e.MIMEType)
			}
			if msg := outputMatches(out, mime, body); msg != "" {
				return e.URI + ": " + msg
			}
		}
	}
	return ""
}

// readOutput reads an output resource: its MIME type and its text, or its blob.
func readOutput(c *sidecartest.GoClient, uri string) (string, string, error) {
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := c.Client.ReadResource(sidecartest.WaitCtx(c.T, 10*time.Second), req)
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", uri, err)
	}
	if len(res.Contents) != 1 {
		return "", "", fmt.Errorf("read %s: %d contents", uri, len(res.Contents))
	}
	switch rc := res.Contents[0].(type) {
	case mcp.TextResourceContents:
		return rc.MIMEType, rc.Text, nil
	case mcp.BlobResourceContents:
		return rc.MIMEType, rc.Blob, nil
	}
	return "", "", fmt.Errorf("read %s: %T", uri, res.Contents[0])
}

// outputMatches says how an output resource served as mime with body differs from the
// oracle's nbformat output out ("" if it does not): a stream is its text, an error its
// ename, evalue and traceback, and a rich output one of its data bundle's types (an
// image if it has one), with that type's value (binary types base64 as stored).
func outputMatches(out map[string]any, mime, body string) string {
	switch out["output_type"] {
	case "stream":
		if body != multiline(out["text"]) {
			return fmt.Sprintf("stream text %q, want %q", body, multiline(out["text"]))
		}
		return ""
	case "error":
		var e map[string]any
		if json.Unmarshal([]byte(body), &e) != nil || e["ename"] != out["ename"] || e["evalue"] != out["evalue"] ||
			!reflect.DeepEqual(e["traceback"], out["traceback"]) {
			return fmt.Sprintf("error %s, want %v", body, out)
		}
		return ""
	}
	data, _ := out["data"].(map[string]any)
	v, ok := data[mime]
	if !ok {
		return fmt.Sprintf("served as %s, which its data bundle %v lacks", mime, keys(data))
	}
	if _, png := data["image/png"]; png && mime != "image/png" {
		return fmt.Sprintf("served as %s, not its image/png", mime)
	}
	want := multiline(v)
	if strings.HasPrefix(mime, "image/") && mime != "image/svg+xml" {
		want = strings.Join(strings.Fields(want), "")
	} else if _, isText := v.(string); !isText {
		if _, isList := v.([]any); !isList {
			b, _ := json.Marshal(v)
			want = string(b)
		}
	}
	if body != want {
		return fmt.Sprintf("%s body %.80q, want %.80q", mime, body, want)
	}
	return ""
}

func multiline(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case []any:
		var b strings.Builder
		for _, s := range t {
			str, _ := s.(string)
			b.WriteString(str)
		}
		return b.String()
	}
	return ""
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// readyProbe samples /readyz every 100 ms for the whole test, keeping the reasons of
// every answer that was not ready.
type readyProbe struct {
	sc   *sidecartest.Sidecar
	mu   sync.Mutex
	not  []string // "t+1.2s: body" of each not-ready answer
	stop chan struct{}
}

func startReadyProbe(t *testing.T, sc *sidecartest.Sidecar) *readyProbe {
	p := &readyProbe{sc: sc, stop: make(chan struct{})}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			if code, body := sc.Get("/readyz"); code != http.StatusOK {
				p.mu.Lock()
				p.not = append(p.not, fmt.Sprintf("t+%.1fs %d %s", time.Since(start).Seconds(), code, strings.TrimSpace(body)))
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { close(p.stop); <-done })
	return p
}

// ready checks that /readyz answers ready now.
func (p *readyProbe) ready(t *testing.T) {
	t.Helper()
	if code, body := p.sc.Get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz %d %s while the sidecar serves what the server does", code, body)
	}
}

// notReady returns and forgets the not-ready answers sampled so far.
func (p *readyProbe) notReady() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.not
	p.not = nil
	return n
}

// queryStore runs a query on a SQLite file opened read-only, as the sidecar opens it.
func queryStore(t *testing.T, path, query string, args ...any) [][]any {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
