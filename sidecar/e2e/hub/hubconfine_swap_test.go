package hub

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// workNb is the notebook's path under a user's root directory, home/{username}/work.
const workNb = "analysis.ipynb"

// confineHomes are the homes of a confinement test under root/home, root's, each user's
// own (their uid): every user's root directory is home/{username}/work, as in
// docker-stacks, and holds workNb.
type confineHomes struct {
	root string
	uids map[string]int
	own  *ynotebook.Snapshot // every user's notebook but bob's: the fixture's first state
	bob  *ynotebook.Snapshot // bob's: c1 edited
}

func (h confineHomes) home(u string) string { return filepath.Join(h.root, "home", u) }
func (h confineHomes) work(u string) string { return filepath.Join(h.home(u), "work") }

// newConfineHomes writes each user's store (their room of the notebook), file id database
// and notebook file; bob's room and file hold his edit, his file written after every
// other user's rows, so a sidecar that read it for them would serve it from the file.
// Each home is then given its user's uid, as a real home is.
func newConfineHomes(t *testing.T, root string, users ...string) confineHomes {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("homes of several owners need root to make (chown)")
	}
	fx := sidecartest.LoadEventFixture(t)
	doc := ynotebook.New()
	if _, err := doc.Apply(fx.Initial); err != nil {
		t.Fatal(err)
	}
	h := confineHomes{root: root, uids: map[string]int{}, own: doc.Snapshot()}
	if _, err := doc.Apply(fx.Edits["source-c1"]); err != nil {
		t.Fatal(err)
	}
	h.bob = doc.Snapshot()
	for i, u := range append(users, "bob") {
		h.uids[u] = testenv.Stranger + 1 + i
		if err := os.MkdirAll(h.work(u), 0o755); err != nil {
			t.Fatal(err)
		}
		w := sidecartest.StartWriter(t, filepath.Join(h.home(u), ".jupyter_ystore.db"))
		w.Write(fx.Initial)
		sidecartest.CreateFileIDDB(t, filepath.Join(h.home(u), "file_id_manager.db"), filepath.Join(h.work(u), workNb))
		if u == "bob" {
			w.Write(fx.Edits["source-c1"])
			continue
		}
		sidecartest.WriteNotebookFile(t, filepath.Join(h.work(u), workNb), h.own)
	}
	sidecartest.WriteNotebookFile(t, filepath.Join(h.work("bob"), workNb), h.bob)
	for u := range h.uids {
		h.chown(t, u)
	}
	return h
}

// chown gives everything in u's home to u.
func (h confineHomes) chown(t *testing.T, u string) { chownTree(t, h.home(u), h.uids[u]) }

// chownTree gives dir and everything in it to uid.
func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// launchConfined starts the sidecar in hub mode on the homes: root_dir
// home/{username}/work, notebook files polled every 100 ms, idle users released after 2 s.
func launchConfined(t *testing.T, hub *jhubtest.Hub, h confineHomes, port int) *sidecartest.Sidecar {
	t.Helper()
	home := filepath.Join(h.root, "home", "{username}")
	cfg := hubConfig(hub.APIURL, h.root, "token_cache_ttl: 1s", "idle_timeout: 2s")
	cfg = strings.Replace(cfg, fmt.Sprintf("root_dir: %q", home), fmt.Sprintf("root_dir: %q", filepath.Join(home, "work")), 1)
	if !strings.Contains(cfg, "/work\"") {
		t.Fatalf("root_dir not set in %s", cfg)
	}
	cfg += "ondisk:\n  poll_interval: 100ms\n"
	return sidecartest.LaunchOn(t, h.root, port, cfg, "serve")
}

// readAs connects as tok's user, binds s to the notebook and reads it: the text, or
// the error of the first step refused.
func readAs(t *testing.T, endpoint string, tok jhubtest.Token) (string, error) {
	return readPathAs(t, endpoint, tok, workNb)
}

// readPathAs is readAs of the notebook at path under the user's root directory.
func readPathAs(t *testing.T, endpoint string, tok jhubtest.Token, path string) (string, error) {
	g, err := sidecartest.DialGoAs(t, endpoint, true, "token "+tok.Value)
	if err != nil {
		return "", err
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Wait)
	defer cancel()
	if res, err := callToolAs(ctx, g, "use_notebook", map[string]any{"notebook_name": "s", "notebook_path": path}); err != nil || strings.Contains(res, `"isError":true`) {
		return "", fmt.Errorf("use_notebook: %v %s", err, res)
	}
	return g.TryRead("notebook://s")
}

// TestHubModeRootSwap (issue 39, item 7): with root_dir home/{username}/work, once
// mallory's tenant is up she replaces her work directory, in a home she owns, by a link
// to bob's. Her next reads are refused (403), never bob's notebook; the swap is counted
// and logged without her name; after her tenant is released a new one is refused at
// once (a link at start). Then eve swaps hers in a loop while reading: every read is
// her own notebook or refused, never bob's.
func TestHubModeRootSwap(t *testing.T) {
	root := t.TempDir()
	port := testenv.FreePort(t)
	hub := jhubtest.StartWith(t, jhubtest.Options{ServiceURL: fmt.Sprintf("http://127.0.0.1:%d", port), Homes: filepath.Join(root, "home")})
	hub.AddUsers("mallory", "eve")
	h := newConfineHomes(t, root, "mallory", "eve")
	sc := launchConfined(t, hub, h, port)
	endpoint := hub.ServicePrefix() + "mcp"
	ownJSON, bobJSON := sidecartest.MustJSON(t, h.own), sidecartest.MustJSON(t, h.bob)
	swaps := func() float64 { return sc.Metric("jupyter_mcp_sidecar_hub_directory_swaps_total") }
	swap := func(u string) { // her work directory aside, a link to bob's in its place
		if err := os.Rename(h.work(u), h.work(u)+".real"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "bob", "work"), h.work(u)); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(h.work(u), h.uids[u], h.uids[u]); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("mallory swaps her work directory once", func(t *testing.T) {
		text, err := readAs(t, endpoint, hub.Token("mallory"))
		if err != nil || !sidecartest.JSONSame(text, ownJSON) {
			t.Fatalf("before the swap mallory reads %s, %v; want her own %s", text, err, ownJSON)
		}
		before := swaps()
		swap("mallory")
		if b, err := os.ReadFile(filepath.Join(h.work("mallory"), workNb)); err != nil || !sidecartest.JSONSame(string(b), bobJSON) {
			t.Fatalf("the swapped path reads %s, %v: the test does not swap", b, err)
		}
		// The next reads: hers (from memory, before the sidecar opens a file) until the
		// swap is found, then refused; never bob's.
		var refused error
		testenv.Eventually(t, testenv.Wait, "mallory's reads refused after the swap", func() bool {
			text, err := readAs(t, endpoint, hub.Token("mallory"))
			if sidecartest.JSONSame(text, bobJSON) {
				t.Fatalf("after the swap mallory reads bob's notebook: %s", text)
			}
			refused = err
			return err != nil
		})
		if code, body := initialize(t, endpoint, hub.Token("mallory").Value); code != http.StatusForbidden ||
			!strings.Contains(body, "replaced after the server opened it") && !strings.Contains(body, "leads outside your home directory") {
			t.Errorf("after the swap (%v) mallory's initialize: %d %q, want 403 and why", refused, code, body)
		}
		if got := swaps(); got <= before {
			t.Errorf("hub_directory_swaps_total %v, want more than %v", got, before)
		}
		id := tenantOf(t, sc, "mallory")
		testenv.Eventually(t, testenv.Wait, "the swap logged for mallory's tenant", func() bool {
			return len(logLines(sc, func(l logLine) bool {
				return strings.HasPrefix(l.Msg, "a user's directory was replaced") && l.Tenant == id && l.Level == "ERROR"
			})) == 1
		})
		// Released (a swapped tenant is at the next idle check), she is refused at start:
		// her root directory is a link.
		testenv.Eventually(t, testenv.Wait, "mallory refused at her tenant's start", func() bool {
			code, body := initialize(t, endpoint, hub.Token("mallory").Value)
			return code == 403 && strings.Contains(body, "leads outside your home directory")
		})
	})

	t.Run("eve swaps hers in a loop while reading", func(t *testing.T) {
		if text, err := readAs(t, endpoint, hub.Token("eve")); err != nil || !sidecartest.JSONSame(text, ownJSON) {
			t.Fatalf("before the swaps eve reads %s, %v; want her own", text, err)
		}
		before := swaps()
		var stop atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			for !stop.Load() {
				// Errors are the readers' business: the loop only swaps, and ends with
				// her directory in place.
				_ = os.Rename(h.work("eve"), h.work("eve")+".real")
				_ = os.Symlink(filepath.Join("..", "bob", "work"), h.work("eve"))
				time.Sleep(time.Millisecond) // the swapped state lasts long enough to be met
				_ = os.Remove(h.work("eve"))
				_ = os.Rename(h.work("eve")+".real", h.work("eve"))
			}
		}()
		seen := map[string]int{}
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; i < 40 && time.Now().Before(deadline); i++ {
			text, err := readAs(t, endpoint, hub.Token("eve"))
			switch {
			case sidecartest.JSONSame(text, bobJSON):
				stop.Store(true)
				<-done
				t.Fatalf("read %d: eve reads bob's notebook", i)
			case err != nil:
				seen["refused"]++
			case sidecartest.JSONSame(text, ownJSON):
				seen["her own"]++
			default:
				seen["other"]++
				t.Errorf("read %d: eve reads %s", i, text)
			}
		}
		stop.Store(true)
		<-done
		t.Logf("eve's reads while swapping: %v; swaps found: %v", seen, swaps()-before)
		if swaps() == before && seen["refused"] == 0 {
			t.Fatal("no swap was ever met: the loop did not race the reads")
		}
	})

	t.Run("no log line names a user", func(t *testing.T) { noLineNames(t, sc, "mallory", "eve", "bob") })
}
