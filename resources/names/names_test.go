package names

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"work", true},
		{"a.b_c-d~1", true},
		{strings.Repeat("x", MaxNameLen), true},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"a b", false},
		{"é", false},
		{"a%20", false},
		{strings.Repeat("x", MaxNameLen+1), false},
	}
	for _, tt := range tests {
		err := ValidateName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateName(%q) error %v does not wrap ErrInvalidName", tt.name, err)
		}
	}
}

func TestCleanPath(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"a.ipynb", "a.ipynb", true},
		{"dir/sub/a.ipynb", "dir/sub/a.ipynb", true},
		{"dir//a.ipynb", "dir/a.ipynb", true},
		{"./a.ipynb", "a.ipynb", true},
		{"", "", false},
		{"/etc/passwd", "", false},
		{"../a.ipynb", "", false},
		{"dir/../../a.ipynb", "", false},
		{"dir/../a.ipynb", "", false},
		{"..", "", false},
		{".", "", false},
		{"a\x00b", "", false},
		{"a\\b", "", false},
		{"a.ipynb/.", "a.ipynb", true},
		{"notes.txt", "", false},
		{"/etc/passwd", "", false},
		{"dir/.ipynb", "", false},
		{"a.ipynb\x00", "", false},
		{"dir/", "", false},
	}
	for _, tt := range tests {
		got, err := CleanPath(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidPath) {
			t.Errorf("CleanPath(%q) error %v does not wrap ErrInvalidPath", tt.in, err)
		}
	}
}

func TestBindingsPersistAndReload(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sub", "state.json")
	b, err := New(state, map[string]string{"cfg": "c.ipynb"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Load(); err != nil {
		t.Fatalf("Load without a file: %v", err)
	}
	if changed, err := b.Bind("work", "dir/w.ipynb"); err != nil || !changed {
		t.Fatalf("Bind = %v, %v", changed, err)
	}
	if changed, err := b.Bind("work", "dir/w.ipynb"); err != nil || changed {
		t.Fatalf("rebinding the same path = %v, %v; want unchanged", changed, err)
	}
	if _, err := b.Bind("other", "o.ipynb"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Bind("cfg", "x.ipynb"); !errors.Is(err, ErrConfigured) {
		t.Fatalf("rebinding a configured name: %v", err)
	}
	if err := b.Unbind("other"); err != nil {
		t.Fatal(err)
	}
	if err := b.Unbind("other"); !errors.Is(err, ErrUnknownName) {
		t.Fatalf("unbinding twice: %v", err)
	}
	if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(state), ".state.json.tmp-*")); len(matches) != 0 {
		t.Fatalf("temp files left behind: %v", matches)
	}

	reloaded, err := New(state, map[string]string{"cfg": "c.ipynb"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := reloaded.Load(); err != nil {
		t.Fatal(err)
	}
	got := reloaded.All()
	want := []Binding{{Name: "cfg", Path: "c.ipynb", Configured: true}, {Name: "work", Path: "dir/w.ipynb"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("All after reload = %+v, want %+v", got, want)
	}
	if names := reloaded.NamesFor("dir/w.ipynb"); len(names) != 1 || names[0] != "work" {
		t.Fatalf("NamesFor = %v", names)
	}
}

func TestLoadDropsInvalidEntries(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	doc := `{"version":1,"notebooks":{"ok":"a.ipynb","bad/name":"b.ipynb","esc":"../c.ipynb","cfg":"d.ipynb"}}`
	if err := os.WriteFile(state, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := New(state, map[string]string{"cfg": "c.ipynb"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Load()
	if !errors.Is(err, ErrInvalidName) || !errors.Is(err, ErrInvalidPath) || !errors.Is(err, ErrConfigured) {
		t.Fatalf("Load error = %v; want invalid name, invalid path and configured", err)
	}
	if p, ok := b.Path("ok"); !ok || p != "a.ipynb" {
		t.Fatalf("valid entry lost: %q %v", p, ok)
	}
	if p, _ := b.Path("cfg"); p != "c.ipynb" {
		t.Fatalf("configured binding overridden by state file: %q", p)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	if _, err := New("", map[string]string{"a b": "x.ipynb"}, Limits{}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("invalid configured name: %v", err)
	}
	if _, err := New("", map[string]string{"a": "/x.ipynb"}, Limits{}); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("invalid configured path: %v", err)
	}
}

func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"work", "", "..", "a/b", "a%2F", "~x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateName(s) != nil {
			return
		}
		for i := 0; i < len(s); i++ {
			if !isUnreserved(s[i]) {
				t.Fatalf("accepted %q with reserved byte %q", s, s[i])
			}
		}
	})
}

func TestNormalizePath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"a.ipynb", "a.ipynb"},
		{"dir//sub/./a.ipynb", "dir/sub/a.ipynb"},
		{"/abs/a.ipynb", "abs/a.ipynb"},
		{"../a.ipynb", "a.ipynb"},
		{"dir/../../a.ipynb", "a.ipynb"},
		{"notes.txt", "notes.txt"},
		{".", ""},
		{"/", ""},
	}
	for _, tt := range tests {
		if got := NormalizePath(tt.in); got != tt.want {
			t.Errorf("NormalizePath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRootedPath(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"", "", true},
		{"a.ipynb", "a.ipynb", true},
		{"dir//sub/./a.ipynb", "dir/sub/a.ipynb", true},
		{"/abs/a.ipynb", "abs/a.ipynb", true},
		{"dir/../a.ipynb", "a.ipynb", true},
		{".", "", true},
		{"/", "", true},
		{"../a.ipynb", "", false},
		{"/../a.ipynb", "", false},
		{"dir/../../a.ipynb", "", false},
		{"..", "", false},
	}
	for _, tt := range tests {
		got, ok := RootedPath(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RootedPath(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
		if ok && got != NormalizePath(tt.in) {
			t.Errorf("RootedPath(%q) = %q, NormalizePath %q", tt.in, got, NormalizePath(tt.in))
		}
	}
}

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a.ipynb", "../x", "a/../../b", "/abs", "a//b/./c.ipynb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// RootedPath refuses exactly the paths that climb out of the root and otherwise
		// agrees with NormalizePath
		rooted, ok := RootedPath(s)
		depth, stays := 0, true // walked segment by segment, the path never goes above the root
		for seg := range strings.SplitSeq(strings.TrimLeft(s, "/"), "/") {
			switch seg {
			case "", ".":
			case "..":
				depth--
				stays = stays && depth >= 0
			default:
				depth++
			}
		}
		if ok != stays || ok && rooted != NormalizePath(s) {
			t.Fatalf("RootedPath(%q) = %q, %v; NormalizePath %q", s, rooted, ok, NormalizePath(s))
		}
		clean, err := CleanPath(s)
		if err != nil {
			return
		}
		if strings.HasPrefix(clean, "/") || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(clean, "/../") {
			t.Fatalf("CleanPath(%q) = %q escapes the root", s, clean)
		}
		if !strings.HasSuffix(clean, NotebookExt) {
			t.Fatalf("CleanPath(%q) = %q is not a notebook path", s, clean)
		}
		if again, err := CleanPath(clean); err != nil || again != clean {
			t.Fatalf("CleanPath not idempotent on %q: %q, %v", clean, again, err)
		}
	})
}

func TestBindLimits(t *testing.T) {
	b, err := New("", nil, Limits{MaxNames: 2, MaxPathBytes: 32})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       error // nil: bound
	}{
		{"a", "a.ipynb", nil},
		{"b", strings.Repeat("x", 26) + ".ipynb", nil}, // 32 bytes
		{"a", "again.ipynb", nil},                      // rebinding a bound name is not a new name
		{"c", "c.ipynb", ErrLimit},                     // a third name
		{"b", strings.Repeat("x", 27) + ".ipynb", ErrLimit},
		{"b", strings.Repeat("x", 1<<20), ErrLimit},
		{"b", "notes.txt", ErrInvalidPath},
	}
	for _, tt := range tests {
		_, err := b.Bind(tt.name, tt.path)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("Bind(%q, %.40q) = %v, want %v", tt.name, tt.path, err, tt.want)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("Bind(%q, …) error is %d bytes long", tt.name, len(err.Error()))
		}
	}
	if err := b.Unbind("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Bind("c", "c.ipynb"); err != nil {
		t.Fatalf("after an unbind a new name fits: %v", err)
	}
}

func TestCorruptStateFileIsMovedAside(t *testing.T) {
	for name, content := range map[string]string{"garbage": "{not json", "truncated": `{"version":1,"notebooks":{"a":"a.ipy`} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state.json")
			if err := os.WriteFile(state, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			b, err := New(state, nil, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			err = b.Load()
			if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrStateFile) {
				t.Fatalf("Load = %v, want ErrCorrupt", err)
			}
			aside, _ := filepath.Glob(state + ".corrupt-*")
			if len(aside) != 1 || !strings.Contains(err.Error(), aside[0]) {
				t.Fatalf("moved aside to %v; error %v", aside, err)
			}
			if got, _ := os.ReadFile(aside[0]); string(got) != content {
				t.Fatalf("moved-aside content = %q, want %q", got, content)
			}
			if _, err := b.Bind("new", "n.ipynb"); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(aside[0]); string(got) != content {
				t.Fatal("a save overwrote the moved-aside file")
			}
		})
	}
}

func TestUnusableStateFile(t *testing.T) {
	dir := t.TempDir()
	readOnly := filepath.Join(dir, "ro")
	if err := os.Mkdir(readOnly, 0o500); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"a directory": dir, "a device": "/dev/full"}
	if os.Geteuid() != 0 { // root writes anywhere
		files["in a read-only directory"] = filepath.Join(readOnly, "state.json")
	}
	for what, file := range files {
		b, err := New(file, nil, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Load(); !errors.Is(err, ErrStateFile) {
			t.Errorf("Load of a state file that is %s = %v, want ErrStateFile", what, err)
		}
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Fatalf("/dev/full: %v", err)
	}
}

func TestSaveErrorNamesNoPath(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	b, err := New(state, nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(state, 0o700); err != nil { // the rename over it fails
		t.Fatal(err)
	}
	_, err = b.Bind("a", "a.ipynb")
	var se *SaveError
	if !errors.As(err, &se) {
		t.Fatalf("Bind = %v, want a *SaveError", err)
	}
	if strings.Contains(err.Error(), dir) {
		t.Fatalf("error sent to clients names a server path: %v", err)
	}
	if !strings.Contains(errors.Unwrap(err).Error(), dir) {
		t.Fatalf("the cause lost its path: %v", errors.Unwrap(err))
	}
}
