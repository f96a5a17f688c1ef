//lint:file-ignore SA1019 the 2025-11-25 era (resources/subscribe, the GET stream) is served and tested on purpose; mcp-go deprecates its client API

package transport

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/outline"
	_ "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/search"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// TestExtensionResourceThroughTheServer serves the outline extension's
// template: listed, read with the cache hints, subscribable, and notified
// only when an extension's Changed says so.
func TestExtensionResourceThroughTheServer(t *testing.T) {
	lib := newLibrary(t, testPath, "other.ipynb")
	// The fixture's edits follow one another: output-c1-0 holds the deletes of source-c1,
	// the edit recorded before it, and applied without it would change c1's source too.
	lib.edit(t, testPath, "source-c1")
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath, "other": "other.ipynb"}, Extensions: map[string]map[string]any{"outline": {}}}, lib)
	c := dialGo(t, r.url, false)
	tmpls, err := c.ListResourceTemplates(context.Background(), mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tmpls.ResourceTemplates, func(rt mcp.ResourceTemplate) bool { return rt.URITemplate.Raw() == outline.Template }) {
		t.Fatalf("templates: %+v", tmpls.ResourceTemplates)
	}
	var o outline.Outline
	if err := json.Unmarshal([]byte(readText(t, c, "notebook://work/outline")), &o); err != nil {
		t.Fatal(err)
	}
	if o.Path != testPath || len(o.Cells) != 4 || len(o.Headings) != 1 || o.Headings[0].Text != "Title" {
		t.Fatalf("outline = %+v", o)
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = "notebook://nobody/outline"
	if _, err := c.ReadResource(context.Background(), req); err == nil {
		t.Fatal("outline of an unbound name was read")
	}
	for _, uri := range []string{"notebook://work/outline", "notebook://other"} {
		sub := mcp.SubscribeRequest{}
		sub.Params.URI = uri
		if err := c.Subscribe(context.Background(), sub); err != nil {
			t.Fatal(err)
		}
	}
	// New output text of the same type: the cell changes, the outline does not.
	r.srv.NotebookChanged(testPath, lib.edit(t, testPath, "output-c1-0"), noOrigin)
	// A cell inserted: the outline changes.
	r.srv.NotebookChanged(testPath, lib.edit(t, testPath, "add-c5"), noOrigin)
	// A barrier: a session's notifications arrive in order, so once the other
	// notebook's arrives, every outline notification of the two changes has.
	r.srv.NotebookChanged("other.ipynb", ynotebook.Changes{Metadata: true}, noOrigin)
	c.waitUpdated(t, testenv.Wait, "notebook://work/outline", "notebook://other")
	var n int
	c.mu.Lock()
	for _, note := range c.notes {
		if uri, _ := note.Params.AdditionalFields["uri"].(string); uri == "notebook://work/outline" {
			n++
		}
	}
	c.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d outline notifications, want 1 (the insert, not the output text)", n)
	}
}

// TestSearchThroughTheServer calls search_notebooks: bound notebooks answer
// with cell URIs, others by path, and the index follows change sets.
func TestSearchThroughTheServer(t *testing.T) {
	lib := newLibrary(t, testPath, "other.ipynb")
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}, Extensions: map[string]map[string]any{"search": {"timeout": "1s"}}}, lib)
	c := dialGo(t, r.url, false)
	find := func(query, in string) (out struct {
		Results []struct{ URI, Path, CellID string }
		Hint    string
	}) {
		// The index follows change sets in the background: wait for a result.
		_ = testenv.Within(testenv.Wait, func() bool {
			res := callTool(t, c, "search_notebooks", map[string]any{"query": query, "in": in})
			if res.IsError {
				t.Fatalf("search_notebooks: %+v", res.Content)
			}
			if err := json.Unmarshal([]byte(res.Content[0].(mcp.TextContent).Text), &out); err != nil {
				t.Fatal(err)
			}
			return len(out.Results) > 0
		})
		return out
	}
	got := find("hello", "outputs")
	if len(got.Results) != 2 || got.Results[0].URI != "" || got.Results[0].Path != "other.ipynb" ||
		got.Results[1].URI != "notebook://work/cells/c1" || got.Hint == "" {
		t.Fatalf("hello: %+v", got)
	}
	ch := lib.edit(t, testPath, "source-c1")
	ch.Merge(lib.edit(t, testPath, "output-c1-0"))
	r.srv.NotebookChanged(testPath, ch, noOrigin)
	if got := find("hello, world", "both"); len(got.Results) != 1 || got.Results[0].URI != "notebook://work/cells/c1" {
		t.Fatalf("after an edit: %+v", got)
	}
}
