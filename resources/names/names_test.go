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
	b, err := New(state, map[string]string{"cfg": "c.ipynb"})
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

	reloaded, err := New(state, map[string]string{"cfg": "c.ipynb"})
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
	b, err := New(state, map[string]string{"cfg": "c.ipynb"})
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
	if _, err := New("", map[string]string{"a b": "x.ipynb"}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("invalid configured name: %v", err)
	}
	if _, err := New("", map[string]string{"a": "/x.ipynb"}); !errors.Is(err, ErrInvalidPath) {
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

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a.ipynb", "../x", "a/../../b", "/abs", "a//b/./c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		clean, err := CleanPath(s)
		if err != nil {
			return
		}
		if strings.HasPrefix(clean, "/") || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(clean, "/../") {
			t.Fatalf("CleanPath(%q) = %q escapes the root", s, clean)
		}
		if again, err := CleanPath(clean); err != nil || again != clean {
			t.Fatalf("CleanPath not idempotent on %q: %q, %v", clean, again, err)
		}
	})
}
