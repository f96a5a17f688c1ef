package stats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// library is an in-memory extensions.Library.
type library struct {
	mu    sync.Mutex
	snaps map[string]*ynotebook.Snapshot
}

func (l *library) Notebooks() []extensions.Notebook {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []extensions.Notebook
	for _, p := range []string{"a.ipynb", "b.ipynb"} {
		if _, ok := l.snaps[p]; ok {
			out = append(out, extensions.Notebook{Path: p, Names: []string{p[:1]}})
		}
	}
	return out
}

func (l *library) Snapshot(path string) (*ynotebook.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.snaps[path]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("%w: %s", extensions.ErrNotFound, path)
}

func (l *library) Resolve(name string) (string, bool) { return name + ".ipynb", true }

func (l *library) set(path string, cells ...ynotebook.Cell) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.snaps[path] = ynotebook.NewSnapshot(cells...)
}

// TestStats builds the extension the way the server does (extensions.Build
// with every extension compiled into this test: stats alone), calls its
// tool, and hands it a change set.
func TestStats(t *testing.T) {
	lib := &library{snaps: map[string]*ynotebook.Snapshot{}}
	lib.set("a.ipynb", ynotebook.Cell{ID: "1", CellType: "code", Outputs: []map[string]any{{"output_type": "stream"}}},
		ynotebook.Cell{ID: "2", CellType: "markdown"})
	surface := extensions.NewSurface(extensions.SurfaceConfig{})
	set, err := extensions.Build(map[string]map[string]any{"stats": {"label": "mine"}}, surface, extensions.Deps{Library: lib})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer set.Stop(context.Background())
	a := surface.Tools()[0].Tool.Annotations
	if a.ReadOnlyHint == nil || !*a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint ||
		a.IdempotentHint == nil || !*a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Fatalf("notebook_stats reads only, and says so with all four hints: %+v", a)
	}
	call := func() string {
		res, err := surface.Tools()[0].Handler(context.Background(), mcp.CallToolRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(mcp.TextContent).Text
	}
	want := `{"label":"mine","notebooks":[{"path":"a.ipynb","names":["a"],"cells":{"code":1,"markdown":1},"outputs":1}],"changes_seen":0}`
	if got := call(); got != want {
		t.Fatalf("notebook_stats = %s, want %s", got, want)
	}
	lib.set("b.ipynb", ynotebook.Cell{ID: "3", CellType: "raw"})
	set.NotebookChanged("b.ipynb", ynotebook.Changes{Added: []string{"3"}})
	// The extension counts change sets on its own goroutine: poll until it has, within a
	// failure bound (this module, like any extension's, cannot import the sidecar's
	// internal test helpers).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		last := call()
		var got struct{ Notebooks []any }
		if err := json.Unmarshal([]byte(last), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Notebooks) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the change set counted: not within 30 s: %s", last)
		}
	}
}

// TestStatsRefusesUnknownOptions checks that a misspelt option stops the build, by name.
func TestStatsRefusesUnknownOptions(t *testing.T) {
	lib := &library{snaps: map[string]*ynotebook.Snapshot{}}
	_, err := extensions.Build(map[string]map[string]any{"stats": {"lable": "mine"}}, extensions.NewSurface(extensions.SurfaceConfig{}), extensions.Deps{Library: lib})
	if !errors.Is(err, option.ErrUnknown) || !strings.Contains(err.Error(), `lable: unknown key (known: label)`) {
		t.Fatalf("Build = %v, want option.ErrUnknown naming lable", err)
	}
}
