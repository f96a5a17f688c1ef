package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/confine"
)

// A confined store (hub mode) is read only from beneath the user's directory and only
// if the user owns it: alice's store as a link inside her home is read; as a link to
// bob's store (relative or absolute), or owned by someone else, it is unreachable with
// the reason, Load refuses it, and nothing of bob's is delivered.
func TestConfinedStore(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(t *testing.T, alice, bob, store string) // puts alice's store in place
		want error                                        // nil: served
		why  string                                       // in the status's error
	}{
		{"her own store", func(t *testing.T, alice, bob, store string) {
			newModel(startWriter(t, store)).write(roomA, "alice")
		}, nil, ""},
		{"a link inside her home", func(t *testing.T, alice, bob, store string) {
			newModel(startWriter(t, filepath.Join(alice, "kept.db"))).write(roomA, "alice")
			symlinkAt(t, "kept.db", store)
		}, nil, ""},
		{"a link to bob's store", func(t *testing.T, alice, bob, store string) {
			symlinkAt(t, "../bob/store.db", store)
		}, confine.ErrEscapes, "outside the user's directory"},
		{"an absolute link to bob's store", func(t *testing.T, alice, bob, store string) {
			symlinkAt(t, filepath.Join(bob, "store.db"), store)
		}, confine.ErrEscapes, "outside the user's directory"},
		{"a store that is not hers", func(t *testing.T, alice, bob, store string) {
			newModel(startWriter(t, store)).write(roomA, "alice")
			testenv.GiveAway(t, store)
		}, confine.ErrNotOwned, "not owned by the user"},
	} {
		t.Run(c.name, func(t *testing.T) {
			homes := testenv.Homes(t, "alice", "bob")
			alice, bob := homes[0], homes[1]
			newModel(startWriter(t, filepath.Join(bob, "store.db"))).write(roomB, "bob")
			store := filepath.Join(alice, "store.db")
			c.make(t, alice, bob, store)
			cfg := modes[2].cfg(store)
			cfg.Confine = confine.New(confine.Config{Base: filepath.Dir(alice), Root: alice})
			tl := newTailer(t, cfg)
			events, err := tl.Load(context.Background())
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Load = %v, want %v", err, c.want)
			}
			for _, ev := range events {
				if ev.Room != roomA {
					t.Fatalf("Load delivered room %s, not alice's", ev.Room)
				}
			}
			s := newSink()
			runTailer(t, tl, s.deliver)
			if c.want == nil {
				want := docs{}
				want.apply(roomA, tokens("alice"))
				testenv.Eventually(t, testenv.Wait, "alice's store delivered", func() bool { return s.String() == want.String() }, s.String)
				return
			}
			testenv.Eventually(t, testenv.Wait, "unreachable with the reason", func() bool {
				st := tl.Status()
				return !st.Reachable && strings.Contains(st.LastError, c.why)
			})
			if got := s.String(); got != "" {
				t.Fatalf("delivered %s from a refused store", got)
			}
		})
	}
}

func symlinkAt(t *testing.T, target, at string) {
	t.Helper()
	if err := os.Symlink(target, at); err != nil {
		t.Fatal(err)
	}
}
