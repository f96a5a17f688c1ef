package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite/sqlitetest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/yjstest"
)

// readIn reads uri, failing t (which may be a subtest) if the read fails.
func readIn(t *testing.T, c *sidecartest.GoClient, uri string) string {
	t.Helper()
	text, err := c.TryRead(uri)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// startServing writes the first preloaded session steps into a new store and starts
// the sidecar on it, ready.
func startServing(t *testing.T) (steps []sidecartest.Step, store string, w sidecartest.Writer, sc *sidecartest.Sidecar) {
	t.Helper()
	steps = sidecartest.Session(t)
	dir := t.TempDir()
	store = filepath.Join(dir, ".jupyter_ystore.db")
	w = sidecartest.StartWriter(t, store)
	for _, s := range steps[:sidecartest.Preloaded] {
		w.Write(s.Update)
	}
	sc = sidecartest.StartSidecar(t, dir, sidecartest.Options{})
	sc.WaitHTTP("/readyz", http.StatusOK)
	return steps, store, w, sc
}

// A store truncated, or overwritten with garbage, in place is not ready for as long as
// it is so, the last good notebook stays served meanwhile, and the good file copied
// back in place is noticed by the sidecar itself, with no writer commit.
func TestDamagedStore(t *testing.T) {
	steps, store, w, sc := startServing(t)
	c := sidecartest.DialGo(t, sc.MCPURL(), true)
	c.Bind(sidecartest.NbName, sidecartest.NbPath)
	want := sidecartest.MustJSON(t, steps[sidecartest.Preloaded-1].After)
	sidecartest.JSONEqual(t, "notebook before the damage", c.Read(sidecartest.NbURI), want)
	good, err := os.ReadFile(store)
	if err != nil {
		t.Fatal(err)
	}

	for _, d := range []struct {
		name   string
		damage func()
	}{
		{"truncated", func() {
			if err := os.Truncate(store, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage over the table pages", func() {
			// Page 1 (the header and the schema) stays; every later page is overwritten.
			garbage := bytes.Repeat([]byte{0xa5}, len(good)-4096)
			sqlitetest.WriteInPlace(t, store, append(good[:4096:4096], garbage...))
		}},
		{"garbage over the header", func() {
			sqlitetest.WriteInPlace(t, store, append(bytes.Repeat([]byte{0x5a}, 100), good[100:]...))
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			// A write in the clock tick of the last read, of the same size and header,
			// cannot be told from no write by the file's metadata: the clock moves on
			// (elapsing time, not a wait).
			time.Sleep(20 * time.Millisecond)
			d.damage()
			sidecartest.WaitStatus(t, sc, "/readyz", http.StatusServiceUnavailable)
			// An observation window, not a wait: the sidecar counts none of its polls for
			// a barrier, so the damaged store is watched for two seconds (four polls at
			// poll_interval 500ms, and any file event), ten observations a second.
			for range 20 {
				if code, body := sc.Get("/readyz"); code != http.StatusServiceUnavailable {
					t.Fatalf("damaged store: /readyz %d %s", code, body)
				}
				sidecartest.JSONEqual(t, "notebook while the store is damaged", readIn(t, c, sidecartest.NbURI), want)
				time.Sleep(100 * time.Millisecond) // the pace of the observations
			}
			sqlitetest.WriteInPlace(t, store, good)
			sidecartest.WaitStatus(t, sc, "/readyz", http.StatusOK)
			sidecartest.JSONEqual(t, "notebook after the restore", readIn(t, c, sidecartest.NbURI), want)
		})
	}

	t.Run("the writer goes on", func(t *testing.T) {
		c.Subscribe(sidecartest.NbURI)
		i := sidecartest.Preloaded
		for ; !sidecartest.Visible(steps[sidecartest.Preloaded : i+1]); i++ {
		}
		for _, s := range steps[sidecartest.Preloaded : i+1] {
			w.Write(s.Update)
		}
		sidecartest.Await(t, c, testenv.Wait, sidecartest.NbURI)
		sidecartest.EventuallyJSON(t, "notebook after the restore and a write", func() string { return readIn(t, c, sidecartest.NbURI) }, sidecartest.MustJSON(t, steps[i].After))
		sidecartest.WaitStatus(t, sc, "/readyz", http.StatusOK)
	})
}

// A room degraded by an undecodable row is ready again, without a restart, once that row
// is no longer in the store: squashed away, deleted, or the file replaced.
func TestDegradedClears(t *testing.T) {
	const bad = ".notebook:9d1c7a52-0000-4000-8000-000000000bad.y"
	steps, store, w, sc := startServing(t)
	good := base64.StdEncoding.EncodeToString(steps[0].Update)
	w.Send(map[string]any{"op": "write", "room": bad, "update": good})
	corrupt := func(t *testing.T) sqlitetest.Reply {
		t.Helper()
		r := w.Send(map[string]any{"op": "write", "room": bad, "update": base64.StdEncoding.EncodeToString([]byte{1, 1, 0xff, 0xff, 0xff})})
		sidecartest.WaitStatus(t, sc, "/readyz", http.StatusServiceUnavailable)
		_, body := sc.Get("/readyz")
		var ready struct {
			Degraded []string `json:"degraded_rooms"`
		}
		if err := json.Unmarshal([]byte(body), &ready); err != nil || len(ready.Degraded) != 1 || ready.Degraded[0] != bad {
			t.Fatalf("readyz = %s, want the corrupt room degraded", body)
		}
		return r
	}

	t.Run("squashed", func(t *testing.T) {
		r := corrupt(t)
		// pycrdt-store's squash: the room's rows up to the cutoff become one merged row.
		w.Send(map[string]any{"op": "squash", "room": bad, "merged": good, "cutoff": r.TS})
		sidecartest.WaitStatus(t, sc, "/readyz", http.StatusOK)
	})
	t.Run("deleted", func(t *testing.T) {
		r := corrupt(t)
		sidecartest.ExecSQL(t, store, "DELETE FROM yupdates WHERE rowid = ?", r.RowID)
		sidecartest.WaitStatus(t, sc, "/readyz", http.StatusOK)
	})
	t.Run("file replaced", func(t *testing.T) {
		corrupt(t)
		w.Send(map[string]any{"op": "rename"})
		sidecartest.WaitStatus(t, sc, "/readyz", http.StatusOK)
	})
}

// One valid store row nesting 1.5M maps in the notebook metadata (13 MB) overflowed the
// stack on every start (issue 17). Such a row degrades its room alone: the sidecar starts
// with one in the store, serves the other notebook, and takes a second one while running.
func TestDeepNestDegradesOnlyItsRoom(t *testing.T) {
	const deepA = ".notebook:9d1c7a52-0000-4000-8000-00000000dee1.y"
	const deepB = ".notebook:9d1c7a52-0000-4000-8000-00000000dee2.y"
	deep := base64.StdEncoding.EncodeToString(yjstest.Nested(7, "meta", "metadata", 1_500_000))
	steps := sidecartest.Session(t)
	dir := t.TempDir()
	w := sidecartest.StartPreloaded(t, filepath.Join(dir, ".jupyter_ystore.db"), steps)
	w.Send(map[string]any{"op": "write", "room": deepA, "update": deep})
	sc := sidecartest.StartSidecar(t, dir, sidecartest.Options{})
	degraded := func(want ...string) {
		t.Helper()
		var code int
		var body string
		// A 24 MB row takes a while to refuse on a busy machine.
		testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("the rooms %v degraded", want), func() bool {
			select {
			case err := <-sc.Done:
				sc.Done <- err // for stop
				t.Fatalf("sidecar exited: %v", err)
			default:
			}
			code, body = sc.Get("/readyz")
			var ready struct {
				Degraded []string `json:"degraded_rooms"`
			}
			return code == http.StatusServiceUnavailable && json.Unmarshal([]byte(body), &ready) == nil && slices.Equal(ready.Degraded, want)
		}, func() string { return fmt.Sprintf("readyz = %d %s", code, body) })
	}
	want := sidecartest.MustJSON(t, steps[sidecartest.Preloaded-1].After)

	degraded(deepA)
	c := sidecartest.DialGo(t, sc.MCPURL(), true)
	c.Bind(sidecartest.NbName, sidecartest.NbPath)
	sidecartest.JSONEqual(t, "notebook beside a deep nest loaded at start", c.Read(sidecartest.NbURI), want)

	w.Send(map[string]any{"op": "write", "room": deepB, "update": deep})
	degraded(deepA, deepB)
	sidecartest.JSONEqual(t, "notebook beside a deep nest written later", c.Read(sidecartest.NbURI), want)
	if v := sc.Metric("jupyter_mcp_sidecar_decode_errors_total"); v != 2 {
		t.Fatalf("decode errors = %v, want 2", v)
	}
}

// A file id database that is none, or a root_dir that is not the Jupyter server's, is
// not ready (/readyz says why, without paths) instead of serving nothing silently; the
// binary warns once however often the rooms look the id up (every 2 s each), counts
// every failed lookup, and a database made readable again is ready again.
func TestFileIDFaults(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		garbage      bool // the database is no SQLite file; else root_dir is wrong
	}{
		{"not a database", "fileid.db_path is not a readable file id database", true},
		{"wrong root_dir", "file ids resolve outside fileid.root_dir", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := sidecartest.Session(t)
			dir := t.TempDir()
			store := filepath.Join(dir, ".jupyter_ystore.db")
			w := sidecartest.StartWriter(t, store)
			for _, s := range steps[:sidecartest.Preloaded] {
				w.Write(s.Update)
			}
			fileidDB, root := filepath.Join(dir, "file_id_manager.db"), dir
			if tc.garbage {
				if err := os.WriteFile(fileidDB, bytes.Repeat([]byte("not sqlite "), 100), 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				sidecartest.CreateFileIDDB(t, fileidDB, filepath.Join(dir, sidecartest.NbPath))
				root = filepath.Join(dir, "elsewhere")
			}
			sc := sidecartest.Launch(t, dir, fmt.Sprintf("store: {backend: sqlite, sqlite: {path: %q}}\nfileid: {db_path: %q, root_dir: %q}\n",
				store, fileidDB, root), "serve")
			var body string
			testenv.Eventually(t, testenv.Wait, "/readyz 503 saying "+tc.reason, func() bool {
				var code int
				code, body = sc.Get("/readyz")
				var r struct{ Reasons []string }
				return code == http.StatusServiceUnavailable && json.Unmarshal([]byte(body), &r) == nil &&
					slices.ContainsFunc(r.Reasons, func(s string) bool { return strings.HasPrefix(s, tc.reason) })
			}, func() string { return body })
			if strings.Contains(body, dir) {
				t.Fatalf("/readyz names a path: %s", body)
			}
			const faults = "jupyter_mcp_sidecar_fileid_lookup_faults_total"
			testenv.Eventually(t, testenv.Wait, "three failed lookups (the rooms' 2 s re-resolution)", func() bool { return sc.Metric(faults) >= 3 })
			if n := sc.LogCount("WARN", "file id lookups fail"); n != 1 {
				t.Fatalf("%d warnings for %v failed lookups, want 1", n, sc.Metric(faults))
			}
			if n := sc.LogCount("WARN", "file id lookup failed"); n != 0 {
				t.Fatalf("%d per-room warnings, want none", n)
			}
			if tc.garbage {
				if err := os.Remove(fileidDB); err != nil {
					t.Fatal(err)
				}
				sidecartest.CreateFileIDDB(t, fileidDB, filepath.Join(dir, sidecartest.NbPath))
				sc.WaitHTTP("/readyz", http.StatusOK)
			}
		})
	}
}
