// Package names binds notebook names to notebook paths and persists the bindings.
//
// A name is the single URI segment that addresses a notebook in the resources
// (notebook://{name}/...); a path is relative to the Jupyter root. Bindings come
// from the configuration (read-only) and from the use_notebook tool; the latter
// are persisted to a state file written atomically (temp file, fsync, rename).
package names

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Sentinel errors callers branch on.
var (
	ErrInvalidName = errors.New("invalid notebook name")
	ErrInvalidPath = errors.New("invalid notebook path")
	ErrUnknownName = errors.New("unknown notebook name")
	ErrConfigured  = errors.New("name is bound in the configuration")
)

// MaxNameLen is the longest accepted name.
const MaxNameLen = 128

// ValidateName reports whether name is a usable URI segment: 1 to MaxNameLen
// characters from [A-Za-z0-9._~-], not "." or "..".
func ValidateName(name string) error {
	if name == "" || len(name) > MaxNameLen || name == "." || name == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	for i := 0; i < len(name); i++ {
		if !isUnreserved(name[i]) {
			return fmt.Errorf("%w: %q: character %q is not allowed (use A-Z a-z 0-9 . _ ~ -)", ErrInvalidName, name, name[i])
		}
	}
	return nil
}

func isUnreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// CleanPath validates a notebook path relative to the Jupyter root and returns
// its clean form: no leading slash, no "..", no empty or control characters.
func CleanPath(p string) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return "", fmt.Errorf("%w: %q must be relative to the Jupyter root", ErrInvalidPath, p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("%w: %q contains a control character", ErrInvalidPath, p)
		}
	}
	clean := path.Clean(p)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %q escapes the Jupyter root", ErrInvalidPath, p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %q contains \"..\"", ErrInvalidPath, p)
		}
	}
	return clean, nil
}

// Binding is one name bound to one path.
type Binding struct {
	Name       string `json:"name"`
	Path       string `json:"path"`
	Configured bool   `json:"configured"`
}

// Bindings is the set of name → path bindings. It is safe for concurrent use.
type Bindings struct {
	stateFile string

	mu         sync.RWMutex
	configured map[string]string
	bound      map[string]string
}

// New validates the configured bindings; it does no I/O. An empty stateFile
// keeps tool bindings in memory only.
func New(stateFile string, configured map[string]string) (*Bindings, error) {
	b := &Bindings{stateFile: stateFile, configured: map[string]string{}, bound: map[string]string{}}
	for _, name := range slices.Sorted(maps.Keys(configured)) {
		if err := ValidateName(name); err != nil {
			return nil, fmt.Errorf("configured notebooks: %w", err)
		}
		clean, err := CleanPath(configured[name])
		if err != nil {
			return nil, fmt.Errorf("configured notebook %q: %w", name, err)
		}
		b.configured[name] = clean
	}
	return b, nil
}

// stateFormat is the JSON document of the state file.
type stateFormat struct {
	Version   int               `json:"version"`
	Notebooks map[string]string `json:"notebooks"`
}

// Load reads the tool bindings from the state file. A missing file is an empty
// set. Entries that no longer validate or clash with a configured name are
// dropped and returned as errors joined together, so a caller can log them.
func (b *Bindings) Load() error {
	if b.stateFile == "" {
		return nil
	}
	data, err := os.ReadFile(b.stateFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read state file: %w", err)
	}
	var st stateFormat
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("decode state file %s: %w", b.stateFile, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	b.bound = map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(st.Notebooks)) {
		clean, err := validBinding(name, st.Notebooks[name])
		if err == nil {
			if _, ok := b.configured[name]; ok {
				err = fmt.Errorf("%w: %q", ErrConfigured, name)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("state file %s: %w", b.stateFile, err))
			continue
		}
		b.bound[name] = clean
	}
	return errors.Join(errs...)
}

func validBinding(name, p string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return CleanPath(p)
}

// Bind binds name to path and persists the change. It reports whether
// anything changed. Configured names cannot be rebound.
func (b *Bindings) Bind(name, p string) (bool, error) {
	clean, err := validBinding(name, p)
	if err != nil {
		return false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.configured[name]; ok {
		return false, fmt.Errorf("%w: %q", ErrConfigured, name)
	}
	if old, ok := b.bound[name]; ok && old == clean {
		return false, nil
	}
	prev, had := b.bound[name]
	b.bound[name] = clean
	if err := b.saveLocked(); err != nil {
		if had {
			b.bound[name] = prev
		} else {
			delete(b.bound, name)
		}
		return false, err
	}
	return true, nil
}

// Unbind removes a tool binding and persists the change.
func (b *Bindings) Unbind(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.configured[name]; ok {
		return fmt.Errorf("%w: %q", ErrConfigured, name)
	}
	prev, ok := b.bound[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownName, name)
	}
	delete(b.bound, name)
	if err := b.saveLocked(); err != nil {
		b.bound[name] = prev
		return err
	}
	return nil
}

// Path returns the path bound to name.
func (b *Bindings) Path(name string) (string, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if p, ok := b.configured[name]; ok {
		return p, true
	}
	p, ok := b.bound[name]
	return p, ok
}

// NamesFor returns the names bound to path, sorted.
func (b *Bindings) NamesFor(p string) []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []string
	for _, m := range []map[string]string{b.configured, b.bound} {
		for name, bp := range m {
			if bp == p {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// All returns every binding sorted by name.
func (b *Bindings) All() []Binding {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]Binding, 0, len(b.configured)+len(b.bound))
	for name, p := range b.configured {
		out = append(out, Binding{Name: name, Path: p, Configured: true})
	}
	for name, p := range b.bound {
		out = append(out, Binding{Name: name, Path: p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// saveLocked writes the tool bindings atomically: a temp file in the same
// directory, fsync, rename over the state file, fsync of the directory.
func (b *Bindings) saveLocked() error {
	if b.stateFile == "" {
		return nil
	}
	data, err := json.MarshalIndent(stateFormat{Version: 1, Notebooks: b.bound}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	return WriteFileAtomic(b.stateFile, append(data, '\n'))
}

// WriteFileAtomic replaces file with data so that a reader sees either the old
// or the new content, never a partial one, even across a crash.
func WriteFileAtomic(file string, data []byte) error {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp state file: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write temp state file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync temp state file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close temp state file: %w", err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("rename state file: %w", err)
	}
	committed = true
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open state directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync state directory: %w", err)
	}
	return nil
}
