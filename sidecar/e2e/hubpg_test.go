package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres/pgtest"
)

// initPostgres creates a fresh schema on the test cluster with `postgres init` and
// returns the DSN and the schema.
func initPostgres(t *testing.T) (dsn, schema string) {
	t.Helper()
	dsn, schema = pgtest.DSN(t), pgtest.Schema("e2e_")
	if out, err := exec.Command(binary, "postgres", "init", "--dsn", dsn, "--schema", schema).CombinedOutput(); err != nil {
		t.Fatalf("postgres init: %v\n%s", err, out)
	}
	return dsn, schema
}

// TestHubModePostgres ships two users' SQLite stores, written by their real single-user
// servers that a real JupyterHub runs, into one Postgres store, alice's with her name
// from $JUPYTERHUB_USER (as in her single-user server) and bob's with ship.owner, next
// to a store shipped without an owner; a hub-mode sidecar on that Postgres store serves
// them behind the Hub and its proxy, and a second replica on the same store serves them
// directly. Each user, on either replica, reads only their own notebook (both are
// work/analysis.ipynb, in rooms of their own), hears only the edits made through their
// own server, and neither the ownerless room nor the other user's is served, even under
// a path the user's fileid database gives it.
func TestHubModePostgres(t *testing.T) {
	dsn, schema := initPostgres(t)
	steps := session(t)
	root := t.TempDir()
	port := testenv.FreePort(t)
	hub := jhubtest.StartWith(t, jhubtest.Options{ServiceURL: fmt.Sprintf("http://127.0.0.1:%d", port), Homes: filepath.Join(root, "home")})
	users := spawnUsers(t, hub, "alice", "bob")
	alice, bob := users["alice"], users["bob"]
	if alice.room == bob.room || jsonSame(string(alice.py.Notebook("a", nbPath)), bob.py.Notebook("a", nbPath)) {
		t.Fatal("alice's and bob's notebooks are the same; the test could not tell them apart")
	}
	aliceFileIDs := filepath.Join(alice.home, jhubtest.FileIDFile)
	// A store shipped before rooms had owners: a notebook alice's fileid database names.
	legacyDir := filepath.Join(root, "legacy")
	if err := os.MkdirAll(legacyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	legacyRoom := ".notebook:1e9ac000-6a57-4d55-9d4c-1f6f0c3b8a11.y"
	execSQL(t, aliceFileIDs, `INSERT INTO Files(id, path) VALUES (?, ?)`,
		legacyRoom[len(".notebook:"):len(legacyRoom)-len(".y")], filepath.Join(alice.home, "work/legacy.ipynb"))
	// And bob's room, as if alice's server had a file with its id: still bob's only.
	execSQL(t, aliceFileIDs, `INSERT INTO Files(id, path) VALUES (?, ?)`,
		bob.room[len(".notebook:"):len(bob.room)-len(".y")], filepath.Join(alice.home, "work/bobs.ipynb"))
	lw := startWriter(t, filepath.Join(legacyDir, ".jupyter_ystore.db"))
	for _, s := range steps[:preloaded] {
		lw.writeRoom(legacyRoom, s.update)
	}

	ship := func(store, sourceID, owner string) {
		shipDir := filepath.Join(root, "ship-"+sourceID)
		if err := os.MkdirAll(shipDir, 0o755); err != nil {
			t.Fatal(err)
		}
		launch(t, shipDir, fmt.Sprintf(`store: {sqlite: {path: %q}}
ship: {source_id: %s, owner: %q, postgres: {dsn: %q, schema: %s}}
`, store, sourceID, owner, dsn, schema), "ship")
	}
	ship(filepath.Join(legacyDir, ".jupyter_ystore.db"), "legacy", "")
	t.Setenv("JUPYTERHUB_USER", "alice") // what JupyterHub sets in alice's server
	ship(filepath.Join(alice.home, jhubtest.StoreFile), "alice-server", "")
	t.Setenv("JUPYTERHUB_USER", "")
	ship(filepath.Join(bob.home, jhubtest.StoreFile), "bob-server", "bob")

	home := filepath.Join(root, "home", "{username}")
	hubCfg := fmt.Sprintf(`hub:
  enabled: true
  api_url: %q
  service_name: %s
  stores: {backend: postgres, fileid_db: %q, root_dir: %q}
  token_cache_ttl: 1s
  idle_timeout: 5m
  state_dir: %q
store:
  postgres: {dsn: %q, schema: %s, poll_interval: 1s}
notifications: {debounce: 250ms, max_delay: 2s}
`, hub.APIURL, jhubtest.ServiceName, filepath.Join(home, jhubtest.FileIDFile), home, filepath.Join(root, "state"),
		dsn, schema)
	sc := launchOn(t, root, port, hubCfg, "serve")
	endpoint := hub.ServicePrefix() + "mcp"
	// A second replica on the same store, reached directly (as behind a load balancer).
	replicaDir := filepath.Join(root, "replica")
	if err := os.MkdirAll(replicaDir, 0o755); err != nil {
		t.Fatal(err)
	}
	replica := launch(t, replicaDir, strings.Replace(hubCfg, filepath.Join(root, "state"), filepath.Join(root, "state2"), 1), "serve")
	sc.waitHTTP("/services/mcp/readyz", http.StatusOK) // the follower has read the store
	// A replica whose store is unreachable is not ready: another one should serve.
	offlineDir := filepath.Join(root, "offline")
	if err := os.MkdirAll(offlineDir, 0o755); err != nil {
		t.Fatal(err)
	}
	offline := launch(t, offlineDir, strings.Replace(hubCfg, dsn, fmt.Sprintf("postgres://nobody@127.0.0.1:%d/none?connect_timeout=1", testenv.FreePort(t)), 1), "serve")
	if code, body := offline.get("/services/mcp/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "store not reachable") {
		t.Fatalf("/readyz of a replica whose store is unreachable: %d %s", code, body)
	}

	clients := map[string][]mcpClient{}
	for _, u := range []*hubUser{alice, bob} {
		g := mustGoAs(t, endpoint, false, u.tok)
		clients[u.name] = []mcpClient{g, mustGoAs(t, endpoint, true, u.tok)}
		g.bind(nbName, nbPath)
		// Until ship has copied the user's room, the notebook is not in Postgres yet.
		eventuallyJSON(t, u.name+"'s shipped notebook served", tryReadText(g, nbURI), u.py.Notebook("a", nbPath))
	}
	clients["alice"] = append(clients["alice"], dialTSAs(t, endpoint, alice.tok.Value)...)
	for _, u := range []*hubUser{alice, bob} {
		clients[u.name] = append(clients[u.name], mustGoAs(t, replica.url+"/services/mcp/mcp", true, u.tok))
	}
	for _, cs := range clients {
		for _, c := range cs {
			c.bind(nbName, nbPath)
			c.subscribe(nbURI)
		}
	}
	for _, cs := range clients {
		for _, c := range cs {
			drain(c, 700*time.Millisecond)
		}
	}

	// The ownerless room and bob's are in Postgres, yet alice, whose fileid database
	// names them, is served neither.
	a := clients["alice"][0].(*goClient)
	for name, path := range map[string]string{"legacy": "work/legacy.ipynb", "bobs": "work/bobs.ipynb"} {
		a.bind(name, path)
		if got, err := a.tryRead("notebook://" + name); err == nil {
			t.Fatalf("alice was served %s: %.200s", path, got)
		}
	}

	for _, tt := range []struct{ who, other *hubUser }{{alice, bob}, {bob, alice}} {
		u := tt.who
		editReal(t, u)
		// Through the user's server, its store, ship and Postgres: waited for.
		for _, c := range clients[u.name] {
			await(t, c, testenv.Wait, nbURI)
		}
		for _, c := range clients[tt.other.name] {
			if n := drain(c, time.Second); n != 0 {
				t.Fatalf("%s heard %d notifications of %s's edit", c.name(), n, u.name)
			}
		}
		for _, name := range []string{u.name, tt.other.name} {
			want := users[name].py.Notebook("a", nbPath)
			for _, c := range clients[name] {
				sameNotebook(t, c, nbURI, want)
			}
		}
	}
	_, metrics := sc.get("/metrics")
	for _, name := range []string{"alice", "bob", root} {
		if strings.Contains(metrics, name) {
			t.Fatalf("/metrics names %q", name)
		}
	}
}
