package extensions

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// Resource is a resource template an extension serves. The server runs Read
// behind the resource gate and the hooks (like its own resources), answers an
// error wrapping ErrNotFound as not found, adds the cache hints, and lets
// clients subscribe to the template's URIs.
type Resource struct {
	Template mcp.ResourceTemplate
	// Read returns the contents of uri, a URI matching Template.
	Read func(ctx context.Context, uri string) ([]mcp.ResourceContents, error)
	// Changed lists the URIs of this template that a change set of the
	// notebook at path, bound as name, changes. The server calls it after its
	// debounce, once a read returns the new state, for every bound name, and
	// notifies their subscribers. It must not block; nil: never notified.
	Changed func(name, path string, ch ynotebook.Changes) []string
}

// Surface is the tools and resource templates being assembled before they
// are handed to the SDK. Extensions see it in Register.
type Surface struct {
	owner string
	log   *slog.Logger
	tools map[string]server.ServerTool
	by    map[string]string
	res   []Resource
	core  []string // core resource templates
}

// SurfaceConfig configures a Surface.
type SurfaceConfig struct {
	Reserved []string     // the core resource templates, which no extension may add
	Logger   *slog.Logger // nil: slog.Default()
}

// NewSurface returns an empty surface whose additions are owned by "core".
func NewSurface(cfg SurfaceConfig) *Surface {
	log := cmp.Or(cfg.Logger, slog.Default())
	return &Surface{owner: "core", log: log, tools: map[string]server.ServerTool{}, by: map[string]string{}, core: cfg.Reserved}
}

// AddTool registers a new tool; a name already present is ErrDuplicateTool.
func (s *Surface) AddTool(tool mcp.Tool, h server.ToolHandlerFunc) error {
	if prev, ok := s.by[tool.Name]; ok {
		return fmt.Errorf("add %q: %w (owned by %s)", tool.Name, ErrDuplicateTool, prev)
	}
	s.tools[tool.Name] = server.ServerTool{Tool: tool, Handler: h}
	s.by[tool.Name] = s.owner
	return nil
}

// ReplaceTool swaps an existing tool for another of the same name. A tool
// that does not exist is logged as a warning and nothing is registered.
func (s *Surface) ReplaceTool(tool mcp.Tool, h server.ToolHandlerFunc) {
	if !s.exists("replace", tool.Name) {
		return
	}
	s.tools[tool.Name] = server.ServerTool{Tool: tool, Handler: h}
	s.by[tool.Name] = s.owner
}

// WrapTool replaces an existing tool's handler with wrap(original), keeping
// its schema. A tool that does not exist is logged as a warning and skipped.
func (s *Surface) WrapTool(name string, wrap func(next server.ToolHandlerFunc) server.ToolHandlerFunc) {
	if !s.exists("wrap", name) {
		return
	}
	st := s.tools[name]
	st.Handler = wrap(st.Handler)
	s.tools[name] = st
	s.by[name] = s.owner
}

func (s *Surface) exists(op, name string) bool {
	if _, ok := s.tools[name]; ok {
		return true
	}
	s.log.Warn("cannot "+op+" a tool that does not exist; skipped", "tool", name, "tools", slices.Sorted(maps.Keys(s.tools)))
	return false
}

// AddResource registers a resource template. Its URI template must parse and
// not be one already registered (core's among them).
func (s *Surface) AddResource(r Resource) error {
	if r.Template.URITemplate == nil || r.Template.URITemplate.Template == nil {
		return fmt.Errorf("add resource %q: no URI template", r.Template.Name)
	}
	if r.Read == nil {
		return fmt.Errorf("add resource %q: no Read", r.Template.URITemplate.Raw())
	}
	raw := r.Template.URITemplate.Raw()
	if slices.Contains(s.core, raw) || slices.ContainsFunc(s.res, func(have Resource) bool { return have.Template.URITemplate.Raw() == raw }) {
		return fmt.Errorf("add resource %q: %w", raw, ErrDuplicateResource)
	}
	s.res = append(s.res, r)
	return nil
}

// Owner returns who last added, replaced or wrapped the named tool.
func (s *Surface) Owner(name string) (string, bool) {
	o, ok := s.by[name]
	return o, ok
}

// Tools returns the tools sorted by name.
func (s *Surface) Tools() []server.ServerTool {
	out := make([]server.ServerTool, 0, len(s.tools))
	for _, name := range slices.Sorted(maps.Keys(s.tools)) {
		out = append(out, s.tools[name])
	}
	return out
}

// Resources returns the resource templates extensions added, in the order
// they were added.
func (s *Surface) Resources() []Resource { return slices.Clone(s.res) }

// Match returns the extension resource template uri matches.
func (s *Set) Match(uri string) (Resource, bool) {
	for _, r := range s.res {
		if r.Template.URITemplate.Regexp().MatchString(uri) {
			return r, true
		}
	}
	return Resource{}, false
}

// ChangedURIs returns the extension resource URIs a change set of the
// notebook at path, bound as name, changes.
func (s *Set) ChangedURIs(name, path string, ch ynotebook.Changes) []string {
	var out []string
	for _, r := range s.res {
		if r.Changed != nil {
			out = append(out, s.safeChanged(r, name, path, ch)...)
		}
	}
	return out
}

func (s *Set) safeChanged(r Resource, name, path string, ch ynotebook.Changes) (out []string) {
	defer func() {
		if rec := recover(); rec != nil {
			s.log.Error("extension resource Changed panicked; no URIs from it", "template", r.Template.URITemplate.Raw(), "panic", rec)
			out = nil
		}
	}()
	return r.Changed(name, path, ch)
}
