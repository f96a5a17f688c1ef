package resources

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions/outline"
)

// TestExtensionResourceThroughTheServer serves the outline extension's
// template: listed, read with the cache hints, subscribable, and notified
// only when an extension's Changed says so.
func TestExtensionResourceThroughTheServer(t *testing.T) {
	lib := newLibrary(t, testPath)
	r := startServer(t, Config{Notebooks: map[string]string{"work": testPath}, Extensions: map[string]map[string]any{"outline": {}}}, lib)
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
	sub := mcp.SubscribeRequest{}
	sub.Params.URI = "notebook://work/outline"
	if err := c.Subscribe(context.Background(), sub); err != nil {
		t.Fatal(err)
	}
	// New output text of the same type: the cell changes, the outline does not.
	r.srv.NotebookChanged(testPath, lib.edit(t, testPath, "output-c1-0"), noOrigin)
	// A cell inserted: the outline changes.
	r.srv.NotebookChanged(testPath, lib.edit(t, testPath, "add-c5"), noOrigin)
	c.waitUpdated(t, 2500*time.Millisecond, "notebook://work/outline")
	time.Sleep(100 * time.Millisecond)
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
