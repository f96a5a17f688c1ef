package sidecar

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/config"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// Inspect decodes a store as its rows stream in, whatever the backend: every backend's
// tailer, a hub user's on the shared Postgres follower included, is a
// ystore.StreamLoader (their Run streams a cold load to the rooms the same way).
func TestStoreTailersStreamLoads(t *testing.T) {
	obs := config.Obs{Logger: slog.New(slog.DiscardHandler)}
	lite := config.Default()
	lite.Store.Backend = config.BackendSQLite
	lite.Store.SQLite.Path = filepath.Join(t.TempDir(), "y.db")
	pg := config.Default()
	pg.Store.Backend = config.BackendPostgres
	pg.Store.Postgres.DSN = "postgres://sidecar@127.0.0.1:1/none" // never dialled: no tailer reads before Run
	hub, closeHub, err := postgresBackend{}.share(pg, obs)
	if err != nil {
		t.Fatal(err)
	}
	defer closeHub()
	alice := pg
	if err := (postgresBackend{}).forUser(&alice, "alice"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  config.Config
		sh   shared
	}{
		{"sqlite", lite, shared{}},
		{"postgres", pg, shared{}},
		{"postgres, a hub user's", alice, hub},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl, err := openTailer(tc.cfg, obs, tc.sh, confinement{})
			if err != nil {
				t.Fatal(err)
			}
			defer tl.Close()
			if _, ok := tl.(ystore.StreamLoader); !ok {
				t.Fatalf("the %s tailer %T is no ystore.StreamLoader: inspect would hold every row", tc.name, tl)
			}
		})
	}
}
