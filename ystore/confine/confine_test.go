//go:build linux

package confine

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// homes makes /alice and /bob under a temporary directory, each with a notebook, and
// returns the two homes.
func homes(t *testing.T) (alice, bob string) {
	t.Helper()
	top := t.TempDir()
	alice, bob = filepath.Join(top, "alice"), filepath.Join(top, "bob")
	for _, d := range []string{alice, filepath.Join(alice, "data"), bob} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(alice, "data", "a.ipynb"), "alice's")
	write(t, filepath.Join(bob, "b.ipynb"), "bob's")
	return alice, bob
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// A path is resolved beneath the user's directory: symbolic links are followed while
// they stay inside it; one leading outside (relative or absolute), and a path with ".."
// leaving it, are refused with ErrEscapes by Stat, Open and Locate alike.
func TestResolvedBeneath(t *testing.T) {
	alice, bob := homes(t)
	symlink(t, "data/a.ipynb", filepath.Join(alice, "inside.ipynb"))
	symlink(t, "data", filepath.Join(alice, "dirlink"))
	symlink(t, "../bob/b.ipynb", filepath.Join(alice, "relative.ipynb"))
	symlink(t, filepath.Join(bob, "b.ipynb"), filepath.Join(alice, "absolute.ipynb"))
	symlink(t, "../bob", filepath.Join(alice, "bobdir"))
	d := Dir{Root: alice}
	for _, c := range []struct {
		name string
		want string // content; "" = refused as escaping
	}{
		{"data/a.ipynb", "alice's"},
		{"inside.ipynb", "alice's"},
		{"dirlink/a.ipynb", "alice's"},
		{"relative.ipynb", ""},
		{"absolute.ipynb", ""},
		{"bobdir/b.ipynb", ""},
		{"data/../../bob/b.ipynb", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(alice, c.name)
			if c.name == "data/../../bob/b.ipynb" {
				path = alice + "/" + c.name // unclean on purpose
			}
			_, serr := d.Stat(path)
			f, oerr := d.Open(path, os.O_RDONLY)
			l, lerr := d.Locate(path, -1)
			if c.want == "" {
				for what, err := range map[string]error{"Stat": serr, "Open": oerr, "Locate": lerr} {
					if !errors.Is(err, ErrEscapes) || !errors.Is(err, ErrRefused) {
						t.Errorf("%s = %v, want ErrEscapes", what, err)
					}
				}
				return
			}
			if serr != nil || oerr != nil || lerr != nil {
				t.Fatalf("Stat, Open, Locate = %v, %v, %v", serr, oerr, lerr)
			}
			defer f.Close()
			defer l.Close()
			b, _ := io.ReadAll(f)
			if string(b) != c.want {
				t.Errorf("read %q, want %q", b, c.want)
			}
			if l.Name != "a.ipynb" {
				t.Errorf("located name %q, want the file's own name a.ipynb", l.Name)
			}
			lf, err := os.Open(filepath.Join(fdDir(t, l.Dir), l.Name))
			if err != nil {
				t.Fatal(err)
			}
			defer lf.Close()
			if b, _ := io.ReadAll(lf); string(b) != c.want {
				t.Errorf("located file holds %q, want %q", b, c.want)
			}
		})
	}
}

// fdDir is a path to an open directory.
func fdDir(t *testing.T, f *os.File) string {
	t.Helper()
	p, err := fdPath(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// os.Root's refusal of an escape, whose error is not exported, is recognized.
func TestEscapeIsRecognized(t *testing.T) {
	_, err := Dir{Root: t.TempDir()}.Open("/nowhere/../"+filepath.Base(os.TempDir()), os.O_RDONLY)
	if !errors.Is(err, ErrEscapes) {
		t.Fatalf("lexical escape: %v, want ErrEscapes", err)
	}
	alice, _ := homes(t)
	symlink(t, "..", filepath.Join(alice, "up"))
	if _, err := (Dir{Root: alice}).Stat(filepath.Join(alice, "up", "bob")); !errors.Is(err, ErrEscapes) {
		t.Fatalf("escape through a link: %v, want ErrEscapes", err)
	}
}

// Locate refuses a file that is not the user's (the owner of Owner) and one that is not
// a regular file; a named pipe is not waited on.
func TestLocateOwner(t *testing.T) {
	alice, _ := homes(t)
	d := Dir{Root: alice, Owner: alice}
	uid, err := d.OwnerUID()
	if err != nil || uid != os.Getuid() {
		t.Fatalf("OwnerUID = %d, %v; want %d", uid, err, os.Getuid())
	}
	nb := filepath.Join(alice, "data", "a.ipynb")
	l, err := d.Locate(nb, uid)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	testenv.GiveAway(t, nb)
	if _, err := d.Locate(nb, uid); !errors.Is(err, ErrNotOwned) || !errors.Is(err, ErrRefused) {
		t.Fatalf("Locate of a stranger's file for uid %d = %v, want ErrNotOwned", uid, err)
	}
	if l, err := d.Locate(nb, -1); err != nil {
		t.Fatalf("Locate with no owner asked: %v", err)
	} else {
		l.Close()
	}
}
