//lint:file-ignore SA1019 the 2025-11-25 era (resources/subscribe, the GET stream) is served and tested on purpose; mcp-go deprecates its client API

package transport

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
)

func TestLegacySubscribeNotifyRead(t *testing.T) {
	lib := newLibrary(t, testPath)
	r := startServer(t, resources.Config{}, lib)
	c := dialGo(t, r.url, false)
	res := callTool(t, c, "use_notebook", map[string]any{"notebook_name": "work", "notebook_path": testPath})
	if res.IsError {
		t.Fatalf("use_notebook: %+v", res.Content)
	}
	for _, uri := range []string{"notebook://work", "notebook://work/cells/c1", "notebook://work/cells/c1/outputs/0"} {
		req := mcp.SubscribeRequest{}
		req.Params.URI = uri
		if err := c.Subscribe(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	ch := lib.edit(t, testPath, "source-c1")
	r.srv.NotebookChanged(testPath, ch, noOrigin)
	c.waitUpdated(t, testenv.Wait, "notebook://work", "notebook://work/cells/c1")
	if got := readText(t, c, "notebook://work/cells/c1"); !strings.Contains(got, "hello, world") {
		t.Fatalf("cell after the change: %s", got)
	}
	// An output subscription hears its output change.
	r.srv.NotebookChanged(testPath, lib.edit(t, testPath, "output-c1-0"), noOrigin)
	c.waitUpdated(t, testenv.Wait, "notebook://work/cells/c1/outputs/0")
	if got := readText(t, c, "notebook://work/cells/c1/outputs/0"); got != "hello, world\n" {
		t.Fatalf("output after the change: %q", got)
	}
}

func TestModernListenNotifyRead(t *testing.T) {
	lib := newLibrary(t, testPath)
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}}, lib)
	c := dialGo(t, r.url, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop, err := c.ListenAsync(ctx, mcp.SubscriptionFilter{ResourceSubscriptions: []string{"notebook://work", "notebook://work/cells/c1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	testenv.Eventually(t, testenv.Wait, "the listen stream registered", func() bool { n, _, _ := stats(r); return n[era20260728] == 1 })
	ch := lib.edit(t, testPath, "source-c1")
	r.srv.NotebookChanged(testPath, ch, noOrigin)
	ids := c.waitUpdated(t, testenv.Wait, "notebook://work", "notebook://work/cells/c1")
	if len(ids) != 2 || ids[0] == nil {
		t.Fatalf("notifications not tagged with the subscription id: %v", ids)
	}
	if got := readText(t, c, "notebook://work/cells/c1"); !strings.Contains(got, "hello, world") {
		t.Fatalf("cell after the change: %s", got)
	}
}

func TestNotebookMovedNamesFollow(t *testing.T) {
	const moved = "work/renamed.ipynb"
	lib := newLibrary(t, testPath)
	r := startServer(t, resources.Config{Notebooks: map[string]string{"pinned": testPath}}, lib)
	c := dialGo(t, r.url, false)
	if res := callTool(t, c, "use_notebook", map[string]any{"notebook_name": "work", "notebook_path": testPath}); res.IsError {
		t.Fatalf("use_notebook: %+v", res.Content)
	}
	req := mcp.SubscribeRequest{}
	req.Params.URI = "notebook://work"
	if err := c.Subscribe(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	lib.mu.Lock()
	lib.nbs[moved] = lib.nbs[testPath]
	delete(lib.nbs, testPath)
	lib.mu.Unlock()
	r.srv.NotebookMoved(testPath, moved, noOrigin)
	c.waitUpdated(t, testenv.Wait, "notebook://work")
	if p := boundPath(t, c, "work"); p != moved {
		t.Fatalf("bound name at %q after the rename, want %q", p, moved)
	}
	if got := readText(t, c, "notebook://work"); !strings.Contains(got, `"cells"`) {
		t.Fatalf("read after the rename: %s", got)
	}
	if p := boundPath(t, c, "pinned"); p != testPath {
		t.Fatalf("configured name moved to %q", p)
	}
}

// boundPath is the path the name is bound to, as resources/list describes it.
func boundPath(t *testing.T, c *goClient, name string) string {
	t.Helper()
	res, err := c.ListResources(context.Background(), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Resources {
		if r.URI == "notebook://"+name {
			return r.Description
		}
	}
	t.Fatalf("%s is not listed: %+v", name, res.Resources)
	return ""
}
