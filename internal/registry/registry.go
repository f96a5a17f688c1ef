// Package registry is the name → factory table behind the resources seams
// (publishers, gates, verifiers, extensions, hooks): registration in init(),
// a panic on a duplicate name, lookups that name what is registered, and
// sorted walks.
package registry

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// ErrUnknown is wrapped by Lookup for a name never registered.
var ErrUnknown = errors.New("unknown")

// Registry maps names to factories of type F.
type Registry[F any] struct {
	kind string
	mu   sync.RWMutex
	m    map[string]F
}

// New returns an empty registry of the given kind ("publisher", …).
func New[F any](kind string) *Registry[F] {
	return &Registry[F]{kind: kind, m: map[string]F{}}
}

// Register adds f as name. It panics on a duplicate name.
func (r *Registry[F]) Register(name string, f F) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[name]; dup {
		panic(fmt.Sprintf("%s %q registered twice", r.kind, name))
	}
	r.m[name] = f
}

// Names returns the registered names, sorted.
func (r *Registry[F]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.m))
}

// Lookup returns the factory registered as name, or an error wrapping
// ErrUnknown that lists the registered names.
func (r *Registry[F]) Lookup(name string) (F, error) {
	r.mu.RLock()
	f, ok := r.m[name]
	r.mu.RUnlock()
	if !ok {
		return f, fmt.Errorf("%w %s %q (registered: %v)", ErrUnknown, r.kind, name, r.Names())
	}
	return f, nil
}
