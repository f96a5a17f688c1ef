// Package names binds notebook names to notebook paths and persists the bindings.
//
// A name is the single URI segment that addresses a notebook in the resources
// (notebook://{name}/...); a path is a notebook path relative to the Jupyter
// root. Bindings come from the configuration (read-only) and from the
// use_notebook tool; the latter are bounded (Limits) and persisted to a state
// file written atomically (temp file, fsync, rename). A state file that cannot
// be decoded is moved aside, never overwritten; one that cannot be written
// stops Load.
package names

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Sentinel errors callers branch on.
var (
	ErrInvalidName  = errors.New("invalid notebook name")
	ErrInvalidPath  = errors.New("invalid notebook path")
	ErrUnknownName  = errors.New("unknown notebook name")
	ErrConfigured   = errors.New("name is bound in the configuration")
	ErrLimit        = errors.New("binding limit reached")
	ErrTooManyNames = fmt.Errorf("%w: too many names", ErrLimit)
	ErrPathTooLong  = fmt.Errorf("%w: path too long", ErrLimit)
	ErrStateFile    = errors.New("state file is not usable")
	ErrCorrupt      = errors.New("state file could not be read; moved aside")
)

// NotebookExt ends every notebook path.
const NotebookExt = ".ipynb"

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

// NormalizePath returns p as a clean path relative to the Jupyter root, refusing
// nothing: a leading slash is dropped, ".." stops at the root, "" stays "". It is for
// looking up paths already taken in; RootedPath is for paths the store reports (file
// ids, a document's state.path), CleanPath for paths a user gives.
func NormalizePath(p string) string {
	if p == "" {
		return ""
	}
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// RootedPath is NormalizePath for a path the store reports, refusing (false) one that
// climbs out of the Jupyter root ("../x", "a/../../x"): clamped at the root, it would
// name another notebook inside it (red team of issue 42, pass 20, R4).
func RootedPath(p string) (string, bool) {
	switch c := path.Clean(strings.TrimLeft(p, "/")); {
	case p == "" || c == ".":
		return "", true
	case c == ".." || strings.HasPrefix(c, "../"):
		return "", false
	default:
		return c, true
	}
}

// CleanPath validates a notebook path relative to the Jupyter root and returns
// its clean form (NormalizePath's): no leading slash, no "..", no empty or control
// characters, ending in NotebookExt.
func CleanPath(p string) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return "", fmt.Errorf("%w: %q must be relative to the Jupyter root", ErrInvalidPath, p)
	}

	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("%w: %q contains a control character", ErrInvalidPath, p)
		}
	}
	if clean := path.Clean(p); clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %q escapes the Jupyter root", ErrInvalidPath, p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %q contains \"..\"", ErrInvalidPath, p)
		}
	}
	clean := NormalizePath(p)
	if base := path.Base(clean); len(base) <= len(NotebookExt) || !strings.HasSuffix(base, NotebookExt) {
		return "", fmt.Errorf("%w: %q is not a notebook (want a path ending in %s)", ErrInvalidPath, p, NotebookExt)
	}
	return clean, nil
}

// Binding is one name bound to one path.
type Binding struct {
	Name       string `json:"name"`
	Path       string `json:"path"`
	Configured bool   `json:"configured"`
}

// Limits bound the tool bindings; a zero field is no limit.
type Limits struct {
	MaxNames     int // names bound with Bind at most
	MaxPathBytes int // longest path Bind accepts
}

// Bindings is the set of name → path bindings. It is safe for concurrent use.
type Bindings struct {
	stateFile string
	limits    Limits

	mu         sync.RWMutex
	configured map[string]string
	bound      map[string]string
}

// New validates the configured bindings; it does no I/O. An empty stateFile
// keeps tool bindings in memory only.
func New(stateFile string, configured map[string]string, limits Limits) (*Bindings, error) {
	b := &Bindings{stateFile: stateFile, limits: limits, configured: map[string]string{}, bound: map[string]string{}}
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

// Load checks that the state file can be written (else an error wrapping
// ErrStateFile: a regular file or none, in a directory where a file can be
// created and synced) and reads the tool bindings from it. A missing file is an
// empty set. A file that cannot be read or decoded is renamed to
// <file>.corrupt-<time> and reported with ErrCorrupt; the bindings start empty.
// Entries that no longer validate, exceed the limits or clash with a
// configured name are dropped and returned as errors joined together, so a
// caller can log them.
func (b *Bindings) Load() error {
	if b.stateFile == "" {
		return nil
	}
	if err := Probe(b.stateFile); err != nil {
		return err
	}
	data, err := os.ReadFile(b.stateFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var st stateFormat
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	if err != nil {
		return b.moveAside(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	b.bound = map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(st.Notebooks)) {
		clean, err := b.admit(name, st.Notebooks[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("state file %s: %w", b.stateFile, err))
			continue
		}
		b.bound[name] = clean
	}
	return errors.Join(errs...)
}

// Probe returns an error wrapping ErrStateFile unless file is a regular file or
// none, and a file can be created, written and synced beside it (what a save does;
// its directory is created when missing).
func Probe(file string) error {
	if err := probe(file); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrStateFile, file, err)
	}
	return nil
}

func probe(file string) error {
	if st, err := os.Stat(file); err == nil && !st.Mode().IsRegular() {
		return errors.New("not a regular file")
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp, err := writeTemp(file, []byte("{}\n"))
	if err != nil {
		return err
	}
	return os.Remove(tmp)
}

// moveAside renames the state file that could not be read or decoded (cause)
// so that no later save overwrites the bindings it may still hold.
func (b *Bindings) moveAside(cause error) error {
	aside := b.stateFile + ".corrupt-" + time.Now().UTC().Format("20060102T150405Z")
	if err := os.Rename(b.stateFile, aside); err != nil {
		return fmt.Errorf("%w: %s cannot be read (%w) nor moved aside: %w", ErrStateFile, b.stateFile, cause, err)
	}
	return fmt.Errorf("%w to %s: %w; bindings made with use_notebook start empty", ErrCorrupt, aside, cause)
}

// admit validates a tool binding of name to p against the limits and the
// configured names, and returns the clean path. The caller holds b.mu.
func (b *Bindings) admit(name, p string) (string, error) {
	if max := b.limits.MaxPathBytes; max > 0 && len(p) > max {
		return "", fmt.Errorf("%w: it is %d bytes long, the limit is %d", ErrPathTooLong, len(p), max)
	}
	clean, err := validBinding(name, p)
	if err != nil {
		return "", err
	}
	if _, ok := b.configured[name]; ok {
		return "", fmt.Errorf("%w: %q", ErrConfigured, name)
	}
	if _, ok := b.bound[name]; !ok && b.limits.MaxNames > 0 && len(b.bound) >= b.limits.MaxNames {
		return "", fmt.Errorf("%w: %d are bound, the limit is %d; unbind one with unuse_notebook first", ErrTooManyNames, len(b.bound), b.limits.MaxNames)
	}
	return clean, nil
}

func validBinding(name, p string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return CleanPath(p)
}

// Bind binds name to path and persists the change. It reports whether
// anything changed. Configured names cannot be rebound; a binding beyond the
// limits is refused with ErrLimit; a failed save is a *SaveError.
func (b *Bindings) Bind(name, p string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	clean, err := b.admit(name, p)
	if err != nil {
		return false, err
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
	if err == nil {
		err = WriteFileAtomic(b.stateFile, append(data, '\n'))
	}
	if err != nil {
		return &SaveError{Err: err}
	}
	return nil
}

// SaveError is a failed save of the bindings. Its message, sent to clients,
// names no server path; the cause it wraps does, for the operator's log.
type SaveError struct{ Err error }

// Error returns the cause without the paths it names.
func (e *SaveError) Error() string {
	reason := "state file error"
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(e.Err, &pe):
		reason = pe.Err.Error()
	case errors.As(e.Err, &le):
		reason = le.Err.Error()
	}
	return "the binding could not be saved: " + reason
}

// Unwrap returns the cause.
func (e *SaveError) Unwrap() error { return e.Err }

// WriteFileAtomic replaces file with data so that a reader sees either the old
// or the new content, never a partial one, even across a crash.
func WriteFileAtomic(file string, data []byte) error {
	tmp, err := writeTemp(file, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, file); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("rename state file: %w", err)
	}
	d, err := os.Open(filepath.Dir(file))
	if err != nil {
		return fmt.Errorf("open state directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync state directory: %w", err)
	}
	return nil
}

// writeTemp writes data to a new temp file beside file, synced and closed, and
// returns its name; on error nothing is left behind.
func writeTemp(file string, data []byte) (string, error) {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create state directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("create temp state file: %w", err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("write temp state file: %w", err)
	}
	return tmp.Name(), nil
}
