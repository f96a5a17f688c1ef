package outline

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// Name is the extension's registered name.
const Name = "outline"

// Version is the extension's version.
const Version = "1.0.0"

// Template is the URI template of the outline resource.
const Template = "notebook://{name}/outline"

const suffix = "/outline"

func init() { extensions.Register(Name, New) }

// Extension serves the outline resource. It remembers, per bound name, a
// digest of the outline last served or announced, so that a change set that
// leaves the outline as it was notifies nobody.
type Extension struct {
	extensions.Base
	lib extensions.Library

	mu      sync.Mutex
	digests map[string]uint64 // name → digest of its outline
}

// New builds the extension; it takes no options.
func New(h *extensions.Host) (extensions.Extension, error) {
	if err := option.Decode(h.Options(), &struct{}{}); err != nil {
		return nil, err
	}
	return &Extension{lib: h.Library(), digests: map[string]uint64{}}, nil
}

// Manifest names the extension.
func (e *Extension) Manifest() extensions.Manifest {
	return extensions.Manifest{Name: Name, Version: Version, APIVersion: extensions.APIVersion,
		Description: "notebook://{name}/outline: headings and a per-cell summary of a notebook."}
}

// Register adds the outline resource template.
func (e *Extension) Register(s *extensions.Surface) error {
	return s.AddResource(extensions.Resource{
		Template: mcp.NewResourceTemplate(Template, "outline",
			mcp.WithTemplateDescription("A bound notebook in a few hundred tokens: the headings of its markdown cells, "+
				"and per cell its id, type, first line, output count and output types, with cell URIs. "+
				"It changes when the structure changes, not while a code cell is typed in."),
			mcp.WithTemplateMIMEType(extensions.MIMECell)),
		Read:    e.read,
		Changed: e.changed,
	})
}

// Capabilities declares the outline resource.
func (e *Extension) Capabilities() ([]extensions.Capability, error) {
	return []extensions.Capability{{Name: "outline.resource", Enabled: true,
		Description: "notebook://{name}/outline: headings, and per cell id, type, first line and outputs; subscribable."}}, nil
}

// URI is the outline URI of the notebook bound as name.
func URI(name string) string { return extensions.NotebookURI(name) + suffix }

func (e *Extension) read(_ context.Context, uri string) ([]mcp.ResourceContents, error) {
	name, ok := strings.CutSuffix(strings.TrimPrefix(uri, extensions.NotebookURI("")), suffix)
	if !ok || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%w: %q is not an outline URI", extensions.ErrNotFound, uri)
	}
	path, ok := e.lib.Resolve(name)
	if !ok {
		return nil, fmt.Errorf("%w: no notebook is bound to the name %q (use_notebook binds one)", extensions.ErrNotFound, name)
	}
	snap, err := e.lib.Snapshot(path)
	if err != nil {
		return nil, fmt.Errorf("notebook %q (%s): %w", name, path, err)
	}
	body, err := json.Marshal(Of(name, path, snap))
	if err != nil {
		return nil, fmt.Errorf("encode outline: %w", err)
	}
	e.remember(name, body)
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: extensions.MIMECell, Text: string(body)}}, nil
}

// changed announces the outline URI when its content differs from the one
// last served or announced (or none was).
func (e *Extension) changed(name, path string, ch ynotebook.Changes) []string {
	if !structural(ch) {
		return nil
	}
	snap, err := e.lib.Snapshot(path)
	if err != nil {
		return []string{URI(name)} // gone: a read says so
	}
	body, err := json.Marshal(Of(name, path, snap))
	if err != nil || e.remember(name, body) {
		return []string{URI(name)}
	}
	return nil
}

// structural reports whether ch may change an outline: a source edit may
// change a first line or a heading; metadata, execution counts and
// attachments never do.
func structural(ch ynotebook.Changes) bool {
	if len(ch.Added)+len(ch.Removed)+len(ch.Moved) > 0 {
		return true
	}
	for _, c := range ch.Cells {
		if c.Source || c.Outputs || c.CellType {
			return true
		}
	}
	return false
}

// remember records body as name's outline and reports whether it differs
// from the one recorded before (true when there was none).
func (e *Extension) remember(name string, body []byte) bool {
	h := fnv.New64a()
	_, _ = h.Write(body)
	d := h.Sum64()
	e.mu.Lock()
	defer e.mu.Unlock()
	prev, ok := e.digests[name]
	e.digests[name] = d
	return !ok || prev != d
}
