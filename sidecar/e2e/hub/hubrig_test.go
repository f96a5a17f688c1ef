package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/postgres"
)

// rigUser is one user of the rig: a store of their own written by the real
// pycrdt-store writer (the demo session's steps, each room at its own step), shipped
// into Postgres by a ship of their own.
type rigUser struct {
	name  string
	tok   jhubtest.Token
	auth  string // Authorization: token <the user's Hub token>
	w     sidecartest.Writer
	rooms []string // the store's rooms, nbJJ's at JJ
	uris  []string // notebook://nbJJ

	mu   sync.Mutex
	next []int // each room's next step
}

// newRigUser writes user's home (fileid database, bindings) and starts the writer of
// the user's store: preload writes its rooms, ship ships it.
func newRigUser(t *testing.T, root, name string, index, notebooks int, tok jhubtest.Token) *rigUser {
	u := &rigUser{name: name, tok: tok, auth: "token " + tok.Value}
	home := filepath.Join(root, "home", name)
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	u.w = sidecartest.StartWriter(t, filepath.Join(home, ".jupyter_ystore.db"))
	var ids []string
	for j := range notebooks {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", index, j)
		ids = append(ids, id)
		u.rooms = append(u.rooms, ".notebook:"+id+".y")
		u.uris = append(u.uris, fmt.Sprintf("notebook://nb%02d", j))
		u.next = append(u.next, sidecartest.Preloaded+(index*notebooks+j)*7%300) // rooms differ
	}
	nameNotebooks(t, root, name, ids)
	return u
}

// preload writes each room's steps up to its next.
func (u *rigUser) preload(steps []sidecartest.Step) {
	for j, room := range u.rooms {
		for _, s := range steps[:u.next[j]] {
			u.w.WriteRoom(room, s.Update)
		}
	}
}

// ship starts the ship of the user's store into the Postgres store, with the user as
// the owner.
func (u *rigUser) ship(t *testing.T, root, dsn, schema string) {
	dir := filepath.Join(root, "ship", u.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sidecartest.Launch(t, dir, fmt.Sprintf("store: {sqlite: {path: %q}}\nship: {source_id: %s, owner: %q, postgres: {dsn: %q, schema: %s}}\n",
		filepath.Join(root, "home", u.name, ".jupyter_ystore.db"), u.name+"-server", u.name, dsn, schema), "ship")
}

// claim takes the next step of room j and returns its update (false: the session is
// over for it).
func (u *rigUser) claim(steps []sidecartest.Step, j int) ([]byte, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := u.next[j]
	if k == len(steps) {
		return nil, false
	}
	u.next[j]++
	return steps[k].Update, true
}

// typeNext writes the next step into room j with the user's writer and returns its
// commit time (false: the session is over for it).
func (u *rigUser) typeNext(steps []sidecartest.Step, j int) (time.Time, bool) {
	update, ok := u.claim(steps, j)
	if !ok {
		return time.Time{}, false
	}
	_, at := u.w.WriteRoom(u.rooms[j], update)
	return at, true
}

// want is room j as the writer has written it.
func (u *rigUser) want(t *testing.T, steps []sidecartest.Step, j int) []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return sidecartest.MustJSON(t, steps[u.next[j]-1].After)
}

// rig is the Postgres hub rig: the users, their stores shipping into Postgres, the
// Hub, two hub-mode replicas and the balancer in front of them.
type rig struct {
	t                 *testing.T
	steps             []sidecartest.Step
	root, dsn, schema string
	lb                *balancer
	hub               *jhubtest.Hub
	users             []*rigUser
	replicas          []*sidecartest.Sidecar
	endpoint          string // the MCP endpoint through the balancer
}

// startRig starts a rig of nUsers users with notebooks notebooks each, the replicas'
// notifications configured as notifications (YAML flow).
func startRig(t *testing.T, nUsers, notebooks int, notifications string) *rig {
	t.Helper()
	rg := &rig{t: t, steps: sidecartest.Session(t), root: t.TempDir()}
	rg.dsn, rg.schema = sidecartest.InitPostgres(t)
	t.Setenv("JUPYTER_MCP_SIDECAR_LOG_LEVEL", "info") // a dozen processes at debug would be the load
	rg.lb = startBalancer(t)
	rg.hub = jhubtest.StartWith(t, jhubtest.Options{ServiceURL: rg.lb.URL, Homes: filepath.Join(rg.root, "home")})
	names := make([]string, nUsers)
	for i := range names {
		names[i] = fmt.Sprintf("rig%04d", i)
	}
	for i := 0; i < nUsers; i += 25 {
		rg.hub.AddUsers(names[i:min(i+25, nUsers)]...)
	}
	begin := time.Now()
	rg.users = make([]*rigUser, nUsers)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4) // the writers preload four at a time
	for i, name := range names {
		rg.users[i] = newRigUser(t, rg.root, name, i, notebooks, rg.hub.Token(name))
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			rg.users[i].preload(rg.steps)
		})
	}
	wg.Wait()
	for _, u := range rg.users {
		u.ship(t, rg.root, rg.dsn, rg.schema)
	}
	testenv.Eventually(t, 10*time.Minute, "every row shipped", func() bool { return rg.unshipped() == "" }, rg.unshipped)
	t.Logf("HUBRIG %d users × %d notebooks written and shipped in %v", nUsers, notebooks, time.Since(begin).Round(time.Millisecond))

	home := filepath.Join(rg.root, "home", "{username}")
	cfg := fmt.Sprintf(`hub:
  enabled: true
  api_url: %q
  service_name: %s
  stores: {backend: postgres, fileid_db: %q, root_dir: %q}
  idle_timeout: 10m
  state_dir: %q
store:
  postgres: {dsn: %q, schema: %s, poll_interval: 1s}
notifications: %s
`, rg.hub.APIURL, jhubtest.ServiceName, filepath.Join(home, "file_id_manager.db"), home, filepath.Join(rg.root, "state"), rg.dsn, rg.schema, notifications)
	rg.replicas = make([]*sidecartest.Sidecar, 2)
	for i := range rg.replicas {
		dir := filepath.Join(rg.root, fmt.Sprintf("replica%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		rg.replicas[i] = sidecartest.Launch(t, dir, cfg, "serve")
		rg.replicas[i].WaitHTTP("/services/mcp/readyz", http.StatusOK)
	}
	rg.lb.setBackends(t, rg.replicas[0].URL, rg.replicas[1].URL)
	// Clients reach the balancer as an ingress routing the service's prefix to it would;
	// E2E_HUBRIG_VIA=proxy sends them through the Hub's proxy first (docs/HUB.md "Several
	// replicas": it does not end a stream whose replica was killed).
	rg.endpoint = rg.lb.URL + "/services/mcp/mcp"
	if os.Getenv("E2E_HUBRIG_VIA") == "proxy" {
		rg.endpoint = rg.hub.ServicePrefix() + "mcp"
	}
	return rg
}

// unshipped says which rooms Postgres holds fewer or more rows of than their writer
// wrote ("": none).
func (rg *rig) unshipped() string {
	conn, err := pgx.Connect(context.Background(), rg.dsn)
	if err != nil {
		return err.Error()
	}
	defer conn.Close(context.Background())
	rs, err := conn.Query(context.Background(), `SELECT path, count(*) FROM `+pgx.Identifier{rg.schema, postgres.DefaultTable}.Sanitize()+` GROUP BY path`)
	if err != nil {
		return err.Error()
	}
	in := map[string]int{}
	var (
		path string
		n    int
	)
	if _, err := pgx.ForEachRow(rs, []any{&path, &n}, func() error { in[path] = n; return nil }); err != nil {
		return err.Error()
	}
	var out []string
	for _, u := range rg.users {
		u.mu.Lock()
		for j, room := range u.rooms {
			if in[room] != u.next[j] {
				out = append(out, fmt.Sprintf("%s room %d: %d rows in Postgres, %d written", u.name, j, in[room], u.next[j]))
			}
		}
		u.mu.Unlock()
	}
	return strings.Join(out, "; ")
}

// typeAll has every one of users type into their notebooks in turn, rate rows/s each,
// until stop returns; committed (when not nil) is told each row's room and commit time.
func (rg *rig) typeAll(users []*rigUser, rate int, committed func(u *rigUser, j int, at time.Time)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var typing sync.WaitGroup
	for _, u := range users {
		typing.Go(func() {
			tick := time.NewTicker(time.Second / time.Duration(rate))
			defer tick.Stop()
			for j := 0; ; j = (j + 1) % len(u.rooms) {
				select {
				case <-ctx.Done():
					return
				case <-tick.C: // the typist's pace
				}
				if at, ok := u.typeNext(rg.steps, j); ok && committed != nil {
					committed(u, j, at)
				}
			}
		})
	}
	return func() { cancel(); typing.Wait() }
}

// rigClients are a user's clients through the balancer.
type rigClients struct {
	reader  *sidecartest.GoClient // 2026-07-28: reads, stateless
	legacy  *sidecartest.GoClient // 2025-11-25: a session subscribed to the notebooks
	session string                // legacy's Mcp-Session-Id
	l       *listener             // 2026-07-28 subscriptions/listen
	replica int                   // where the balancer sends the user
}

// TestHubRig is the rig of issue 42 at CI size (E2E_HUBRIG_USERS users, 6, with
// E2E_HUBRIG_NOTEBOOKS notebooks each, 2, typing E2E_HUBRIG_RATE rows/s each, 10): each
// user's store is written by the real pycrdt-store writer and appended into one
// Postgres store by a ship of its own; two hub-mode replicas follow that store behind
// a balancer that keeps a session on its replica and a token on one replica, the real
// JupyterHub (and its proxy, in front of the balancer) checking the users' tokens.
// Both replicas serve every notebook as the writer wrote it. One replica is killed
// (SIGKILL) while users type: its users' 2026-07-28 listen streams end, and while they
// are away every one of their notebooks changes; listened for again through the
// balancer with the versions last heard, each notebook is told once at the version
// the survivor serves (none silently missed); its users' 2025-11-25 sessions get 404
// "session not found" and a new session is served. No row is lost in the store, and the
// survivor's /readyz reports its lag back under a second.
func TestHubRig(t *testing.T) {
	nUsers, notebooks := sidecartest.EnvInt(t, "E2E_HUBRIG_USERS", 6), sidecartest.EnvInt(t, "E2E_HUBRIG_NOTEBOOKS", 2)
	rate := sidecartest.EnvInt(t, "E2E_HUBRIG_RATE", 10)
	if nUsers < 2 || notebooks < 1 || rate < 1 {
		t.Fatalf("the rig needs 2 users, a notebook each and a rate; have %d, %d, %d", nUsers, notebooks, rate)
	}
	rg := startRig(t, nUsers, notebooks, "{debounce: 100ms, max_delay: 1s}")
	steps, users, replicas, lb, endpoint, root := rg.steps, rg.users, rg.replicas, rg.lb, rg.endpoint, rg.root
	var unbound atomic.Int64

	// Both replicas, asked directly, serve every user's notebooks as the writer wrote them.
	begin := time.Now()
	for _, r := range replicas {
		for _, u := range users {
			c := mustGoAs(t, r.URL+"/services/mcp/mcp", true, u.tok)
			for j, uri := range u.uris {
				readBound(t, c, uri, &unbound)
				sidecartest.EventuallyJSON(t, fmt.Sprintf("%s %s on %s", u.name, uri, r.URL), sidecartest.TryReadText(c, uri), u.want(t, steps, j))
			}
			c.Close()
		}
	}
	t.Logf("HUBRIG both replicas serve all %d notebooks as written (%v)", nUsers*notebooks, time.Since(begin).Round(time.Millisecond))

	// Each user's clients through the Hub's proxy and the balancer: users alternate
	// between the replicas.
	clients := make([]rigClients, nUsers)
	for i, u := range users {
		c := &clients[i]
		c.reader = mustGoAs(t, endpoint, true, u.tok)
		heard := map[string]string{}
		for _, uri := range u.uris {
			readBound(t, c.reader, uri, &unbound)
			_, heard[uri] = c.reader.ReadVersioned(uri)
		}
		c.legacy = mustGoAs(t, endpoint, false, u.tok)
		c.legacy.Subscribe(u.uris...)
		c.session = c.legacy.Client.GetSessionId()
		c.l = newListener(t, endpoint, u.auth, heard, nil)
		c.replica = lb.replicaOf(u.auth)
	}
	const victim = 1
	var victims, survivors []int
	for i, c := range clients {
		if c.replica == victim {
			victims = append(victims, i)
		} else {
			survivors = append(survivors, i)
		}
	}
	if len(victims) == 0 || len(survivors) == 0 {
		t.Fatalf("the balancer sent %d users to the victim and %d to the survivor; want both", len(victims), len(survivors))
	}

	// Every user types into every notebook, rate rows/s, until stopped.
	stopTyping := rg.typeAll(users, rate, nil)
	defer stopTyping()
	testenv.Eventually(t, testenv.Wait, "every listener hears the typing", func() bool {
		for _, c := range clients {
			if _, notes, _, _, _ := c.l.state(); notes == 0 {
				return false
			}
		}
		return true
	})

	// The victim is killed under the typing; its users' listen streams end.
	killed := time.Now()
	if err := replicas[victim].Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-replicas[victim].Done
	var detected time.Duration
	for _, i := range victims {
		detected = max(detected, testenv.Receive(t, testenv.Wait, users[i].name+"'s listen stream ends", clients[i].l.lost).Sub(killed))
	}
	// While they are away, each of their notebooks changes (the survivor, through the
	// balancer, serves another version than the one they heard last).
	testenv.Eventually(t, testenv.Wait, "the victims' notebooks change while they are away", func() bool {
		for _, i := range victims {
			heard, _, _, _, _ := clients[i].l.state()
			for _, uri := range users[i].uris {
				if _, v := clients[i].reader.ReadVersioned(uri); v == heard[uri] {
					return false
				}
			}
		}
		return true
	})
	stopTyping()

	// The survivor serves every notebook as finally written (every row shipped and
	// followed); the versions it serves now are the last.
	final := make([]map[string]string, nUsers)
	for i, u := range users {
		final[i] = map[string]string{}
		for j, uri := range u.uris {
			sidecartest.EventuallyJSON(t, u.name+" "+uri+" on the survivor", sidecartest.TryReadText(clients[i].reader, uri), u.want(t, steps, j))
			_, final[i][uri] = clients[i].reader.ReadVersioned(uri)
		}
	}

	// 2025-11-25: the victim's sessions are not found (404), and a new one is served;
	// the survivor's sessions go on.
	read, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "resources/read", "params": map[string]any{"uri": users[0].uris[0]}})
	post := func(i int) mcpAnswer {
		a, err := mcpPost(http.DefaultClient, endpoint, users[i].auth, clients[i].session, string(read))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, i := range victims {
		if a := post(i); a.Code != http.StatusNotFound || !strings.Contains(a.Body, "session not found: initialize a new session") {
			t.Errorf("%s's 2025-11-25 session after its replica was lost: %d %s; want 404 session not found", users[i].name, a.Code, a.Body)
		}
		again := mustGoAs(t, endpoint, false, users[i].tok)
		for j, uri := range users[i].uris {
			sidecartest.JSONEqual(t, users[i].name+"'s new session reads "+uri, readBound(t, again, uri, &unbound), users[i].want(t, steps, j))
		}
	}
	for _, i := range survivors {
		if a := post(i); a.Code != http.StatusOK || !strings.Contains(a.Body, `\"cells\"`) {
			t.Errorf("%s's 2025-11-25 session on the survivor: %d %.300s", users[i].name, a.Code, a.Body)
		}
	}

	// 2026-07-28: the victims listen again through the balancer, naming the versions they
	// heard last: each notebook is told once, at the version served now; the survivors'
	// streams never ended and heard the last versions live.
	released := time.Now()
	for _, i := range victims {
		close(clients[i].l.gate)
	}
	missed := func() (n int) {
		for i := range clients {
			heard, _, _, _, _ := clients[i].l.state()
			for uri, v := range final[i] {
				if heard[uri] != v {
					n++
				}
			}
		}
		return n
	}
	testenv.Eventually(t, testenv.Wait, "every listener at the versions served", func() bool { return missed() == 0 },
		func() string { return fmt.Sprintf("%d notebooks whose last change was not heard", missed()) })
	var told int
	var relisten time.Duration
	for _, i := range victims {
		_, _, resumes, toldAfter, at := clients[i].l.state()
		if resumes != 1 || toldAfter != len(users[i].uris) {
			t.Errorf("%s listened again %d times and was told %d times; want once, and once for each of %d notebooks", users[i].name, resumes, toldAfter, len(users[i].uris))
		}
		told += toldAfter
		relisten = max(relisten, at.Sub(released))
	}
	for _, i := range survivors {
		if _, _, resumes, _, _ := clients[i].l.state(); resumes != 0 {
			t.Errorf("%s's stream on the survivor was opened again %d times", users[i].name, resumes)
		}
	}

	// No row is lost: Postgres holds every row each writer wrote.
	if lost := rg.unshipped(); lost != "" {
		t.Error(lost)
	}
	rows := 0
	for _, u := range users {
		for _, n := range u.next {
			rows += n
		}
	}

	// The survivor's /readyz: ready, its lag back under a second.
	var ready struct {
		Loaded     bool    `json:"loaded"`
		Reachable  bool    `json:"store_reachable"`
		LagSeconds float64 `json:"lag_seconds"`
	}
	testenv.Eventually(t, testenv.Wait, "the survivor's /readyz: ready, lag under 1 s", func() bool {
		code, body := replicas[1-victim].Get("/services/mcp/readyz")
		ready.Loaded = false
		return code == http.StatusOK && json.Unmarshal([]byte(body), &ready) == nil && ready.Loaded && ready.Reachable && ready.LagSeconds < 1
	}, func() string { _, body := replicas[1-victim].Get("/services/mcp/readyz"); return body })
	if _, body := replicas[1-victim].Get("/services/mcp/readyz"); strings.Contains(body, "rig0") || strings.Contains(body, root) {
		t.Errorf("/readyz, which anyone reaches, names a user or a path: %s", body)
	}
	t.Logf("HUBRIG replica killed: %d of %d users on it; their streams ended %v after the kill; listened again, acknowledged and told within %v; %d notebooks told on resume, 0 missed; %d rows in Postgres, none lost; the survivor's lag %.3fs; load average %s",
		len(victims), nUsers, detected.Round(time.Millisecond), relisten.Round(time.Millisecond), told, rows, ready.LagSeconds, testenv.LoadAvg())
}
