package sqlitevfs

import (
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
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
	d := confine.New(confine.Config{Base: top, Root: alice})
	defer d.Close()
	l, err := d.Locate(store)
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

// Every file SQLite opens for a confined database is checked on its descriptor to be
// the user's (issue 39): mallory's own WAL-mode store whose -wal is a hard link to bob's
// live WAL (bob's uid) reads nothing, never bob's row; her own WAL is read.
func TestConfinedWALIsTheUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("files of two owners need root to make (chown)")
	}
	const malloryUID, bobUID = 4243, 4244
	top := t.TempDir()
	mallory, bob := filepath.Join(top, "mallory"), filepath.Join(top, "bob")
	for _, d := range []string{mallory, bob} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// bob's live store: every page in its WAL, his server's connection open.
	live := liveWAL(t, filepath.Join(bob, "store.db"), "bob")
	defer live.Close()
	store := filepath.Join(mallory, "store.db")
	makeDB(t, store, "mallory")
	for _, p := range []string{mallory, store} {
		chown(t, p, malloryUID)
	}
	for _, p := range []string{bob, filepath.Join(bob, "store.db"), filepath.Join(bob, "store.db-wal"), filepath.Join(bob, "store.db-shm")} {
		chown(t, p, bobUID)
	}
	d := confine.New(confine.Config{Base: top, Root: mallory})
	defer d.Close()
	open := func() *Confined {
		l, err := d.Locate(store)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Confine(l)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := open()
	if got := whose(c.Name()); got != "mallory" {
		t.Fatalf("her own store reads %q, want mallory", got)
	}
	c.Close()
	// Her WAL: the hard link to bob's (as root, or protected_hardlinks=0, makes it).
	if err := os.Link(filepath.Join(bob, "store.db-wal"), store+"-wal"); err != nil {
		t.Fatal(err)
	}
	if got := whose(store); got != "bob" {
		t.Fatalf("the store opened as SQLite opens it reads %q: the test does not attack", got)
	}
	// The unconfined read left a -shm behind, and SQLite, run as root, gave the WAL it
	// opened the database's owner: bob's WAL is mallory's now. Undone.
	_ = os.Remove(store + "-shm")
	chown(t, store+"-wal", bobUID)
	c = open()
	defer c.Close()
	if got := whose(c.Name()); got != "" {
		t.Fatalf("with bob's WAL hard-linked, the confined store reads %q, want nothing", got)
	}
	if fi, err := os.Stat(filepath.Join(bob, "store.db-wal")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != bobUID {
		t.Fatalf("bob's WAL after the confined read: %v, %v; want still bob's", fi, err)
	}
}

// liveWAL writes a WAL-mode database at path whose one row says who, all of it still in
// the WAL (no checkpoint), and returns the writer's open connection.
func liveWAL(t *testing.T, path, who string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(wal)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE owner(name TEXT); INSERT INTO owner VALUES (?)", who); err != nil {
		t.Fatal(err)
	}
	return db
}

func chown(t *testing.T, p string, uid int) {
	t.Helper()
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}
