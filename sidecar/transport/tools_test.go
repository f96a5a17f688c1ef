package transport

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	_ "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/outline"
	_ "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/search"
)

// TestToolHints lists the tools through an mcp-go client, with every compiled-in
// extension on, and checks that each states all four hints, and truthfully: mcp.NewTool's
// defaults announce a tool as destructive and open-world, so clients ask before a read.
func TestToolHints(t *testing.T) {
	type hints struct{ readOnly, destructive, idempotent, openWorld bool }
	readOnly := hints{readOnly: true, idempotent: true}
	want := map[string]hints{
		"list_notebooks":   readOnly,
		"search_notebooks": readOnly,
		"use_notebook":     {destructive: true, idempotent: true}, // rebinding a name drops its old path
		"unuse_notebook":   {destructive: true, idempotent: true},
	}
	on := map[string]map[string]any{"outline": {}, "search": {}}
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}, Extensions: on}, newLibrary(t, testPath))
	c := dialGo(t, r.url, false)
	list, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, tool := range list.Tools {
		listed = append(listed, tool.Name)
		t.Run(tool.Name, func(t *testing.T) {
			a := tool.Annotations
			if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
				t.Fatalf("not every hint stated: %+v", a)
			}
			got := hints{*a.ReadOnlyHint, *a.DestructiveHint, *a.IdempotentHint, *a.OpenWorldHint}
			if got.readOnly && got.destructive {
				t.Errorf("read-only and destructive: %+v", got)
			}
			if w, ok := want[tool.Name]; !ok || got != w {
				t.Errorf("hints %+v, want %+v", got, w)
			}
		})
	}
	if names := slices.Sorted(maps.Keys(want)); !slices.Equal(listed, names) {
		t.Errorf("tools listed %v, want %v", listed, names)
	}
}
