package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// hubConfig configures hub mode with the Hub at apiURL for users whose homes (store,
// fileid database, root directory) are root/home/{username}, their bindings in
// root/state, and more keys of hub: such as "idle_timeout: 2s".
func hubConfig(apiURL, root string, more ...string) string {
	return hubConfigFiles(apiURL, root, ".jupyter_ystore.db", "file_id_manager.db", more...)
}

// hubConfigFiles is hubConfig with the store and the fileid database at the given paths
// in each user's home.
func hubConfigFiles(apiURL, root, store, fileid string, more ...string) string {
	home := filepath.Join(root, "home", "{username}")
	cfg := fmt.Sprintf("hub:\n  enabled: true\n  api_url: %q\n  service_name: %s\n  state_dir: %q\n  stores:\n    sqlite_path: %q\n    fileid_db: %q\n    root_dir: %q\n",
		apiURL, jhubtest.ServiceName, filepath.Join(root, "state"), filepath.Join(home, store), filepath.Join(home, fileid), home)
	for _, m := range more {
		cfg += "  " + m + "\n"
	}
	return cfg
}

// hubUser is one Hub user with a live store of their own, written by their real
// single-user server (py edits through it).
type hubUser struct {
	name string
	home string
	py   *jupytertest.Client // a collaboration client on the user's own server, with their token
	room string              // the store's room of the user's notebook (py's)
	tok  jhubtest.Token
	next int // edits made so far
}

// hubCell is the id of the first cell of every user's notebook in the real-server tests.
const hubCell = "c0ffee00-0000-4000-8000-000000000001"

// spawnUsers writes each user's notebook (sidecartest.NbPath) into their home under hub.Homes,
// starts their real single-user server through the Hub and joins a collaboration client
// with the user's own token to the notebook's room, so that the server writes the room
// into its Y-store.
func spawnUsers(t *testing.T, hub *jhubtest.Hub, names ...string) map[string]*hubUser {
	t.Helper()
	users := map[string]*hubUser{}
	for _, name := range names {
		u := &hubUser{name: name, home: filepath.Join(hub.Homes, name), tok: hub.Token(name)}
		nb := jupytertest.NotebookJSON([2]string{hubCell, "import numpy as np\nprint(" + strconv.Quote(name) + ")"})
		if err := os.MkdirAll(filepath.Join(u.home, filepath.Dir(sidecartest.NbPath)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(u.home, sidecartest.NbPath), []byte(nb), 0o644); err != nil {
			t.Fatal(err)
		}
		u.py = jupytertest.Connect(t, hub.Spawn(name), u.tok.Value)
		fileID, _ := u.py.Do(map[string]any{"op": "join", "path": sidecartest.NbPath})["file_id"].(string)
		u.room = jupytertest.RoomKey(fileID)
		users[name] = u
	}
	return users
}

// editReal types into the first cell of u's notebook through u's own server, as the
// user would in JupyterLab, and returns the server's view of the notebook after it.
func editReal(t *testing.T, u *hubUser) []byte {
	t.Helper()
	u.next++
	u.py.Do(map[string]any{"op": "type", "path": sidecartest.NbPath, "index": 0, "text": fmt.Sprintf("\n# %s's edit %d", u.name, u.next)})
	return u.py.Notebook("a", sidecartest.NbPath)
}

// sameNotebook waits until c serves uri as want (nbformat JSON, compared as values).
func sameNotebook(t *testing.T, c sidecartest.MCPClient, uri string, want []byte) {
	t.Helper()
	var got string
	testenv.Eventually(t, testenv.Wait, c.Name()+" serves "+uri+" as its user's server has it",
		func() bool { got = c.Read(uri); return sidecartest.JSONSame(got, want) },
		func() string { return fmt.Sprintf("got %.2000s\nwant %.2000s", got, want) })
}

// TestHubMode runs the binary in hub mode as a JupyterHub service behind a real Hub and
// its proxy, the Hub running each user's real single-user server: users' clients (mcp-go
// and the official TypeScript SDKs, both eras) connect at /services/mcp/mcp with their
// own Hub tokens while each user edits their notebook through their own server (a
// collaboration client on its room), which writes the user's Y-store and file id
// database where the store templates find them. Each user hears of their own notebook's
// changes and nothing of the other's; every cross-user and unauthorized attempt on every
// surface is refused, every own access served; an idle user is released.
func TestHubMode(t *testing.T) {
	root := t.TempDir()
	port := testenv.FreePort(t)
	hub := jhubtest.StartWith(t, jhubtest.Options{ServiceURL: fmt.Sprintf("http://127.0.0.1:%d", port), Homes: filepath.Join(root, "home")})
	users := spawnUsers(t, hub, "alice", "bob")
	alice, bob := users["alice"], users["bob"]
	hubCfg := hubConfigFiles(hub.APIURL, root, jhubtest.StoreFile, jhubtest.FileIDFile, "token_cache_ttl: 1s", "idle_timeout: 2s") +
		"notifications: {debounce: 250ms, max_delay: 2s}\n"
	sc := sidecartest.LaunchOn(t, root, port, hubCfg, "serve")
	endpoint := hub.ServicePrefix() + "mcp"

	t.Run("each user hears of their own notebook only", func(t *testing.T) {
		aliceClients := []sidecartest.MCPClient{mustGoAs(t, endpoint, false, alice.tok), mustGoAs(t, endpoint, true, alice.tok)}
		aliceClients = append(aliceClients, sidecartest.DialTSAs(t, endpoint, alice.tok.Value)...)
		bobClients := []sidecartest.MCPClient{mustGoAs(t, endpoint, false, bob.tok), mustGoAs(t, endpoint, true, bob.tok)}
		bobClients = append(bobClients, sidecartest.DialTSAs(t, endpoint, bob.tok.Value)...)
		for _, c := range append(aliceClients, bobClients...) {
			c.Bind(sidecartest.NbName, sidecartest.NbPath)
			c.Subscribe(sidecartest.NbURI)
		}
		// Each serves its user's notebook as the user's server has it.
		for _, tt := range []struct {
			who     *hubUser
			clients []sidecartest.MCPClient
		}{{alice, aliceClients}, {bob, bobClients}} {
			want := tt.who.py.Notebook("a", sidecartest.NbPath)
			for _, c := range tt.clients {
				sameNotebook(t, c, sidecartest.NbURI, want)
			}
		}
		for _, c := range append(aliceClients, bobClients...) {
			sidecartest.Drain(c, 700*time.Millisecond)
		}
		for _, tt := range []struct {
			who          *hubUser
			told, silent []sidecartest.MCPClient
		}{{alice, aliceClients, bobClients}, {bob, bobClients, aliceClients}, {alice, aliceClients, bobClients}} {
			want := editReal(t, tt.who)
			// The path from the user's server to its store is the real stack's: waited
			// for, not bounded (the sidecar's own bound is TestEndToEnd's).
			for _, c := range tt.told {
				sidecartest.Await(t, c, testenv.Wait, sidecartest.NbURI)
			}
			for _, c := range tt.silent {
				if n := sidecartest.Drain(c, time.Second); n != 0 {
					t.Fatalf("%s heard %d notifications of %s's edit", c.Name(), n, tt.who.name)
				}
			}
			// What a user reads is their own notebook.
			for _, c := range tt.told {
				sameNotebook(t, c, sidecartest.NbURI, want)
			}
		}
	})

	t.Run("another user's version is unknown", func(t *testing.T) {
		a, b := mustGoAs(t, endpoint, true, alice.tok), mustGoAs(t, endpoint, false, bob.tok)
		a.Bind(sidecartest.NbName, sidecartest.NbPath)
		b.Bind(sidecartest.NbName, sidecartest.NbPath)
		_, va := a.ReadVersioned(sidecartest.NbURI)
		_, vb := b.ReadVersioned(sidecartest.NbURI)
		if va == "" || vb == "" || va == vb {
			t.Fatalf("alice's version %q, bob's %q: want two, not the same", va, vb)
		}
		changes := func(c *sidecartest.GoClient, since string) map[string]any {
			var ans map[string]any
			if err := json.Unmarshal([]byte(c.Read(sidecartest.NbURI+"/changes?since="+since)), &ans); err != nil {
				t.Fatal(err)
			}
			return ans
		}
		if ans := changes(b, va); ans["status"] != "read_notebook" || ans["reason"] != "unknown_version" || ans["version"] != vb {
			t.Fatalf("bob asking since alice's version: %v", ans)
		}
		if ans := changes(a, va); ans["status"] != "ok" || ans["version"] != va {
			t.Fatalf("alice asking since her own version: %v", ans)
		}
	})

	t.Run("one inotify instance for every user's store", func(t *testing.T) {
		// The kernel bounds inotify instances per user (128 by default), not watches.
		if n := testenv.OpenFiles(t, sc.Cmd.Process.Pid, "inotify"); n != 1 {
			t.Fatalf("with alice and bob active the sidecar holds %d inotify instances, want 1", n)
		}
	})

	t.Run("isolation matrix", func(t *testing.T) {
		m := isolationMatrix(t, sc, endpoint, hub, alice, bob, hubCell)
		t.Logf("isolation matrix: %d own accesses served of %d; %d cross-user or unauthorized attempts refused of %d",
			m.served, m.own, m.refused, m.foreign)
		if m.served != m.own || m.refused != m.foreign {
			t.Fatalf("isolation matrix: %+v", m)
		}
	})

	t.Run("idle users are released", func(t *testing.T) {
		// Behind configurable-http-proxy a vanished client's stream can stay open
		// upstream (and mcp-go's DELETE carries no token), holding its user: this
		// check talks to a second hub-mode sidecar directly.
		dir := filepath.Join(root, "direct")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		direct := sidecartest.Launch(t, dir, strings.Replace(hubCfg, filepath.Join(root, "state"), filepath.Join(root, "state2"), 1), "serve")
		c, err := sidecartest.DialGoAs(t, direct.URL+"/services/mcp/mcp", true, "token "+alice.tok.Value)
		if err != nil {
			t.Fatal(err)
		}
		c.Bind(sidecartest.NbName, sidecartest.NbPath)
		if !strings.Contains(c.Read(sidecartest.NbURI), `"cells"`) {
			t.Fatal("alice's notebook not served directly")
		}
		c.Close()
		testenv.Eventually(t, testenv.Wait, "alice released after her last request (idle timeout 2s)",
			func() bool { return direct.Metric("jupyter_mcp_sidecar_hub_user_releases_total") >= 1 })
		if n := direct.Metric("jupyter_mcp_sidecar_hub_users_active"); n != 0 {
			t.Fatalf("%v users active after the release", n)
		}
		if code, body := direct.Get("/services/mcp/readyz"); code != http.StatusOK || body != "{\"ready\":true}\n" {
			t.Fatalf("/readyz under the prefix after the release: %d %s", code, body)
		}
		_, metrics := sc.Get("/metrics")
		for _, name := range []string{"alice", "bob", root} {
			if strings.Contains(metrics, name) {
				t.Fatalf("/metrics names %q", name)
			}
		}
	})
}

func mustGoAs(t *testing.T, url string, modern bool, tok jhubtest.Token) *sidecartest.GoClient {
	t.Helper()
	c, err := sidecartest.DialGoAs(t, url, modern, "token "+tok.Value)
	if err != nil {
		t.Fatalf("%s connects with their own token: %v", tok.User, err)
	}
	return c
}

// matrix counts the isolation checks.
type matrix struct{ own, served, foreign, refused int }

// isolationMatrix tries every surface with alice's own token, with bob's token on
// alice's notebooks and session, and with a token without the access scope, a revoked
// token and none at all.
// cell is the id of a cell of alice's notebook.
func isolationMatrix(t *testing.T, sc *sidecartest.Sidecar, endpoint string, hub *jhubtest.Hub, alice, bob *hubUser, cell string) matrix {
	var m matrix
	ownOK := func(what string, ok bool) {
		m.own++
		if ok {
			m.served++
		} else {
			t.Errorf("own access not served: %s", what)
		}
	}
	foreignRefused := func(what string, refused bool) {
		m.foreign++
		if refused {
			m.refused++
		} else {
			t.Errorf("cross-user or unauthorized attempt served: %s", what)
		}
	}
	ctx := sidecartest.WaitCtx(t, time.Minute)
	a := mustGoAs(t, endpoint, false, alice.tok)
	a.Bind("alice-only", sidecartest.NbPath)
	b := mustGoAs(t, endpoint, false, bob.tok)

	// Own: every surface.
	list, err := a.Client.ListResources(ctx, mcp.ListResourcesRequest{})
	ownOK("resources/list", err == nil && strings.Contains(fmt.Sprint(list), "notebook://alice-only"))
	for _, uri := range []string{"notebook://alice-only", sidecartest.CellURI("alice-only", cell), "capabilities://"} {
		_, err := readResource(ctx, a, uri)
		ownOK("read "+uri, err == nil)
	}
	ownOK("subscribe", subscribeErr(ctx, a, "notebook://alice-only") == nil)
	res, err := callToolAs(ctx, a, "list_notebooks", nil)
	ownOK("list_notebooks", err == nil && strings.Contains(res, "alice-only"))
	_ = testenv.Within(testenv.Wait, func() bool { // indexed after the debounce
		res, err = callToolAs(ctx, a, "search_notebooks", map[string]any{"query": "import"})
		return err == nil && strings.Contains(res, "notebook://alice-only/cells/")
	})
	ownOK("search_notebooks", err == nil && strings.Contains(res, "notebook://alice-only/cells/"))

	// Bob on alice's names, paths and session.
	list, err = b.Client.ListResources(ctx, mcp.ListResourcesRequest{})
	foreignRefused("resources/list shows alice's names", err == nil && !strings.Contains(fmt.Sprint(list), "alice-only"))
	for _, uri := range []string{"notebook://alice-only", sidecartest.CellURI("alice-only", cell), sidecartest.CellURI("alice-only", cell) + "/outputs/0"} {
		_, err := readResource(ctx, b, uri)
		foreignRefused("read "+uri, err != nil)
	}
	res, err = callToolAs(ctx, b, "list_notebooks", nil)
	foreignRefused("list_notebooks shows alice's names or paths", err == nil && !strings.Contains(res, "alice-only") && !strings.Contains(res, alice.home))
	res, err = callToolAs(ctx, b, "search_notebooks", map[string]any{"query": "import"})
	foreignRefused("search_notebooks finds alice's cells", err == nil && !strings.Contains(res, "alice-only") && !strings.Contains(res, alice.home))
	for _, p := range []string{"../alice/" + sidecartest.NbPath, filepath.Join(alice.home, sidecartest.NbPath)} {
		res, err = callToolAs(ctx, b, "use_notebook", map[string]any{"notebook_name": "stolen", "notebook_path": p})
		foreignRefused("use_notebook "+p, err != nil || strings.Contains(res, `"isError":true`) || !strings.Contains(res, "stolen"))
	}
	status, _ := sidecartest.RPCStatusAs(t, endpoint, a.Client.GetSessionId(), "token "+bob.tok.Value, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": map[string]any{"uri": "notebook://alice-only"}})
	foreignRefused("alice's session id with bob's token", status == http.StatusNotFound)

	// No access scope, revoked, none: nothing is served.
	carol := hub.Token(jhubtest.NoAccessUser)
	revoked := hub.Token(alice.name)
	hub.Revoke(revoked)
	// The token cache TTL (1 s) elapses, so that no answer cached before the revocation
	// still holds: elapsing time, not a wait.
	time.Sleep(1500 * time.Millisecond)
	for what, authz := range map[string]string{"no access scope": "token " + carol.Value, "revoked": "token " + revoked.Value, "no token": ""} {
		for _, modern := range []bool{false, true} {
			_, err := sidecartest.DialGoAs(t, endpoint, modern, authz)
			foreignRefused(fmt.Sprintf("%s connects (modern %v)", what, modern), err != nil)
		}
		status, _ := sidecartest.RPCStatusAs(t, endpoint, "", authz, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": map[string]any{"uri": "notebook://alice-only"}})
		foreignRefused(what+" reads", status == http.StatusUnauthorized || status == http.StatusForbidden)
	}
	return m
}

func readResource(ctx context.Context, g *sidecartest.GoClient, uri string) (*mcp.ReadResourceResult, error) {
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	return g.Client.ReadResource(ctx, req)
}

func subscribeErr(ctx context.Context, g *sidecartest.GoClient, uri string) error {
	req := mcp.SubscribeRequest{}
	req.Params.URI = uri
	//lint:ignore SA1019 the 2025-11-25 era is under test
	return g.Client.Subscribe(ctx, req)
}

func callToolAs(ctx context.Context, g *sidecartest.GoClient, name string, args map[string]any) (string, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := g.Client.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(res)
	return string(b), err
}
