package sqlitevfs

import (
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/confine"
)

// makeDB writes a database at path whose one row says who.
func makeDB(t *testing.T, path, who string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE owner(name TEXT); INSERT INTO owner VALUES (?)", who); err != nil {
		t.Fatal(err)
	}
}

// whose reads a database by name, read-only as the tailer does; "" if it cannot.
func whose(name string) string {
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: name, RawQuery: "mode=ro"}).String())
	if err != nil {
		return ""
	}
	defer db.Close()
	var who string
	if err := db.QueryRow("SELECT name FROM owner").Scan(&who); err != nil {
		println(name, err.Error())
		return ""
	}
	return who
}

// A confined database is opened only where it was located: after alice replaces her
// store by a link to bob's, or by another file, or her directory by a link to bob's,
// a connection opened by the confined name reads her located store or nothing, never
// bob's (where the path, opened as SQLite opens it, reads bob's).
func TestConfinedOpenIsNotSwapped(t *testing.T) {
	if HookErr != nil {
		t.Fatal(HookErr)
	}
	top := t.TempDir()
	alice, bob := filepath.Join(top, "alice"), filepath.Join(top, "bob")
	for _, d := range []string{alice, filepath.Join(alice, "sub"), bob} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	store := filepath.Join(alice, "sub", "store.db")
	makeDB(t, store, "alice")
	makeDB(t, filepath.Join(bob, "store.db"), "bob")
	d := confine.Dir{Root: alice, Owner: alice}
	uid, err := d.OwnerUID()
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Locate(store, uid)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Confine(l)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := whose(c.Name()); got != "alice" {
		t.Fatalf("confined read %q, want alice", got)
	}

	swaps := []struct {
		name string
		swap func(t *testing.T) // from alice's store in place
		want string             // what the confined name reads after it
	}{
		{"store replaced by a link to bob's", func(t *testing.T) {
			rename(t, store, store+".aside")
			link(t, filepath.Join("..", "..", "bob", "store.db"), store)
		}, ""},
		{"store replaced by another database of alice's", func(t *testing.T) {
			rename(t, store, store+".aside")
			makeDB(t, store, "alice's other")
		}, ""},
		{"directory replaced by a link to bob's", func(t *testing.T) {
			rename(t, filepath.Join(alice, "sub"), filepath.Join(alice, "sub.aside"))
			link(t, bob, filepath.Join(alice, "sub"))
		}, "alice"}, // the located directory, moved, is still where SQLite opens
		{"journal replaced by a link to bob's store", func(t *testing.T) {
			link(t, filepath.Join(bob, "store.db"), store+"-journal")
		}, ""}, // a journal SQLite cannot open: the read fails, as with a hot journal
	}
	for _, s := range swaps {
		t.Run(s.name, func(t *testing.T) {
			s.swap(t)
			defer undo(t, alice, store)
			if s.name == "store replaced by a link to bob's" {
				if got := whose(store); got != "bob" {
					t.Fatalf("the path opened as SQLite opens it reads %q: the test does not swap", got)
				}
			}
			if got := whose(c.Name()); got != s.want {
				t.Fatalf("confined read %q, want %q", got, s.want)
			}
		})
	}
	if got := whose(c.Name()); got != "alice" {
		t.Fatalf("confined read %q after the swaps were undone, want alice", got)
	}
	c.Close()
	if got := whose(c.Name()); got != "" {
		t.Fatalf("closed, the confined name still reads %q", got)
	}
}

// undo puts alice's store and directory back as they were before a swap.
func undo(t *testing.T, alice, store string) {
	for _, p := range []string{store + "-journal", filepath.Join(alice, "sub")} {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			remove(t, p)
		}
	}
	for _, p := range []string{filepath.Join(alice, "sub"), store} {
		if _, err := os.Lstat(p + ".aside"); err == nil {
			rename(t, p+".aside", p)
		}
	}
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, target, at string) {
	t.Helper()
	if err := os.Symlink(target, at); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}
