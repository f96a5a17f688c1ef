package hub

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

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
	dsn, schema := sidecartest.InitPostgres(t)
	steps := sidecartest.Session(t)
	root := t.TempDir()
	port := testenv.FreePort(t)
	hub := jhubtest.StartWith(t, jhubtest.Options{ServiceURL: fmt.Sprintf("http://127.0.0.1:%d", port), Homes: filepath.Join(root, "home")})
	users := spawnUsers(t, hub, "alice", "bob")
	alice, bob := users["alice"], users["bob"]
	if alice.room == bob.room || sidecartest.JSONSame(string(alice.py.Notebook("a", sidecartest.NbPath)), bob.py.Notebook("a", sidecartest.NbPath)) {
		t.Fatal("alice's and bob's notebooks are the same; the test could not tell them apart")
	}
	aliceFileIDs := filepath.Join(alice.home, jhubtest.FileIDFile)
	// A store shipped before rooms had owners: a notebook alice's fileid database names.
	legacyDir := filepath.Join(root, "legacy")
	if err := os.MkdirAll(legacyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	legacyRoom := ".notebook:1e9ac000-6a57-4d55-9d4c-1f6f0c3b8a11.y"
	sidecartest.ExecSQL(t, aliceFileIDs, `INSERT INTO Files(id, path) VALUES (?, ?)`,
		legacyRoom[len(".notebook:"):len(legacyRoom)-len(".y")], filepath.Join(alice.home, "work/legacy.ipynb"))
	// And bob's room, as if alice's server had a file with its id: still bob's only.
	sidecartest.ExecSQL(t, aliceFileIDs, `INSERT INTO Files(id, path) VALUES (?, ?)`,
		bob.room[len(".notebook:"):len(bob.room)-len(".y")], filepath.Join(alice.home, "work/bobs.ipynb"))
	lw := sidecartest.StartWriter(t, filepath.Join(legacyDir, ".jupyter_ystore.db"))
	for _, s := range steps[:sidecartest.Preloaded] {
		lw.WriteRoom(legacyRoom, s.Update)
	}

	ship := func(store, sourceID, owner string) {
		shipDir := filepath.Join(root, "ship-"+sourceID)
		if err := os.MkdirAll(shipDir, 0o755); err != nil {
			t.Fatal(err)
		}
		sidecartest.Launch(t, shipDir, fmt.Sprintf(`store: {sqlite: {path: %q}}
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
	sc := sidecartest.LaunchOn(t, root, port, hubCfg, "serve")
	endpoint := hub.ServicePrefix() + "mcp"
	// A second replica on the same store, reached directly (as behind a load balancer).
	replicaDir := filepath.Join(root, "replica")
	if err := os.MkdirAll(replicaDir, 0o755); err != nil {
		t.Fatal(err)
	}
	replica := sidecartest.Launch(t, replicaDir, strings.Replace(hubCfg, filepath.Join(root, "state"), filepath.Join(root, "state2"), 1), "serve")
	sc.WaitHTTP("/services/mcp/readyz", http.StatusOK) // the follower has read the store
	// A replica whose store is unreachable is not ready: another one should serve.
	offlineDir := filepath.Join(root, "offline")
	if err := os.MkdirAll(offlineDir, 0o755); err != nil {
		t.Fatal(err)
	}
	offline := sidecartest.Launch(t, offlineDir, strings.Replace(hubCfg, dsn, fmt.Sprintf("postgres://nobody@127.0.0.1:%d/none?connect_timeout=1", testenv.FreePort(t)), 1), "serve")
	if code, body := offline.Get("/services/mcp/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "store not reachable") {
		t.Fatalf("/readyz of a replica whose store is unreachable: %d %s", code, body)
	}

	clients := map[string][]sidecartest.MCPClient{}
	for _, u := range []*hubUser{alice, bob} {
		g := mustGoAs(t, endpoint, false, u.tok)
		clients[u.name] = []sidecartest.MCPClient{g, mustGoAs(t, endpoint, true, u.tok)}
		g.Bind(sidecartest.NbName, sidecartest.NbPath)
		// Until ship has copied the user's room, the notebook is not in Postgres yet.
		sidecartest.EventuallyJSON(t, u.name+"'s shipped notebook served", sidecartest.TryReadText(g, sidecartest.NbURI), u.py.Notebook("a", sidecartest.NbPath))
	}
	clients["alice"] = append(clients["alice"], sidecartest.DialTSAs(t, endpoint, alice.tok.Value)...)
	for _, u := range []*hubUser{alice, bob} {
		clients[u.name] = append(clients[u.name], mustGoAs(t, replica.URL+"/services/mcp/mcp", true, u.tok))
	}
	for _, cs := range clients {
		for _, c := range cs {
			c.Bind(sidecartest.NbName, sidecartest.NbPath)
			c.Subscribe(sidecartest.NbURI)
		}
	}
	for _, cs := range clients {
		for _, c := range cs {
			sidecartest.Drain(c, 700*time.Millisecond)
		}
	}

	// The ownerless room and bob's are in Postgres, yet alice, whose fileid database
	// names them, is served neither.
	a := clients["alice"][0].(*sidecartest.GoClient)
	for name, path := range map[string]string{"legacy": "work/legacy.ipynb", "bobs": "work/bobs.ipynb"} {
		a.Bind(name, path)
		if got, err := a.TryRead("notebook://" + name); err == nil {
			t.Fatalf("alice was served %s: %.200s", path, got)
		}
	}

	for _, tt := range []struct{ who, other *hubUser }{{alice, bob}, {bob, alice}} {
		u := tt.who
		editReal(t, u)
		// Through the user's server, its store, ship and Postgres: waited for.
		for _, c := range clients[u.name] {
			sidecartest.Await(t, c, testenv.Wait, sidecartest.NbURI)
		}
		for _, c := range clients[tt.other.name] {
			if n := sidecartest.Drain(c, time.Second); n != 0 {
				t.Fatalf("%s heard %d notifications of %s's edit", c.Name(), n, u.name)
			}
		}
		for _, name := range []string{u.name, tt.other.name} {
			want := users[name].py.Notebook("a", sidecartest.NbPath)
			for _, c := range clients[name] {
				sameNotebook(t, c, sidecartest.NbURI, want)
			}
		}
	}
	_, metrics := sc.Get("/metrics")
	for _, name := range []string{"alice", "bob", root} {
		if strings.Contains(metrics, name) {
			t.Fatalf("/metrics names %q", name)
		}
	}
}
