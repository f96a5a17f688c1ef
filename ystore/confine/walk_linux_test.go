package confine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// FuzzWalk: whatever the path, a walk opens, with openat2 or by hand, only a directory
// beneath the base reached through directories alone: the path's lexical cleaning, no
// symbolic link on the way (the tree has links up, to the root, to a sibling, to a
// file, and a file where a directory is expected). Without "..", both walks agree.
func FuzzWalk(f *testing.F) {
	top := f.TempDir()
	base := filepath.Join(top, "base")
	for _, d := range []string{"base/a/b", "base/c", "outside"} {
		if err := os.MkdirAll(filepath.Join(top, d), 0o700); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "f"), nil, 0o600); err != nil {
		f.Fatal(err)
	}
	for link, target := range map[string]string{"a/up": "..", "a/out": "/", "a/sib": "../c", "a/file": "../f", "c/away": "../../outside", "self": "/proc/self/cwd"} {
		if err := os.Symlink(target, filepath.Join(base, link)); err != nil {
			f.Fatal(err)
		}
	}
	b, err := os.Open(base)
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	for _, s := range []string{".", "a", "a/b", "a/up", "a/up/c", "a/out", "a/sib", "a/file", "c/away", "self", "..", "a/../..", "./a//b/", "f", "f/x", "/a", "a/b/../../..", "a/../c", "c/../../base/a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		if len(rel) > 256 || !utf8.ValidString(rel) || strings.ContainsRune(rel, 0) {
			return
		}
		opened := map[string]string{}
		for _, how := range []string{"openat2", "by hand"} {
			if how == "by hand" {
				openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
			}
			d, _, _, err := walk(b, rel)
			openat2 = unix.Openat2
			if err != nil {
				continue
			}
			at, err := fdPath(d)
			_ = d.Close()
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(base, rel)
			if at != want || !throughDirs(base, at) {
				t.Fatalf("%s walk of %q opened %s, want %s through directories alone", how, rel, at, want)
			}
			opened[how] = at
		}
		if !strings.Contains(rel, "..") && opened["openat2"] != opened["by hand"] {
			t.Fatalf("walks of %q differ: %v", rel, opened)
		}
	})
}

// throughDirs reports whether path is base or beneath it with every component from base
// on a directory, not a symbolic link.
func throughDirs(base, path string) bool {
	rel, err := filepath.Rel(base, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return false
	}
	p := base
	for c := range strings.SplitSeq(rel, "/") {
		if c == "." {
			continue
		}
		p = filepath.Join(p, c)
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}
