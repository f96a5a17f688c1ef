// Package extensions lets compiled-in packages add, replace or wrap MCP tools,
// declare capabilities and acquire resources on start and stop, without a fork.
//
// Extensions register by name in init(); the configuration enables them with
// options. They are applied after the configuration is loaded and after the
// core tools exist, in sorted name order, so an extension that must run after
// another can be named to. Replacing a tool is explicit (Replace), because the
// SDK silently overwrites a duplicate name: Add of an existing name is an error.
package extensions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/registry"
)

// Sentinel errors for tool registration.
var (
	ErrDuplicateTool = errors.New("tool already registered (use Replace or Wrap)")
	ErrNoSuchTool    = errors.New("no such tool")
)

// Capability is something the server can do, advertised in the server
// capabilities (experimental) and listed at capabilities://.
type Capability struct {
	Name        string `json:"name"` // namespaced, e.g. "myext.snapshots"
	Description string `json:"description"`
	Enabled     bool   `json:"enabled"`
	Source      string `json:"source"` // the extension's registered name, or "core"
}

var capabilityName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)+$`)

// Extension is one compiled-in extension.
type Extension interface {
	// RegisterTools adds, replaces or wraps tools.
	RegisterTools(t *Tools) error
	// Capabilities declares what the extension lets the server do.
	Capabilities() ([]Capability, error)
	// Start acquires resources when the server starts.
	Start(ctx context.Context) error
	// Stop releases them when the server stops.
	Stop(ctx context.Context) error
}

// Factory builds an extension from its options.
type Factory func(options map[string]any) (Extension, error)

var factories = registry.New[Factory]("extension")

// Register makes an extension available by name. It panics on a duplicate name.
func Register(name string, f Factory) { factories.Register(name, f) }

// Names returns the registered extension names, sorted.
func Names() []string { return factories.Names() }

// Tools is the tool set being assembled before it is handed to the SDK.
type Tools struct {
	owner string
	tools map[string]server.ServerTool
	by    map[string]string
}

// NewTools returns an empty tool set whose additions are owned by "core".
func NewTools() *Tools {
	return &Tools{owner: "core", tools: map[string]server.ServerTool{}, by: map[string]string{}}
}

// Add registers a new tool; a name already present is ErrDuplicateTool.
func (t *Tools) Add(tool mcp.Tool, h server.ToolHandlerFunc) error {
	if prev, ok := t.by[tool.Name]; ok {
		return fmt.Errorf("add %q: %w (owned by %s)", tool.Name, ErrDuplicateTool, prev)
	}
	t.tools[tool.Name] = server.ServerTool{Tool: tool, Handler: h}
	t.by[tool.Name] = t.owner
	return nil
}

// Replace swaps an existing tool for another of the same name.
func (t *Tools) Replace(tool mcp.Tool, h server.ToolHandlerFunc) error {
	if _, ok := t.tools[tool.Name]; !ok {
		return fmt.Errorf("replace %q: %w", tool.Name, ErrNoSuchTool)
	}
	t.tools[tool.Name] = server.ServerTool{Tool: tool, Handler: h}
	t.by[tool.Name] = t.owner
	return nil
}

// Wrap replaces an existing tool's handler with wrap(original), keeping its schema.
func (t *Tools) Wrap(name string, wrap func(next server.ToolHandlerFunc) server.ToolHandlerFunc) error {
	st, ok := t.tools[name]
	if !ok {
		return fmt.Errorf("wrap %q: %w", name, ErrNoSuchTool)
	}
	st.Handler = wrap(st.Handler)
	t.tools[name] = st
	t.by[name] = t.owner
	return nil
}

// Owner returns who last added, replaced or wrapped the named tool.
func (t *Tools) Owner(name string) (string, bool) {
	o, ok := t.by[name]
	return o, ok
}

// List returns the tools sorted by name.
func (t *Tools) List() []server.ServerTool {
	out := make([]server.ServerTool, 0, len(t.tools))
	for _, name := range slices.Sorted(maps.Keys(t.tools)) {
		out = append(out, t.tools[name])
	}
	return out
}

// Set is the enabled extensions, in name order.
type Set struct {
	names []string
	exts  []Extension
	caps  []Capability
	log   *slog.Logger
}

// Build builds the extensions named in enabled, in name order, and lets each
// register its tools on t. An unknown name, a factory error or a tool
// registration error is returned naming the extension. A failing Capabilities
// costs only that extension's declarations, and is logged.
func Build(enabled map[string]map[string]any, t *Tools, log *slog.Logger) (*Set, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Set{log: log}
	for _, n := range slices.Sorted(maps.Keys(enabled)) {
		f, err := factories.Lookup(n)
		if err != nil {
			return nil, err
		}
		ext, err := f(enabled[n])
		if err != nil {
			return nil, fmt.Errorf("build extension %q: %w", n, err)
		}
		t.owner = n
		err = safeRegister(ext, t)
		t.owner = "core"
		if err != nil {
			return nil, fmt.Errorf("extension %q tools: %w", n, err)
		}
		s.names = append(s.names, n)
		s.exts = append(s.exts, ext)
		s.caps = append(s.caps, s.collect(n, ext)...)
	}
	return s, nil
}

func safeRegister(ext Extension, t *Tools) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return ext.RegisterTools(t)
}

func (s *Set) collect(name string, ext Extension) (out []Capability) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("extension capabilities panicked; its declarations are skipped", "extension", name, "panic", r)
			out = nil
		}
	}()
	caps, err := ext.Capabilities()
	if err != nil {
		s.log.Error("extension capabilities failed; its declarations are skipped", "extension", name, "err", err)
		return nil
	}
	for _, c := range caps {
		if !capabilityName.MatchString(c.Name) {
			s.log.Error("extension capability name is not namespaced; skipped", "extension", name, "capability", c.Name)
			continue
		}
		c.Source = name
		out = append(out, c)
	}
	return out
}

// Capabilities returns the capabilities the extensions declared, in extension
// name order.
func (s *Set) Capabilities() []Capability { return slices.Clone(s.caps) }

// Start starts the extensions in name order. If one fails, those already
// started are stopped in reverse order and the error names the failing one.
func (s *Set) Start(ctx context.Context) error {
	for i, ext := range s.exts {
		if err := ext.Start(ctx); err != nil {
			for j := i - 1; j >= 0; j-- {
				if serr := s.exts[j].Stop(ctx); serr != nil {
					s.log.Error("extension stop failed", "extension", s.names[j], "err", serr)
				}
			}
			return fmt.Errorf("start extension %q: %w", s.names[i], err)
		}
	}
	return nil
}

// Stop stops the extensions in reverse name order and joins their errors.
func (s *Set) Stop(ctx context.Context) error {
	var errs []error
	for i := len(s.exts) - 1; i >= 0; i-- {
		if err := s.exts[i].Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop extension %q: %w", s.names[i], err))
		}
	}
	return errors.Join(errs...)
}
