package fileid

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/confine"
)

// A confined file id database (hub mode) is read only from beneath the user's directory
// and only if the user owns it: alice's own database (WAL, its server running) answers;
// a link to bob's, or a database not hers, is refused with the reason, never bob's
// answer.
func TestConfinedDB(t *testing.T) {
	const root = "/srv/jupyter/work"
	for _, c := range []struct {
		name string
		make func(t *testing.T, alice, bob, db string)
		want error // nil: alice's answer
	}{
		{"her own database", func(t *testing.T, alice, bob, db string) {
			edit, _ := startManager(t, db, "arbitrary")
			edit("add", id1, root+"/alice.ipynb")
		}, nil},
		{"a link to bob's", func(t *testing.T, alice, bob, db string) {
			if err := os.Symlink("../bob/file_id_manager.db", db); err != nil {
				t.Fatal(err)
			}
		}, confine.ErrEscapes},
		{"a database not hers", func(t *testing.T, alice, bob, db string) {
			edit, _ := startManager(t, db, "arbitrary")
			edit("add", id1, root+"/alice.ipynb")
			testenv.GiveAway(t, db)
		}, confine.ErrNotOwned},
	} {
		t.Run(c.name, func(t *testing.T) {
			homes := testenv.Homes(t, "alice", "bob")
			alice, bob := homes[0], homes[1]
			edit, _ := startManager(t, filepath.Join(bob, "file_id_manager.db"), "arbitrary")
			edit("add", id1, root+"/bob.ipynb")
			db := filepath.Join(alice, "file_id_manager.db")
			c.make(t, alice, bob, db)
			r, err := NewDB(DBConfig{Path: db, RootDir: root, Confine: confine.New(confine.Config{Base: filepath.Dir(alice), Root: alice})})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			p, err := r.Path(context.Background(), id1)
			if c.want == nil {
				if err != nil || p != "alice.ipynb" {
					t.Fatalf("Path = %q, %v; want alice.ipynb", p, err)
				}
				return
			}
			if !errors.Is(err, c.want) || p != "" {
				t.Fatalf("Path = %q, %v; want %v", p, err, c.want)
			}
		})
	}
}
