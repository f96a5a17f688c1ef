//go:build linux

package confine

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

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

// dirOf is the Dir of the home dir, beneath the directory above it, owner of itself.
func dirOf(t *testing.T, home string) *Dir {
	t.Helper()
	d := New(Config{Base: filepath.Dir(home), Root: home})
	t.Cleanup(func() { _ = d.Close() })
	return d
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

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// read opens path in d as a user's file and returns its content; "" if refused.
func read(d *Dir, path string) (string, error) {
	f, _, err := d.OpenFile(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}

// byHand runs the test twice: with openat2, and walking by hand as where the kernel
// has no openat2 (ENOSYS).
func byHand(t *testing.T, test func(t *testing.T)) {
	t.Run("openat2", test)
	t.Run("by hand", func(t *testing.T) {
		openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
		defer func() { openat2 = unix.Openat2 }()
		test(t)
	})
}

// A path is resolved beneath the user's directory: symbolic links are followed while
// they stay inside it; one leading outside (relative or absolute), and a path with ".."
// leaving it, are refused with ErrEscapes by Stat, OpenFile and Locate alike.
func TestResolvedBeneath(t *testing.T) {
	alice, bob := homes(t)
	symlink(t, "data/a.ipynb", filepath.Join(alice, "inside.ipynb"))
	symlink(t, "data", filepath.Join(alice, "dirlink"))
	symlink(t, "../bob/b.ipynb", filepath.Join(alice, "relative.ipynb"))
	symlink(t, filepath.Join(bob, "b.ipynb"), filepath.Join(alice, "absolute.ipynb"))
	symlink(t, "../bob", filepath.Join(alice, "bobdir"))
	d := dirOf(t, alice)
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
			got, oerr := read(d, path)
			l, lerr := d.Locate(path)
			if c.want == "" {
				for what, err := range map[string]error{"Stat": serr, "OpenFile": oerr, "Locate": lerr} {
					if !errors.Is(err, ErrEscapes) || !errors.Is(err, ErrRefused) {
						t.Errorf("%s = %v, want ErrEscapes", what, err)
					}
				}
				return
			}
			if serr != nil || oerr != nil || lerr != nil {
				t.Fatalf("Stat, OpenFile, Locate = %v, %v, %v", serr, oerr, lerr)
			}
			defer l.Close()
			if got != c.want {
				t.Errorf("read %q, want %q", got, c.want)
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
	alice, _ := homes(t)
	if _, err := dirOf(t, alice).Stat("/nowhere/../" + filepath.Base(os.TempDir())); !errors.Is(err, ErrEscapes) {
		t.Fatalf("lexical escape: %v, want ErrEscapes", err)
	}
	symlink(t, "..", filepath.Join(alice, "up"))
	if _, err := dirOf(t, alice).Stat(filepath.Join(alice, "up", "bob")); !errors.Is(err, ErrEscapes) {
		t.Fatalf("escape through a link: %v, want ErrEscapes", err)
	}
}

// Locate refuses a file that is not the user's (the owner of the Dir's directory) and
// one that is not a regular file; a named pipe is not waited on.
func TestLocateOwner(t *testing.T) {
	alice, _ := homes(t)
	d := dirOf(t, alice)
	uid, err := d.OwnerUID()
	if err != nil || uid != os.Getuid() {
		t.Fatalf("OwnerUID = %d, %v; want %d", uid, err, os.Getuid())
	}
	nb := filepath.Join(alice, "data", "a.ipynb")
	l, err := d.Locate(nb)
	if err != nil {
		t.Fatal(err)
	}
	if l.UID != uid {
		t.Errorf("located for uid %d, want %d", l.UID, uid)
	}
	l.Close()
	testenv.GiveAway(t, nb)
	if _, err := d.Locate(nb); !errors.Is(err, ErrNotOwned) || !errors.Is(err, ErrRefused) {
		t.Fatalf("Locate of a stranger's file for uid %d = %v, want ErrNotOwned", uid, err)
	}
	if _, err := read(d, nb); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("OpenFile of a stranger's file = %v, want ErrNotOwned", err)
	}
}

// The user's directory is opened from a base no user can write, with no symbolic link
// on the way: a home that is a link at the first use (to bob's home, or even to a
// directory of her own), a link higher up, a path leaving the base, and a base that
// others may write are refused; every use after is refused alike.
func TestRootOpenedFromBase(t *testing.T) {
	byHand(t, func(t *testing.T) {
		alice, bob := homes(t)
		top := filepath.Dir(alice)
		symlink(t, "bob", filepath.Join(top, "mallory"))
		symlink(t, "alice", filepath.Join(top, "alias"))
		if err := os.Mkdir(filepath.Join(top, "open"), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(top, "open"), 0o777); err != nil { // past the umask
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(top, "open", "eve"), 0o700); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(top, "open", "eve", "e.ipynb"), "eve's")
		// A safe base below a directory users may rename entries in (red team L1: any
		// user could move the base away and put hers in its place), and one below a
		// sticky directory, where only the base's owner may.
		for name, mode := range map[string]os.FileMode{"open2": 0o777, "sticky": 0o777 | os.ModeSticky} {
			if err := os.MkdirAll(filepath.Join(top, name, "homes", "eve"), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(top, name, "homes", "eve", "e.ipynb"), "eve's")
			if err := os.Chmod(filepath.Join(top, name), mode); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			name, base, root, file string
			want                   error
		}{
			{"her home", top, alice, "data/a.ipynb", nil},
			{"a link to bob's home", top, filepath.Join(top, "mallory"), "b.ipynb", ErrEscapes},
			{"a link to her own home", top, filepath.Join(top, "alias"), "data/a.ipynb", ErrEscapes},
			{"a link above the directory", top, filepath.Join(top, "alias", "data"), "a.ipynb", ErrEscapes},
			{"a path leaving the base", alice, filepath.Join(alice, "..", "bob"), "b.ipynb", ErrEscapes},
			{"a base others may write", filepath.Join(top, "open"), filepath.Join(top, "open", "eve"), "e.ipynb", ErrUnsafeBase},
			{"a base below a directory others may write", filepath.Join(top, "open2", "homes"), filepath.Join(top, "open2", "homes", "eve"), "e.ipynb", ErrUnsafeBase},
			{"a base below a sticky directory", filepath.Join(top, "sticky", "homes"), filepath.Join(top, "sticky", "homes", "eve"), "e.ipynb", nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				d := New(Config{Base: c.base, Root: c.root})
				defer d.Close()
				for range 2 {
					got, err := read(d, filepath.Join(c.root, c.file))
					if c.want == nil && err != nil {
						t.Fatal(err)
					}
					if c.want != nil && (!errors.Is(err, c.want) || !errors.Is(err, ErrRefused) || got != "") {
						t.Fatalf("read %q, %v; want %v", got, err, c.want)
					}
				}
			})
		}
		_ = bob
	})
}

// A base owned by another user than root or the sidecar's is refused, as one writable
// by others.
func TestBaseOfAnotherOwner(t *testing.T) {
	alice, _ := homes(t)
	testenv.GiveAway(t, filepath.Dir(alice))
	if _, err := read(dirOf(t, alice), filepath.Join(alice, "data", "a.ipynb")); !errors.Is(err, ErrUnsafeBase) {
		t.Fatalf("read beneath a stranger's base: %v, want ErrUnsafeBase", err)
	}
}

// Once used, the user's directory is pinned: replaced by a link to bob's home (issue
// 39: mallory swaps her work directory after her tenant started), or by another
// directory of hers, every use is refused with ErrSwapped, never bob's file, and OnSwap
// is told once per swap; put back, it is served again.
func TestRootSwapped(t *testing.T) {
	byHand(t, func(t *testing.T) {
		alice, bob := homes(t)
		if err := os.Mkdir(filepath.Join(bob, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(bob, "data", "a.ipynb"), "bob's")
		var told []error
		d := New(Config{Base: filepath.Dir(alice), Root: alice, OnSwap: func(err error) { told = append(told, err) }})
		defer d.Close()
		nb := filepath.Join(alice, "data", "a.ipynb")
		if got, err := read(d, nb); got != "alice's" || err != nil {
			t.Fatalf("before the swap: %q, %v", got, err)
		}
		for _, s := range []struct {
			name string
			swap func()
		}{
			{"a link to bob's home", func() { symlink(t, "bob", alice) }},
			{"another directory", func() {
				if err := os.Mkdir(alice, 0o700); err != nil {
					t.Fatal(err)
				}
			}},
			{"nothing", func() {}},
		} {
			t.Run(s.name, func(t *testing.T) {
				rename(t, alice, alice+".aside")
				s.swap()
				if got, _ := os.ReadFile(nb); s.name == "a link to bob's home" && string(got) != "bob's" {
					t.Fatalf("the path reads %q: the test does not swap", got)
				}
				for range 3 {
					if got, err := read(d, nb); !errors.Is(err, ErrSwapped) || got != "" {
						t.Fatalf("after the swap: %q, %v; want ErrSwapped", got, err)
					}
					if _, err := d.Stat(nb); !errors.Is(err, ErrSwapped) {
						t.Fatalf("Stat after the swap: %v; want ErrSwapped", err)
					}
					if _, err := d.OwnerUID(); !errors.Is(err, ErrSwapped) {
						t.Fatalf("OwnerUID after the swap: %v; want ErrSwapped", err)
					}
				}
				if len(told) != 1 || !errors.Is(told[0], ErrSwapped) {
					t.Fatalf("OnSwap heard %v, want one ErrSwapped", told)
				}
				told = nil
				if err := os.RemoveAll(alice); err != nil {
					t.Fatal(err)
				}
				rename(t, alice+".aside", alice)
				if got, err := read(d, nb); got != "alice's" || err != nil {
					t.Fatalf("put back: %q, %v", got, err)
				}
			})
		}
	})
}

// A hard link keeps its file's owner: alice's notebook made a hard link to bob's (as
// protected_hardlinks=0 or root allows) is refused, on the open file, by OpenFile and
// Locate; her own hard link of her own notebook is hers. When the user's directory is
// the sidecar's own uid's (or root's), no file with more than one link is taken.
func TestHardLinks(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("files of two owners need root to make (chown)")
	}
	const aliceUID, bobUID = testenv.Stranger + 1, testenv.Stranger + 2
	alice, bob := homes(t)
	own := filepath.Join(alice, "data", "a.ipynb")
	for _, p := range []string{alice, filepath.Join(alice, "data"), own} {
		chown(t, p, aliceUID)
	}
	chown(t, filepath.Join(bob, "b.ipynb"), bobUID)
	link(t, filepath.Join(bob, "b.ipynb"), filepath.Join(alice, "data", "bobs.ipynb"))
	link(t, own, filepath.Join(alice, "data", "mine.ipynb"))
	d := dirOf(t, alice)
	for _, c := range []struct{ name, want string }{
		{"bobs.ipynb", ""},
		{"mine.ipynb", "alice's"},
		{"a.ipynb", "alice's"},
	} {
		p := filepath.Join(alice, "data", c.name)
		got, err := read(d, p)
		l, lerr := d.Locate(p)
		if lerr == nil {
			l.Close()
		}
		if c.want == "" {
			if !errors.Is(err, ErrNotOwned) || !errors.Is(lerr, ErrNotOwned) || got != "" {
				t.Errorf("%s: read %q, %v; Locate %v; want ErrNotOwned", c.name, got, err, lerr)
			}
			continue
		}
		if got != c.want || err != nil || lerr != nil {
			t.Errorf("%s: read %q, %v; Locate %v; want %q", c.name, got, err, lerr, c.want)
		}
	}
	chown(t, alice, 0)
	chown(t, own, 0)
	if got, err := read(dirOf(t, alice), own); !errors.Is(err, ErrNotOwned) {
		t.Errorf("a root-owned home's file with 2 links: read %q, %v; want ErrNotOwned", got, err)
	}
}

func chown(t *testing.T, p string, uid int) {
	t.Helper()
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, target, at string) {
	t.Helper()
	if err := os.Link(target, at); err != nil {
		t.Fatal(err)
	}
}

// Swapping the user's directory in a loop, with a link to bob's home and back, while
// it is read: no read ever returns bob's file (each is alice's or refused), and some
// of each happen.
func TestRootSwapRace(t *testing.T) {
	byHand(t, func(t *testing.T) {
		alice, bob := homes(t)
		if err := os.Mkdir(filepath.Join(bob, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(bob, "data", "a.ipynb"), "bob's")
		d := dirOf(t, alice)
		nb := filepath.Join(alice, "data", "a.ipynb")
		if got, err := read(d, nb); got != "alice's" {
			t.Fatalf("before the swaps: %q, %v", got, err)
		}
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Errors are the reader's business: the loop only swaps.
				_ = os.Rename(alice, alice+".aside")
				_ = os.Symlink("bob", alice)
				_ = os.Remove(alice)
				_ = os.Rename(alice+".aside", alice)
			}
		}()
		seen := map[string]int{}
		for i := 0; i < 3000 || seen["alice's"] == 0 || seen[""] == 0; i++ {
			got, err := read(d, nb)
			if got == "bob's" {
				close(stop)
				t.Fatalf("read %d returned bob's file", i)
			}
			if got == "" && !errors.Is(err, ErrRefused) && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("read %d: %v", i, err)
			}
			seen[got]++
			if i > 100000 {
				break
			}
		}
		close(stop)
		<-done
		t.Logf("reads: %v", seen)
	})
}
