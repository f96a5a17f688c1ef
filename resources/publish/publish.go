// Package publish is where change events go: the event type and the publisher
// registry.
//
// Every debounced change of a notebook in the store becomes an Event (path, file
// id, room, commit time, what changed, and the URIs under every name bound in
// the sidecar). The default publisher, "subscribers", is this server's own MCP
// subscribers (the resources package hands them in as Deps.Local): it tells them
// the event's URIs and ignores events without any. Others register by name: the
// daemon ships "webhook", "pgnotify" and "sse" (sidecar/builtin/publishers), for
// deployments where subscribers live elsewhere. A configured publisher replaces
// the default rather than adding to it.
package publish

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/registry"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
)

// Publisher delivers change events.
type Publisher interface {
	// Publish hands over one event. It must not block on I/O; an error means
	// the event was not accepted (for example a full queue).
	Publish(ctx context.Context, ev Event) error
	// Run owns the publisher's goroutines and connections until ctx is done.
	Run(ctx context.Context) error
	// Health is nil while the publisher delivers, and the last delivery error
	// while every attempt since its last success has failed: nobody is being
	// told (the sidecar's /readyz reports it).
	Health() error
}

// Subscribers are this server's own MCP subscribers, told the URIs of changed
// resources.
type Subscribers interface {
	// Publish tells every subscriber of any of uris that they changed, their notebook
	// now at version ("" for none); it never blocks.
	Publish(ctx context.Context, uris []string, version string) error
	// Run owns the subscribers' goroutines until ctx is done.
	Run(ctx context.Context) error
}

// Deps are what the server hands a publisher factory.
type Deps struct {
	Local      Subscribers // this server's own subscribers
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: register no collectors
}

// Factory builds a publisher from its options.
type Factory func(options map[string]any, deps Deps) (Publisher, error)

// Default is the publisher used when the configuration names none.
const Default = "subscribers"

var factories = registry.New[Factory]("publisher")

// Register makes a publisher available by name. It panics on a duplicate name.
func Register(name string, f Factory) { factories.Register(name, f) }

// Names returns the registered publisher names, sorted.
func Names() []string { return factories.Names() }

// New builds the publisher registered as name ("" means Default).
func New(name string, options map[string]any, deps Deps) (Publisher, error) {
	name = cmp.Or(name, Default)
	deps.Logger = cmp.Or(deps.Logger, slog.Default())
	f, err := factories.Lookup(name)
	if err != nil {
		return nil, err
	}
	p, err := f(options, deps)
	if err != nil {
		return nil, fmt.Errorf("build publisher %q: %w", name, err)
	}
	return p, nil
}

func init() {
	Register(Default, func(raw map[string]any, deps Deps) (Publisher, error) {
		if err := option.Decode(raw, &struct{}{}); err != nil {
			return nil, err
		}
		if deps.Local == nil {
			return nil, errors.New("no local subscribers to publish to")
		}
		return subscribers{deps.Local}, nil
	})
}

// subscribers is the default publisher: the server's own subscribers hear the
// URIs under bound names; an event without any concerns none of them.
type subscribers struct{ local Subscribers }

func (s subscribers) Publish(ctx context.Context, ev Event) error {
	if len(ev.URIs) == 0 {
		return nil
	}
	return s.local.Publish(ctx, ev.URIs, ev.Version)
}

func (s subscribers) Run(ctx context.Context) error { return s.local.Run(ctx) }

// Health is nil: the server's own subscribers are told in memory; a session
// that cannot take notifications is ended on its own.
func (subscribers) Health() error { return nil }
