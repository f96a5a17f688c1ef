package ystore

import (
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options are the settings common to every backend, for building a Tailer by name.
type Options struct {
	// Source locates the store: a SQLite file path or a Postgres DSN.
	Source string
	// PollInterval is the polling fallback period; zero means the backend default.
	PollInterval time.Duration
	// Logger receives the backend's logs; nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the backend's metrics; nil means none are registered.
	Registerer prometheus.Registerer
	// Params are backend-specific settings, each documented by its backend
	// ("fsnotify" for sqlite; "schema", "table", "channel" for postgres).
	Params map[string]string
}

// Factory builds a Tailer from Options without doing I/O.
type Factory func(Options) (Tailer, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes a backend available by name; it panics on a duplicate name or nil factory.
func Register(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if f == nil {
		panic("ystore: Register of nil factory for " + name)
	}
	if _, dup := registry[name]; dup {
		panic("ystore: Register called twice for " + name)
	}
	registry[name] = f
}

// Backends lists the registered backend names in sorted order.
func Backends() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Open builds a Tailer with the named backend.
func Open(name string, o Options) (Tailer, error) {
	registryMu.RLock()
	f, ok := registry[name]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("open %q (have %v): %w", name, Backends(), ErrUnknownBackend)
	}
	t, err := f(o)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", name, err)
	}
	return t, nil
}
