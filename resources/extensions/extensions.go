// Package extensions lets compiled-in packages add, replace or wrap MCP tools,
// serve resource templates of their own, declare capabilities and keep state
// up to date with the notebooks, without a fork. docs/EXTENSIONS.md is the guide.
//
// An extension registers a Factory by name in init(); being compiled in is all
// it takes: it is active unless the configuration says
// `extensions.<name>.enabled: false`. Extensions are built after the
// configuration is loaded and after the core tools exist, in sorted name order,
// so an extension that must run after another can be named to. Each gets a
// Host: its options, a logger naming it, the effective configuration (secrets
// masked), a read-only Library of the notebooks the server serves, and
// subscriptions to their change sets.
//
// Rules checked at start: the Manifest's APIVersion must be this package's
// APIVersion, or the extension is refused naming both; replacing or wrapping a
// tool that does not exist logs a warning and skips that step (an upstream
// rename must not stop startup); adding a tool or resource template that exists
// is an error; capability names must be namespaced and never shadow core's or
// another extension's.
package extensions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/registry"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/library"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
)

// APIVersion is the version of the extension API this build provides. An
// extension whose Manifest names another is refused at start.
const APIVersion = "v2"

// Sentinel errors.
var (
	ErrDuplicateTool     = errors.New("tool already registered (use Replace or Wrap)")
	ErrDuplicateResource = errors.New("resource template already registered")
	ErrIncompatible      = errors.New("incompatible extension API version")
	// ErrNotFound is what a Library or a resource handler wraps for a notebook,
	// name or resource that does not exist; it is library.ErrNotFound, which the
	// server's own reads wrap.
	ErrNotFound = library.ErrNotFound
	// ErrClosed is returned by Subscription.Next once the subscription is closed.
	ErrClosed = errors.New("subscription closed")
)

// Manifest describes an extension. APIVersion must equal the APIVersion of the
// sidecar it is compiled into.
type Manifest struct {
	Name        string // the registered name
	Version     string // the extension's own version
	APIVersion  string // the extension API it was written for: APIVersion when it was built
	Description string
}

// Capability is something the server can do, advertised in the server
// capabilities (experimental) and listed at capabilities://.
type Capability struct {
	Name        string `json:"name"` // namespaced, e.g. "myext.snapshots"
	Description string `json:"description"`
	Enabled     bool   `json:"enabled"`
	Source      string `json:"source"` // the extension's registered name, or "core"
}

var capabilityName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)+$`)

// Extension is one compiled-in extension. Embed Base to get a default for
// every method but Manifest.
type Extension interface {
	// Manifest names the extension and the API version it was written for.
	Manifest() Manifest
	// Register adds, replaces or wraps tools and adds resource templates.
	Register(s *Surface) error
	// Capabilities declares what the extension lets the server do.
	Capabilities() ([]Capability, error)
	// Start acquires resources and starts goroutines when the server starts;
	// ctx ends when the server stops.
	Start(ctx context.Context) error
	// Stop releases them when the server stops.
	Stop(ctx context.Context) error
}

// Base is the default of every Extension method but Manifest: nothing to
// register, declare, start or stop.
type Base struct{}

// Register registers nothing.
func (Base) Register(*Surface) error { return nil }

// Capabilities declares nothing.
func (Base) Capabilities() ([]Capability, error) { return nil, nil }

// Start does nothing.
func (Base) Start(context.Context) error { return nil }

// Stop does nothing.
func (Base) Stop(context.Context) error { return nil }

// Factory builds an extension with what the host gives it. It does no I/O.
type Factory func(h *Host) (Extension, error)

var factories = registry.New[Factory]("extension")

// Register makes an extension available by name. It panics on a duplicate name.
func Register(name string, f Factory) { factories.Register(name, f) }

// Names returns the registered extension names, sorted.
func Names() []string { return factories.Names() }

// Deps are what the server hands every extension (through its Host).
type Deps struct {
	Logger  *slog.Logger
	Library Library
	// Config is the effective configuration with secrets masked, as
	// `jupyter-mcp-sidecar config check` prints it; nil shows an empty one.
	Config any
	// Core are the server's own capabilities, which no extension may shadow.
	Core []Capability
}

// Set is the active extensions, in name order.
type Set struct {
	names []string
	exts  []Extension
	fan   *fanout
	caps  []Capability
	res   []Resource
	log   *slog.Logger
}

// Build builds every registered extension that configured does not disable
// (configured: name → options; `enabled: false` disables), in name order, and
// lets each register on s. A configured name that is not registered, a bad
// `enabled`, a factory error, an incompatible manifest or a registration
// error is returned naming the extension. A failing Capabilities costs only
// that extension's declarations, and is logged.
func Build(configured map[string]map[string]any, s *Surface, deps Deps) (*Set, error) {
	return build(factories, configured, s, deps)
}

func build(reg *registry.Registry[Factory], configured map[string]map[string]any, surf *Surface, deps Deps) (*Set, error) {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	for _, n := range slices.Sorted(maps.Keys(configured)) {
		if _, err := reg.Lookup(n); err != nil {
			return nil, err
		}
	}
	cfg, err := newConfigView(deps.Config)
	if err != nil {
		return nil, err
	}
	set := &Set{log: deps.Logger, fan: &fanout{}}
	taken := map[string]bool{}
	for _, c := range deps.Core {
		taken[c.Name] = true
	}
	for _, n := range reg.Names() {
		opts, on, err := enabled(configured[n])
		if err != nil {
			return nil, fmt.Errorf("extension %q: %w", n, err)
		}
		if !on {
			deps.Logger.Info("extension disabled by configuration", "extension", n)
			continue
		}
		f, _ := reg.Lookup(n)
		h := &Host{name: n, options: opts, log: deps.Logger.With("extension", n), lib: deps.Library, cfg: cfg, fan: set.fan}
		ext, err := safeBuild(f, h)
		if err != nil {
			return nil, fmt.Errorf("build extension %q: %w", n, err)
		}
		if err := checkManifest(n, ext); err != nil {
			return nil, err
		}
		surf.owner, surf.log = n, h.log
		err = safeRegister(ext, surf)
		surf.owner, surf.log = "core", deps.Logger
		if err != nil {
			return nil, fmt.Errorf("extension %q tools: %w", n, err)
		}
		set.names = append(set.names, n)
		set.exts = append(set.exts, ext)
		set.caps = append(set.caps, set.collect(n, ext, taken)...)
		m := ext.Manifest()
		h.log.Info("extension active", "version", m.Version, "api_version", m.APIVersion)
	}
	set.res = surf.Resources()
	return set, nil
}

// enabled splits the `enabled` option (true when absent) from the extension's own.
func enabled(configured map[string]any) (map[string]any, bool, error) {
	var o struct {
		Enabled *bool          `option:"enabled"`
		Rest    map[string]any `option:",remain"`
	}
	if err := option.Decode(configured, &o); err != nil {
		return nil, false, err
	}
	return o.Rest, o.Enabled == nil || *o.Enabled, nil
}

// checkManifest refuses an extension written for another API version.
func checkManifest(name string, ext Extension) error {
	m := ext.Manifest()
	if m.APIVersion != APIVersion {
		return fmt.Errorf("%w: extension %q (version %q) was written for extension API %q; this sidecar provides %q",
			ErrIncompatible, name, m.Version, m.APIVersion, APIVersion)
	}
	if m.Name != name {
		return fmt.Errorf("extension %q: its manifest names it %q", name, m.Name)
	}
	return nil
}

func safeBuild(f Factory, h *Host) (ext Extension, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	ext, err = f(h)
	if err == nil && ext == nil {
		err = errors.New("factory returned no extension")
	}
	return ext, err
}

func safeRegister(ext Extension, s *Surface) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return ext.Register(s)
}

// collect returns the valid declarations of ext and marks their names taken.
func (s *Set) collect(name string, ext Extension, taken map[string]bool) (out []Capability) {
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
		switch {
		case !capabilityName.MatchString(c.Name):
			s.log.Error("extension capability name is not namespaced; skipped", "extension", name, "capability", c.Name)
			continue
		case taken[c.Name]:
			s.log.Error("extension capability name is already declared; skipped", "extension", name, "capability", c.Name)
			continue
		}
		taken[c.Name] = true
		c.Source = name
		out = append(out, c)
	}
	return out
}

// Capabilities returns the capabilities the extensions declared, in extension
// name order.
func (s *Set) Capabilities() []Capability { return slices.Clone(s.caps) }

// Names returns the active extensions' names, sorted.
func (s *Set) Names() []string { return slices.Clone(s.names) }

// Resources returns the resource templates the extensions added.
func (s *Set) Resources() []Resource { return slices.Clone(s.res) }

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

// Stop stops the extensions in reverse name order, closes their
// subscriptions and joins their errors.
func (s *Set) Stop(ctx context.Context) error {
	var errs []error
	for i := len(s.exts) - 1; i >= 0; i-- {
		if err := s.exts[i].Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop extension %q: %w", s.names[i], err))
		}
	}
	s.fan.closeAll()
	return errors.Join(errs...)
}
