package hub

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jhubtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// TestHubModeHardLinks (issue 39, item 8): every file opened for a user is checked on
// the open descriptor to be theirs, and a hard link keeps its file's owner. alice's
// notebook file is a hard link to bob's (bob's uid, newer than her room): she is served
// her own room, and the sidecar logs why the file is not read. mallory's own WAL-mode
// store has a -wal that is a hard link to bob's live WAL: none of bob's rooms is listed
// or read to her, and bob's WAL keeps his uid (SQLite run as root gives a WAL it opens
// the database's owner).
func TestHubModeHardLinks(t *testing.T) {
	root := t.TempDir()
	port := testenv.FreePort(t)
	hub := jhubtest.StartWith(t, jhubtest.Options{ServiceURL: fmt.Sprintf("http://127.0.0.1:%d", port), Homes: filepath.Join(root, "home")})
	hub.AddUsers("mallory")
	h := newConfineHomes(t, root, "alice")
	ownJSON, bobJSON := sidecartest.MustJSON(t, h.own), sidecartest.MustJSON(t, h.bob)
	nb := func(u string) string { return filepath.Join(h.work(u), workNb) }
	if err := os.Remove(nb("alice")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(nb("bob"), nb("alice")); err != nil {
		t.Fatal(err)
	}

	// bob's store, live in WAL mode: every page in the WAL, his connection open.
	bobStore := filepath.Join(h.home("bob"), ".jupyter_ystore.db")
	live, err := sql.Open("sqlite", bobStore+"?_pragma=journal_mode(wal)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Close() })
	live.SetMaxOpenConns(1)
	if _, err := live.Exec("VACUUM"); err != nil {
		t.Fatal(err)
	}
	// mallory's own store, in WAL mode, holds none of bob's rooms; its -wal is bob's,
	// linked by root (or by her where fs.protected_hardlinks is 0).
	h.uids["mallory"] = testenv.Stranger + 9
	if err := os.MkdirAll(h.work("mallory"), 0o755); err != nil {
		t.Fatal(err)
	}
	malloryStore := filepath.Join(h.home("mallory"), ".jupyter_ystore.db")
	own, err := sql.Open("sqlite", malloryStore+"?_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.Exec("CREATE TABLE mallory(a)"); err != nil {
		t.Fatal(err)
	}
	if err := own.Close(); err != nil {
		t.Fatal(err)
	}
	// Her file id database names the id of bob's room (she can write what she likes).
	sidecartest.CreateFileIDDB(t, filepath.Join(h.home("mallory"), "file_id_manager.db"), nb("mallory"))
	h.chown(t, "mallory")
	h.chown(t, "bob")
	if err := os.Link(bobStore+"-wal", malloryStore+"-wal"); err != nil {
		t.Fatal(err)
	}

	sc := launchConfined(t, hub, h, port)
	endpoint := hub.ServicePrefix() + "mcp"

	t.Run("alice's hard link to bob's notebook is not read", func(t *testing.T) {
		g := mustGoAs(t, endpoint, true, hub.Token("alice"))
		g.Bind("s", workNb)
		var seen []logLine
		testenv.Eventually(t, testenv.Wait, "the sidecar's first look at alice's notebook file", func() bool {
			seen = logLines(sc, func(l logLine) bool {
				return (l.Msg == "notebook file not read" || l.Msg == "notebook file read") && l.Path == workNb
			})
			return len(seen) > 0
		})
		if seen[0].Msg != "notebook file not read" || !strings.Contains(seen[0].Err, "not owned by the user") {
			t.Errorf("alice's hard link to bob's notebook: %s", seen[0].raw)
		}
		if text := g.Read("notebook://s"); !sidecartest.JSONSame(text, ownJSON) {
			t.Fatalf("alice reads %s, want her own room's %s (bob's is %s)", text, ownJSON, bobJSON)
		}
	})

	t.Run("mallory's WAL hard-linked to bob's lists nothing of his", func(t *testing.T) {
		defer func() {
			if fi, err := os.Stat(bobStore + "-wal"); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(h.uids["bob"]) {
				t.Errorf("bob's WAL after mallory's tenant read her store: %v; want still bob's uid %d", err, h.uids["bob"])
			}
		}()
		g, err := sidecartest.DialGoAs(t, endpoint, true, "token "+hub.Token("mallory").Value)
		if err != nil {
			return // refused outright: nothing of bob's either
		}
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Wait)
		defer cancel()
		// Her tenant has made its first read of the store (it is served after it).
		list, err := g.Client.ListResources(ctx, mcp.ListResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Resources {
			if strings.HasPrefix(r.URI, "notebook") {
				t.Errorf("mallory is listed a notebook: %+v", r)
			}
		}
		res, err := callToolAs(ctx, g, "list_notebooks", nil)
		t.Logf("mallory's list_notebooks: %s", res)
		if err == nil && (strings.Contains(res, workNb) || strings.Contains(res, ".notebook:")) {
			t.Errorf("mallory's list_notebooks shows bob's room: %s", res)
		}
		if text, _ := readAs(t, endpoint, hub.Token("mallory")); sidecartest.JSONSame(text, bobJSON) {
			t.Errorf("mallory reads bob's notebook: %s", text)
		}
	})

	t.Run("no log line names a user", func(t *testing.T) { noLineNames(t, sc, "alice", "mallory", "bob") })
}
