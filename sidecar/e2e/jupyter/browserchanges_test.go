package jupyter

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/browser"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/changestest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// agentClient is a client of the agent's loop: mcp-go's or the official TypeScript SDK's.
type agentClient interface {
	Name() string
	Subscribe(uris ...string)
	Read(uri string) string
	ReadVersioned(uri string) (string, string)
	Updates() <-chan string
}

// agent is one client's loop: its last read of the notebook and that read's version;
// hears, if set, makes it wait for its client to be told of a change first (the lab's
// own clients' notifications are awaited by lab.step); sync, if set, waits until its
// client's sidecar serves what the page shows (a replica on Postgres lags the lab's).
type agent struct {
	c             agentClient
	last, version string
	hears         bool
	sync          func(t *testing.T, c agentClient)
}

// catchUp is the loop's step after a notification: ask what changed since the last
// version, apply it to the last read, and compare with a fresh read of the same version.
func (a *agent) catchUp(t *testing.T, uri, what string) {
	t.Helper()
	if a.hears {
		testenv.Receive(t, testenv.Wait, a.c.Name()+" told of the change", a.c.Updates())
		for len(a.c.Updates()) > 0 {
			<-a.c.Updates()
		}
	}
	if a.sync != nil {
		a.sync(t, a.c)
	}
	for range 20 { // the notebook may move on between the two reads: ask again
		body := a.c.Read(uri + "/changes?since=" + url.QueryEscape(a.version))
		ans, err := changestest.Decode([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		fresh, v := a.c.ReadVersioned(uri)
		if ans.Version != v {
			continue
		}
		got, err := changestest.Apply([]byte(a.last), ans)
		if err != nil {
			t.Fatalf("%s, %s: %v: %s", what, a.c.Name(), err, body)
		}
		if want, _ := changestest.Canonical([]byte(fresh)); !bytes.Equal(got, want) {
			t.Fatalf("%s, %s: changes since %s applied:\n%s\nfresh read:\n%s", what, a.c.Name(), a.version, got, want)
		}
		a.last, a.version = fresh, v
		return
	}
	t.Fatalf("%s, %s: the notebook never held still for a changes read and a read", what, a.c.Name())
}

// TestJupyterLabChanges is a person editing in JupyterLab in Chromium while agents of
// both eras (mcp-go's and the official TypeScript SDK's) run the README's loop: after
// each step, heard and served as the page shows it, what changed since each agent's last
// version, applied to its last read, equals a fresh read. Steps insert, type, move,
// delete, retype, run cells (outputs) and undo, chosen at random; BROWSER_CHANGES_DURATION
// (for example 2m) runs them that long, else a short round of each.
func TestJupyterLabChanges(t *testing.T) {
	jupytertest.Need(t)
	browser.Need(t)
	l := startLab(t, map[string]string{changesPath: changesNotebook}, map[string]string{changesName: changesPath}, "")
	var agents []*agent
	for _, c := range l.subs {
		agents = append(agents, &agent{c: c})
	}
	for _, c := range sidecartest.DialTSAs(t, l.sc.MCPURL(), sidecartest.Token) {
		c.Subscribe(changesURI)
		agents = append(agents, &agent{c: c.(agentClient), hears: true})
	}
	l.runChanges(t, agents, nil)
}

// TestJupyterLabChangesAcrossReplicas is TestJupyterLabChanges's loop with the official
// TypeScript SDK's clients (both eras) of two sidecars following one Postgres store, which
// the person's server's store is shipped to (ship): at each step every agent asks the
// other replica than the one it read last what changed since its version, and halfway
// one replica restarts and its agents dial it again, keeping their versions.
func TestJupyterLabChangesAcrossReplicas(t *testing.T) {
	jupytertest.Need(t)
	browser.Need(t)
	dsn, schema := sidecartest.InitPostgres(t)
	l := startLab(t, map[string]string{changesPath: changesNotebook}, map[string]string{changesName: changesPath}, "")
	sidecartest.Launch(t, t.TempDir(), fmt.Sprintf("store: {sqlite: {path: %q}}\nship: {source_id: lab, postgres: {dsn: %q, schema: %s}}\n",
		l.srv.StorePath, dsn, schema), "ship")
	cfg := fmt.Sprintf("store:\n  backend: postgres\n  postgres: {dsn: %q, schema: %s}\nfileid: {db_path: %q, root_dir: %q}\nnotebooks: {%s: %q}\n",
		dsn, schema, l.srv.FileIDPath, l.srv.Root, changesName, changesPath)
	dirs := [2]string{t.TempDir(), t.TempDir()}
	var replicas [2]*sidecartest.Sidecar
	var clients [2][]sidecartest.MCPClient // each replica's, one an era
	dial := func(r int) {
		clients[r] = sidecartest.DialTSAs(t, replicas[r].MCPURL(), sidecartest.Token)
		if clients[r] == nil {
			t.Skip("no TypeScript clients")
		}
		for _, c := range clients[r] {
			c.Subscribe(changesURI)
		}
	}
	for r := range replicas {
		replicas[r] = sidecartest.Launch(t, dirs[r], cfg, "serve")
		replicas[r].WaitHTTP("/readyz", http.StatusOK)
		dial(r)
	}
	// An agent waits until its replica serves what the lab's sidecar does (the page).
	served := func(t *testing.T, c agentClient) {
		t.Helper()
		want, _ := changestest.Canonical([]byte(l.subs[0].Read(changesURI)))
		testenv.Eventually(t, testenv.Wait, c.Name()+" on a replica at the page's step", func() bool {
			got, _ := changestest.Canonical([]byte(c.Read(changesURI)))
			return bytes.Equal(got, want)
		})
	}
	agents := make([]*agent, len(clients[0]))
	on := make([]int, len(agents)) // the replica each agent read last
	for i := range agents {
		agents[i] = &agent{c: clients[0][i].(agentClient), hears: true, sync: served}
	}
	l.runChanges(t, agents, func(step, steps int) {
		if step == steps/2 {
			r := 0
			replicas[r].Stop()
			replicas[r] = sidecartest.Launch(t, dirs[r], cfg, "serve")
			replicas[r].WaitHTTP("/readyz", http.StatusOK)
			dial(r)
			t.Logf("replica %d restarted before step %d", r, step)
		}
		for i, a := range agents {
			on[i] = 1 - on[i]
			a.c = clients[on[i]][i].(agentClient)
		}
	})
}

// The notebook the changes tests edit.
const (
	changesPath, changesName = "agent.ipynb", "agent"
	changesURI               = "notebook://" + changesName
)

var changesNotebook = jupytertest.NotebookJSON([2]string{"a-1", "x = 1"}, [2]string{"a-2", "print(x)"}, [2]string{"a-3", "y = 2"})

// runChanges opens the changes notebook in page "ann" and runs the person's steps; after
// each, every agent catches up. before, if set, is called before each step with its
// number and the number of steps of a short run.
func (l *lab) runChanges(t *testing.T, agents []*agent, before func(step, steps int)) {
	t.Helper()
	const p, name = changesPath, changesName
	uri := changesURI
	l.do(t, map[string]any{"op": "open", "page": "ann", "path": p})
	cs := l.samePage(t, name, "ann", p)
	for _, a := range agents {
		if a.sync != nil {
			a.sync(t, a.c)
		}
		a.last, a.version = a.c.ReadVersioned(uri)
		for a.hears && len(a.c.Updates()) > 0 { // told before its first read
			<-a.c.Updates()
		}
	}
	page := func(op string, args map[string]any) map[string]any {
		cmd := map[string]any{"op": op, "page": "ann", "path": p}
		for k, v := range args {
			cmd[k] = v
		}
		return cmd
	}
	sel := func(i int) map[string]any { return page("select", map[string]any{"index": i}) }
	keys := func(k ...string) map[string]any { return page("keys", map[string]any{"keys": k}) }
	// The steps, each given the page's cells before it; nil when it cannot apply.
	steps := []struct {
		what string
		cmds func(rng *rand.Rand, cs []pageCell) []map[string]any
	}{
		{"type", func(rng *rand.Rand, cs []pageCell) []map[string]any {
			return []map[string]any{page("type", map[string]any{"index": rng.IntN(len(cs)), "text": " # é日本", "delay": 20})}
		}},
		{"insert below and type", func(rng *rand.Rand, cs []pageCell) []map[string]any {
			i := rng.IntN(len(cs))
			return []map[string]any{sel(i), keys("b"), page("type", map[string]any{"index": i + 1, "text": fmt.Sprintf("z = %d", rng.IntN(1000)+1), "delay": 20})}
		}},
		{"move up", func(rng *rand.Rand, cs []pageCell) []map[string]any {
			if len(cs) < 2 {
				return nil
			}
			return []map[string]any{sel(1 + rng.IntN(len(cs)-1)), keys("Control+Shift+ArrowUp")}
		}},
		{"delete", func(rng *rand.Rand, cs []pageCell) []map[string]any {
			if len(cs) < 3 {
				return nil
			}
			return []map[string]any{sel(rng.IntN(len(cs))), keys("d", "d")}
		}},
		{"run", func(rng *rand.Rand, cs []pageCell) []map[string]any {
			i := rng.IntN(len(cs))
			if cs[i].CellType != "code" {
				return nil
			}
			return []map[string]any{sel(i), keys("Escape", "Control+Enter"), page("wait_idle", nil)}
		}},
		{"to markdown", func(rng *rand.Rand, cs []pageCell) []map[string]any {
			i := rng.IntN(len(cs))
			if cs[i].CellType != "code" {
				return nil
			}
			return []map[string]any{sel(i), keys("m")}
		}},
		{"to code", func(rng *rand.Rand, cs []pageCell) []map[string]any {
			i := rng.IntN(len(cs))
			if cs[i].CellType == "code" {
				return nil
			}
			return []map[string]any{sel(i), keys("y")}
		}},
		{"notebook metadata", func(rng *rand.Rand, cs []pageCell) []map[string]any {
			return []map[string]any{page("set_metadata", map[string]any{"key": "agent_round", "value": time.Now().UnixNano()})}
		}},
	}
	rng := rand.New(rand.NewPCG(41, uint64(time.Now().UnixNano())))
	long := envDuration(t, "BROWSER_CHANGES_DURATION", 0)
	end := time.Now().Add(long)
	done := 0
	for round := 0; ; round++ {
		st := steps[round%len(steps)]
		if long > 0 {
			if time.Now().After(end) {
				break
			}
			st = steps[rng.IntN(len(steps))]
		} else if round == 2*len(steps) {
			break
		}
		cmds := st.cmds(rng, cs)
		if cmds == nil {
			continue
		}
		if before != nil {
			before(done, 2*len(steps))
		}
		cs = l.step(t, name, "ann", p, cmds...)
		for _, a := range agents {
			a.catchUp(t, uri, st.what)
		}
		done++
	}
	t.Logf("%d steps, each caught up by %d agents", done, len(agents))
	if done < len(steps) {
		t.Fatalf("only %d steps changed the notebook", done)
	}
}
