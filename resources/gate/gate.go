// Package gate decides, per URI template, whether a resource is served.
//
// A deployment that addresses notebooks by its own identifiers may withhold the
// built-in resources. Gates are registered by name in init() and chosen by the
// configuration. A gate that errors or panics serves: the failure direction is
// a server that answers, not one that silently answers nothing.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/registry"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
)

// Gate decides whether the resources of one URI template are served.
type Gate interface {
	// Serves reports whether resources of uriTemplate are served.
	Serves(ctx context.Context, uriTemplate string) (bool, error)
}

// Factory builds a gate from its configuration options.
type Factory func(options map[string]any) (Gate, error)

// ErrUnknown is wrapped by New for a name that was never registered.
var ErrUnknown = registry.ErrUnknown

// Default is the gate used when the configuration names none.
const Default = "all"

var factories = registry.New[Factory]("resource gate")

// Register makes a gate available by name. It panics on a duplicate name.
func Register(name string, f Factory) { factories.Register(name, f) }

// Names returns the registered gate names, sorted.
func Names() []string { return factories.Names() }

// New builds the gate registered as name ("" means Default).
func New(name string, options map[string]any) (Gate, error) {
	if name == "" {
		name = Default
	}
	f, err := factories.Lookup(name)
	if err != nil {
		return nil, err
	}
	g, err := f(options)
	if err != nil {
		return nil, fmt.Errorf("build resource gate %q: %w", name, err)
	}
	return g, nil
}

// Decide asks g about uriTemplate and serves on error or panic, logging why.
func Decide(ctx context.Context, g Gate, uriTemplate string, log *slog.Logger) (serve bool) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("resource gate panicked; serving", "template", uriTemplate, "panic", r)
			serve = true
		}
	}()
	ok, err := g.Serves(ctx, uriTemplate)
	if err != nil {
		log.Warn("resource gate failed; serving", "template", uriTemplate, "err", err)
		return true
	}
	return ok
}

func init() {
	Register(Default, func(raw map[string]any) (Gate, error) {
		if err := option.Decode(raw, &struct{}{}); err != nil {
			return nil, err
		}
		return all{}, nil
	})
	Register("withhold", newWithhold)
}

// all serves every resource.
type all struct{}

func (all) Serves(context.Context, string) (bool, error) { return true, nil }

// withhold serves everything except the templates listed in its "templates" option.
type withhold struct{ templates []string }

func newWithhold(raw map[string]any) (Gate, error) {
	var o struct {
		Templates *[]string `option:"templates"`
	}
	if err := option.Decode(raw, &o); err != nil {
		return nil, err
	}
	if o.Templates == nil {
		return nil, errors.New(`option "templates" (list of URI templates) is required`)
	}
	return withhold{templates: *o.Templates}, nil
}

func (w withhold) Serves(_ context.Context, tmpl string) (bool, error) {
	return !slices.Contains(w.templates, tmpl), nil
}
