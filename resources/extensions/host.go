package extensions

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// Library is the read-only view of the notebooks the server serves: in hub
// mode every user has a server of their own, so it holds the caller's
// notebooks only. Safe for concurrent use; snapshots are immutable and must
// not be modified.
type Library interface {
	// Notebooks returns the notebooks present in the store, sorted by path,
	// each with the names bound to it.
	Notebooks() []Notebook
	// Snapshot returns the current snapshot of the notebook at path, or an
	// error wrapping ErrNotFound.
	Snapshot(path string) (*ynotebook.Snapshot, error)
	// Resolve returns the path a name is bound to.
	Resolve(name string) (path string, ok bool)
}

// Notebook is one notebook of the Library.
type Notebook struct {
	Path  string   // relative to the Jupyter root
	Names []string // the names bound to it (notebook://{name}), sorted; none when unbound
}

// Host is what the server gives one extension: its options, a logger naming
// it, the effective configuration, the Library and change subscriptions.
// Safe for concurrent use.
type Host struct {
	name    string
	options map[string]any
	log     *slog.Logger
	lib     Library
	cfg     configView
	fan     *fanout
}

// Name returns the extension's registered name.
func (h *Host) Name() string { return h.name }

// Options returns the extension's options from the configuration
// (extensions.<name>), without `enabled`; a copy.
func (h *Host) Options() map[string]any { return deepCopy(h.options) }

// Logger returns a logger whose records carry extension=<name>.
func (h *Host) Logger() *slog.Logger { return h.log }

// Library returns the notebooks the server serves.
func (h *Host) Library() Library { return h.lib }

// Config returns the effective configuration, secrets masked, as YAML keys
// (server.listen, store.backend, …); a fresh copy on every call.
func (h *Host) Config() map[string]any { return h.cfg.get() }

// Subscribe returns a subscription to the notebooks' change sets, from now on.
func (h *Host) Subscribe() *Subscription { return h.fan.subscribe() }

// Change is what happened to one notebook since the subscription's last Next.
type Change struct {
	Path string
	// From is the notebook's previous path when it was renamed ("" otherwise);
	// state kept under From belongs to Path now.
	From    string
	Changes ynotebook.Changes // merged change sets; empty after a rename alone
}

// Subscription receives change sets. Delivering never blocks the server:
// changes wait in the subscription, merged per notebook, until Next takes them.
type Subscription struct {
	fan     *fanout
	mu      sync.Mutex
	pending []Change // one per path, in the order paths first changed
	closed  bool
	ready   chan struct{} // holds a token while pending is non-empty or closed
}

// Next waits until changes are pending and returns them all, one Change per
// notebook. It returns ctx's error when ctx ends first, and ErrClosed once
// the subscription or the server is closed.
func (s *Subscription) Next(ctx context.Context) ([]Change, error) {
	for {
		s.mu.Lock()
		if len(s.pending) > 0 {
			out := s.pending
			s.pending = nil
			s.mu.Unlock()
			return out, nil
		}
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		s.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close ends the subscription; Next returns ErrClosed.
func (s *Subscription) Close() {
	s.fan.remove(s)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

func (s *Subscription) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// add merges c into the pending changes.
func (s *Subscription) add(c Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if c.From != "" {
		// Changes queued under the old path move with the notebook.
		if i := slices.IndexFunc(s.pending, func(p Change) bool { return p.Path == c.From }); i >= 0 {
			c.Changes.Merge(s.pending[i].Changes)
			if s.pending[i].From != "" {
				c.From = s.pending[i].From
			}
			s.pending = slices.Delete(s.pending, i, i+1)
		}
	}
	if i := slices.IndexFunc(s.pending, func(p Change) bool { return p.Path == c.Path }); i >= 0 {
		s.pending[i].Changes.Merge(c.Changes)
		if c.From != "" {
			s.pending[i].From = c.From
		}
	} else {
		s.pending = append(s.pending, c)
	}
	s.signal()
}

// fanout delivers change sets to every subscription.
type fanout struct {
	mu   sync.Mutex
	subs []*Subscription
}

func (f *fanout) subscribe() *Subscription {
	s := &Subscription{fan: f, ready: make(chan struct{}, 1)}
	f.mu.Lock()
	f.subs = append(f.subs, s)
	f.mu.Unlock()
	return s
}

func (f *fanout) remove(s *Subscription) {
	f.mu.Lock()
	f.subs = slices.DeleteFunc(f.subs, func(o *Subscription) bool { return o == s })
	f.mu.Unlock()
}

func (f *fanout) publish(c Change) {
	f.mu.Lock()
	subs := slices.Clone(f.subs)
	f.mu.Unlock()
	for _, s := range subs {
		s.add(c)
	}
}

func (f *fanout) closeAll() {
	f.mu.Lock()
	subs := slices.Clone(f.subs)
	f.mu.Unlock()
	for _, s := range subs {
		s.Close()
	}
}

// NotebookChanged hands a change set of the notebook at path to every
// subscription. It never blocks.
func (s *Set) NotebookChanged(path string, ch ynotebook.Changes) {
	s.fan.publish(Change{Path: path, Changes: ch})
}

// NotebookMoved tells every subscription the notebook at from is now at to.
func (s *Set) NotebookMoved(from, to string) {
	s.fan.publish(Change{Path: to, From: from})
}

// configView holds the masked configuration as YAML, so that every Config
// call decodes a copy no extension can change for another.
type configView struct{ yaml []byte }

func newConfigView(cfg any) (configView, error) {
	if cfg == nil {
		return configView{}, nil
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return configView{}, fmt.Errorf("extensions: encode the configuration: %w", err)
	}
	return configView{yaml: b}, nil
}

func (c configView) get() map[string]any {
	out := map[string]any{}
	_ = yaml.Unmarshal(c.yaml, &out) // it was encoded from a value; it decodes
	return out
}

// deepCopy copies the maps and slices of configuration options.
func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	out := maps.Clone(m)
	for k, v := range out {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return deepCopy(t)
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = copyValue(e)
		}
		return c
	}
	return v
}
