package config

import (
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite"
)

// The store sections map every key onto the backends' typed configs.
func TestStoreConfigs(t *testing.T) {
	s := SQLite{Path: "/s/y.db", PollInterval: 3 * time.Second, FSNotify: false, ChunkRows: 7}
	if got, want := s.TailerConfig(nil, nil), (sqlite.Config{
		Path: "/s/y.db", PollInterval: 3 * time.Second, ChunkRows: 7, DisableFSNotify: true,
	}); got.Path != want.Path || got.PollInterval != want.PollInterval || got.ChunkRows != want.ChunkRows ||
		got.DisableFSNotify != want.DisableFSNotify {
		t.Errorf("TailerConfig() = %+v, want %+v", got, want)
	}
	p := Postgres{DSN: "postgres://h/db", Schema: "s", Table: "t", Channel: "c", PollInterval: time.Second, DisableListen: true, Owner: "alice"}
	if got, want := p.StoreConfig(nil, nil), (postgres.Config{
		DSN: "postgres://h/db", Schema: "s", Table: "t", Channel: "c", PollInterval: time.Second, DisableListen: true, Owner: "alice",
	}); got != want {
		t.Errorf("StoreConfig() = %+v, want %+v", got, want)
	}
	sp := ShipPostgres{DSN: "postgres://h/db", Schema: "s", Table: "t"}
	if got, want := sp.StoreConfig(nil), (postgres.Config{DSN: "postgres://h/db", Schema: "s", Table: "t"}); got != want {
		t.Errorf("ShipPostgres.StoreConfig() = %+v, want %+v", got, want)
	}
}

// The daemon's store defaults are the libraries' Default constants.
func TestStoreDefaultsAreTheLibraries(t *testing.T) {
	d := Default()
	s, p, sp := d.Store.SQLite, d.Store.Postgres, d.Ship.Postgres
	if s.PollInterval != sqlite.DefaultPollInterval || s.ChunkRows != sqlite.DefaultChunkRows || !s.FSNotify {
		t.Errorf("store.sqlite defaults %+v", s)
	}
	if p.Schema != postgres.DefaultSchema || p.Table != postgres.DefaultTable || p.Channel != postgres.DefaultChannel ||
		p.PollInterval != postgres.DefaultPollInterval || p.DisableListen {
		t.Errorf("store.postgres defaults %+v", p)
	}
	if sp.Schema != postgres.DefaultSchema || sp.Table != postgres.DefaultTable {
		t.Errorf("ship.postgres defaults %+v", sp)
	}
}

func TestValidateStore(t *testing.T) {
	c := Default()
	c.Store.SQLite.ChunkRows = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "store.sqlite.chunk_rows: must be > 0") {
		t.Fatalf("Validate() = %v", err)
	}
}
