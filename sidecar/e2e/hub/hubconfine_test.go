package hub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// TestHubModeConfinement runs the binary in hub mode behind a real Hub, reading every
// home as the systemd unit's CAP_DAC_READ_SEARCH lets it (here: root), and checks that
// what a user controls in their home leads it nowhere else (issue 29): alice's notebook
// file is a link to bob's notebook, newer than her room, so the sidecar would serve it
// from the file; mallory's store and file id database are links to bob's; eve's store is
// a hard link to bob's in a home she owns (made as root). alice is served her own room,
// never bob's file, and the sidecar logs why the file is not read; mallory and eve are
// told, with no path, why their notebooks cannot be served, and the operator gets one
// log line each; bob is served as ever. No log line names a user but the one debug line
// of each tenant's start that maps its pseudonym.
func TestHubModeConfinement(t *testing.T) {
	root := t.TempDir()
	port := testenv.FreePort(t)
	hub := jhubtest.StartWith(t, jhubtest.Options{ServiceURL: fmt.Sprintf("http://127.0.0.1:%d", port), Homes: filepath.Join(root, "home")})
	hub.AddUsers("mallory", "eve")
	home := func(user string) string { return filepath.Join(root, "home", user) }
	for _, u := range []string{"alice", "bob", "mallory", "eve"} {
		if err := os.MkdirAll(filepath.Join(home(u), filepath.Dir(sidecartest.NbPath)), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// alice's room holds the notebook; bob's, the notebook with c1 edited, and so does
	// his file, written after alice's last row.
	fx := sidecartest.LoadEventFixture(t)
	doc := ynotebook.New()
	if _, err := doc.Apply(fx.Initial); err != nil {
		t.Fatal(err)
	}
	aliceJSON := sidecartest.MustJSON(t, doc.Snapshot())
	if _, err := doc.Apply(fx.Edits["source-c1"]); err != nil {
		t.Fatal(err)
	}
	bobSnap := doc.Snapshot()
	bobJSON := sidecartest.MustJSON(t, bobSnap)
	sidecartest.StartWriter(t, filepath.Join(home("alice"), ".jupyter_ystore.db")).Write(fx.Initial)
	bw := sidecartest.StartWriter(t, filepath.Join(home("bob"), ".jupyter_ystore.db"))
	bw.Write(fx.Initial)
	bw.Write(fx.Edits["source-c1"])
	for _, u := range []string{"alice", "bob"} {
		sidecartest.CreateFileIDDB(t, filepath.Join(home(u), "file_id_manager.db"), filepath.Join(home(u), sidecartest.NbPath))
	}
	sidecartest.WriteNotebookFile(t, filepath.Join(home("bob"), sidecartest.NbPath), bobSnap)
	symlink(t, filepath.Join("..", "..", "bob", sidecartest.NbPath), filepath.Join(home("alice"), sidecartest.NbPath))
	symlink(t, filepath.Join("..", "bob", ".jupyter_ystore.db"), filepath.Join(home("mallory"), ".jupyter_ystore.db"))
	symlink(t, filepath.Join("..", "bob", "file_id_manager.db"), filepath.Join(home("mallory"), "file_id_manager.db"))
	asRoot := os.Getuid() == 0
	if asRoot {
		if err := os.Link(filepath.Join(home("bob"), ".jupyter_ystore.db"), filepath.Join(home("eve"), ".jupyter_ystore.db")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(home("eve"), 4242, 4242); err != nil {
			t.Fatal(err)
		}
		// bob's home is his own, as a real one is: his store, with two links now, is
		// still his (a root-owned one with two links would be refused: issue 39).
		chownTree(t, home("bob"), 4243)
	}

	sc := sidecartest.LaunchOn(t, root, port, hubConfig(hub.APIURL, root, "token_cache_ttl: 1s"), "serve")
	endpoint := hub.ServicePrefix() + "mcp"

	t.Run("alice's link to bob's notebook is not read", func(t *testing.T) {
		g := mustGoAs(t, endpoint, false, hub.Token("alice"))
		g.Bind("nb", sidecartest.NbPath)
		// Only alice's tenant is running: the first word on the file is hers.
		var seen []logLine
		testenv.Eventually(t, testenv.Wait, "the sidecar's first look at alice's notebook file", func() bool {
			seen = logLines(sc, func(l logLine) bool {
				return (l.Msg == "notebook file not read" || l.Msg == "notebook file read") && l.Path == sidecartest.NbPath
			})
			return len(seen) > 0
		})
		text, meta := g.ReadMeta("notebook://nb")
		if seen[0].Msg != "notebook file not read" || !strings.Contains(seen[0].Err, "outside the user's directory") {
			t.Errorf("alice's link to bob's notebook: %s", seen[0].raw)
		}
		if !sidecartest.JSONSame(text, aliceJSON) || meta[resources.SourceKey] != nil {
			t.Fatalf("alice reads %s with _meta %v, want her own room's %s", text, meta, aliceJSON)
		}
		if id := tenantOf(t, sc, "alice"); seen[0].Tenant != id {
			t.Fatalf("the line on alice's file is tenant %q's, want alice's %q", seen[0].Tenant, id)
		}
	})

	t.Run("bob is served", func(t *testing.T) {
		g := mustGoAs(t, endpoint, false, hub.Token("bob"))
		g.Bind("nb", sidecartest.NbPath)
		testenv.Eventually(t, testenv.Wait, "bob reads his notebook", func() bool { text, _ := g.ReadMeta("notebook://nb"); return sidecartest.JSONSame(text, bobJSON) })
	})

	refused := []struct{ user, tell string }{
		{"mallory", "your Y-store cannot be served: it leads outside your home directory"},
	}
	if asRoot {
		refused = append(refused, struct{ user, tell string }{"eve", "your Y-store cannot be served: it is not owned by you"})
	}
	for _, r := range refused {
		t.Run(r.user+" is refused", func(t *testing.T) {
			code, body := initialize(t, endpoint, hub.Token(r.user).Value)
			if code != http.StatusForbidden || strings.TrimSpace(body) != r.tell {
				t.Fatalf("%s's initialize: %d %q, want 403 %q", r.user, code, body, r.tell)
			}
			id := tenantOf(t, sc, r.user)
			refusals := func() int {
				return len(logLines(sc, func(l logLine) bool {
					return l.Msg == "a user's notebooks are not served: their files are refused" && l.Tenant == id && l.Level == "ERROR"
				}))
			}
			// The line is read from the process's output, which may come after the answer.
			testenv.Eventually(t, testenv.Wait, r.user+"'s refusal logged", func() bool { return refusals() > 0 })
			if n := refusals(); n != 1 {
				t.Fatalf("%d refusal lines for %s's tenant %s, want 1", n, r.user, id)
			}
		})
	}

	t.Run("no log line names a user", func(t *testing.T) { noLineNames(t, sc, "alice", "bob", "mallory", "eve") })
}

// noLineNames checks that no log line of sc names one of users (a JSON string or a path
// component) but the debug line of each tenant's start that maps its pseudonym.
func noLineNames(t *testing.T, sc *sidecartest.Sidecar, users ...string) {
	for _, u := range users {
		names := regexp.MustCompile(`["/]` + u + `["/]`)
		for _, l := range logLines(sc, func(l logLine) bool { return names.MatchString(l.raw) }) {
			if l.Msg != "tenant started" || l.Level != "DEBUG" {
				t.Errorf("a log line names %s: %s", u, l.raw)
			}
		}
	}
}

func symlink(t *testing.T, target, at string) {
	t.Helper()
	if err := os.Symlink(target, at); err != nil {
		t.Fatal(err)
	}
}

// logLine is one JSON log line of the sidecar, the fields the hub tests look at.
type logLine struct {
	Level, Msg, Tenant, User, Path, Err string
	raw                                 string
}

// logLines returns the sidecar's log lines that keep says to.
func logLines(sc *sidecartest.Sidecar, keep func(logLine) bool) []logLine {
	var out []logLine
	for raw := range strings.SplitSeq(sc.Logs.String(), "\n") {
		var l logLine
		if json.Unmarshal([]byte(raw), &l) != nil {
			continue
		}
		if l.raw = raw; keep(l) {
			out = append(out, l)
		}
	}
	return out
}

// tenantOf is user's pseudonym in the logs, as the debug line of the tenant's start says.
func tenantOf(t *testing.T, sc *sidecartest.Sidecar, user string) string {
	t.Helper()
	var id string
	testenv.Eventually(t, testenv.Wait, user+"'s tenant started", func() bool {
		ls := logLines(sc, func(l logLine) bool { return l.Msg == "tenant started" && l.User == user })
		if len(ls) > 0 {
			id = ls[0].Tenant
		}
		return id != ""
	})
	if strings.Contains(id, user) {
		t.Fatalf("%s's pseudonym %q names them", user, id)
	}
	return id
}

// initialize sends an MCP initialize with token and returns the answer's status and body.
func initialize(t *testing.T, endpoint, token string) (int, string) {
	t.Helper()
	a, err := mcpPost(http.DefaultClient, endpoint, "Bearer "+token, "", initializeBody)
	if err != nil {
		t.Fatal(err)
	}
	return a.Code, a.Body
}
