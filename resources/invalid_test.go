package resources_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/library"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/transport"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// fixedNotebook is a Library holding one snapshot.
type fixedNotebook struct {
	path string
	snap *ynotebook.Snapshot
}

func (l fixedNotebook) Notebook(path string) (*ynotebook.Snapshot, error) {
	if path != l.path {
		return nil, fmt.Errorf("notebook %s: %w", path, library.ErrNotFound)
	}
	return l.snap, nil
}

func (l fixedNotebook) Paths() []string { return []string{l.path} }

// shapeCase reads one case of ystore/ynotebook's issue 40 fixtures (pycrdt rows and
// jupyter_ydoc's get() of them).
func shapeCase(t *testing.T, file, what string) (*ynotebook.Snapshot, string) {
	t.Helper()
	b, err := os.ReadFile("../ystore/ynotebook/testdata/shapes/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []struct {
			What string   `json:"what"`
			Rows [][]byte `json:"rows"`
			Get  string   `json:"get"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Cases {
		if c.What == what {
			nb := ynotebook.New()
			if err := nb.Load(c.Rows); err != nil {
				t.Fatal(err)
			}
			return nb.Snapshot(), c.Get
		}
	}
	t.Fatalf("no case %q in %s", what, file)
	return nil, ""
}

// exact decodes JSON keeping numbers' text.
func exact(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// TestReadServesGetWithInvalidCells reads a notebook holding a heading cell (issue 40,
// class 5) and whole numbers beyond 2^53 (class 8) over MCP: the notebook is get()'s,
// every cell kept in place, the invalid one named in _meta and counted; its cell resource
// keeps the keys get() shows.
func TestReadServesGetWithInvalidCells(t *testing.T) {
	snap, want := shapeCase(t, "5-unknown-cell-type.json", "heading between two cells")
	reg := prometheus.NewRegistry()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv, err := resources.New(resources.Config{
		StateFile:  t.TempDir() + "/names.json",
		Notebooks:  map[string]string{"nb": "a.ipynb"},
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registerer: reg,
	}, fixedNotebook{path: "a.ipynb", snap: snap}, resources.WithTransport(transport.Stdio(transport.Config{Logger: slog.New(slog.DiscardHandler), Registerer: reg}, inR, outW)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		_ = inW.Close()
		_ = outR.Close()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	call := func(id int, method, params string) map[string]any {
		t.Helper()
		go func() {
			_, _ = fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
		}()
		for sc.Scan() {
			var msg map[string]any
			if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
				t.Fatal(err)
			}
			if msg["id"] == float64(id) {
				if msg["error"] != nil {
					t.Fatalf("%s: %v", method, msg["error"])
				}
				return msg["result"].(map[string]any)
			}
		}
		t.Fatalf("%s: no answer: %v", method, sc.Err())
		return nil
	}
	call(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	read := func(id int, uri string) (text string, meta map[string]any) {
		res := call(id, "resources/read", fmt.Sprintf(`{"uri":%q}`, uri))
		c := res["contents"].([]any)[0].(map[string]any)
		meta, _ = c["_meta"].(map[string]any)
		return c["text"].(string), meta
	}

	text, meta := read(2, "notebook://nb")
	if got, w := exact(t, []byte(text)), exact(t, []byte(want)); !reflect.DeepEqual(got, w) {
		t.Fatalf("notebook://nb:\n got %s\nwant %s", text, want)
	}
	invalid, _ := json.Marshal(meta[resources.InvalidKey])
	if string(invalid) != `[{"index":1,"reasons":["cell_type heading is not code, markdown or raw"]}]` {
		t.Fatalf("_meta %s = %s", resources.InvalidKey, invalid)
	}
	text, meta = read(3, "notebook://nb/cells/h")
	var cell map[string]any
	if err := json.Unmarshal([]byte(text), &cell); err != nil {
		t.Fatal(err)
	}
	if cell["cell_type"] != "heading" || cell["level"] != 2.0 || cell["index"] != 1.0 || cell["outputs"] != nil {
		t.Fatalf("cell h: %s", text)
	}
	if meta[resources.InvalidKey] == nil {
		t.Fatalf("cell h: no %s in _meta %v", resources.InvalidKey, meta)
	}
	text, meta = read(4, "notebook://nb/cells/a")
	if meta[resources.InvalidKey] != nil || !bytes.Contains([]byte(text), []byte(`"outputs":[]`)) {
		t.Fatalf("cell a: %s, _meta %v", text, meta)
	}
	if n := testenv.Metric(t, reg, "jupyter_mcp_sidecar_mcp_invalid_cells_served_total"); n != 2 {
		t.Fatalf("invalid_cells_served_total = %v, want 2 (one in the notebook, one cell read)", n)
	}
}
