package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite/sqlitetest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// The store of issue 33, written by the real Jupyter server (jupyter-collaboration 5.0.4,
// pycrdt 0.14.13) while two pycrdt clients typed concurrently; its README tells the
// story. Read by Yjs one row at a time, the room of c0.ipynb loses the second 日本 of
// cell 1 at its 29th row; the server (yrs) keeps it.
// serverStoreDir holds the store and the saved file.
var serverStoreDir = sidecartest.RepoRoot + "/ystore/ynotebook/testdata/yjs-order-divergence/"

const (
	serverStoreFileID = "b8f289fb-62ea-44da-8b68-ed10c4d0d74c"
	serverStoreRoom   = ".notebook:" + serverStoreFileID + ".y"
	serverStoreName   = "c0"
	serverStoreURI    = "notebook://" + serverStoreName
	serverStoreCell1  = "note🎉s日本a 🎉a日本éaa" // cell 1's source in the server's view and saved file
)

// TestServerStoreServedAsSaved: the built binary serves the room of issue 33's store
// (c0.ipynb) as the server saved it — cell 1 exactly `note🎉s日本a 🎉a日本éaa` — when the
// room's 45 rows arrive one by one into the running sidecar (each applied before the
// next is written, one transaction per row as pycrdt-store writes them; a subscriber of
// the name is told), when it starts on the first 28 rows and the rest arrive one by one,
// and on a cold start on the server's whole store. No .ipynb is on disk: what is served
// is the store's reading, never the file's.
func TestServerStoreServedAsSaved(t *testing.T) {
	rows := serverStoreRows(t)
	savedJSON, err := os.ReadFile(serverStoreDir + "c0-as-saved-by-the-server.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	saved := sidecartest.ParseSnapshot(t, savedJSON)
	for _, tc := range []struct {
		name      string
		copyStore bool // start on a copy of the server's store (all its rooms), else on a writer's
		before    int  // rows of the room written before the start (writer's store only)
	}{
		{name: "rows one by one into a running sidecar"},
		{name: "first 28 rows cold, then one by one", before: 28},
		{name: "cold start on the server's store", copyStore: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store := filepath.Join(dir, ".jupyter_ystore.db")
			if tc.copyStore {
				db, err := os.ReadFile(serverStoreDir + "ystore.db")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(store, db, 0o600); err != nil {
					t.Fatal(err)
				}
				servedAsSaved(t, sidecartest.DialGo(t, startServerStoreSidecar(t, dir).MCPURL(), true), saved)
				return
			}
			w := sidecartest.StartWriter(t, store)
			for _, u := range rows[:tc.before] {
				w.WriteRoom(serverStoreRoom, u)
			}
			sc := startServerStoreSidecar(t, dir)
			g := sidecartest.DialGo(t, sc.MCPURL(), true)
			g.Subscribe(serverStoreURI)
			for i := tc.before; i < len(rows); i++ {
				w.WriteRoom(serverStoreRoom, rows[i])
				testenv.Eventually(t, testenv.Wait, fmt.Sprintf("row %d applied", i), func() bool {
					return sc.Metric("jupyter_mcp_sidecar_rows_applied_total") >= float64(i+1)
				})
			}
			if uri := testenv.Receive(t, testenv.Wait, "a notification of "+serverStoreURI, g.Updates()); uri != serverStoreURI {
				t.Fatalf("notified of %s, subscribed to %s only", uri, serverStoreURI)
			}
			servedAsSaved(t, g, saved)
		})
	}
}

// serverStoreRows returns the updates of the room of c0.ipynb in the fixture's store, in
// rowid order.
func serverStoreRows(t *testing.T) [][]byte {
	t.Helper()
	rows := sqlitetest.Rows(t, serverStoreDir+"ystore.db", serverStoreRoom)
	if len(rows) != 45 {
		t.Fatalf("the fixture's room has %d rows; want 45", len(rows))
	}
	return rows
}

// startServerStoreSidecar starts the binary on dir's store with the fixture's file id
// naming c0.ipynb, bound to the name c0, and waits until it is ready.
func startServerStoreSidecar(t *testing.T, dir string) *sidecartest.Sidecar {
	t.Helper()
	sc := sidecartest.StartSidecar(t, dir, sidecartest.Options{Files: map[string]string{serverStoreFileID: "c0.ipynb"},
		Extra: fmt.Sprintf("notebooks: {%s: c0.ipynb}\n", serverStoreName)})
	sc.WaitHTTP("/readyz", 200)
	return sc
}

// servedAsSaved waits until notebook://c0 read over MCP is the server's saved file, cell
// 1 exactly serverStoreCell1, served from the store.
func servedAsSaved(t *testing.T, g *sidecartest.GoClient, saved *ynotebook.Snapshot) {
	t.Helper()
	var text, cell1 string
	var meta map[string]any
	testenv.Eventually(t, testenv.Wait, serverStoreURI+" served as the server saved it", func() bool {
		text, meta = g.ReadMeta(serverStoreURI)
		snap := sidecartest.ParseSnapshot(t, []byte(text))
		if snap.Len() < 2 {
			return false
		}
		cell1 = snap.At(1).Source
		return cell1 == serverStoreCell1 && ynotebook.Equivalent(snap, saved) && meta[resources.SourceKey] == nil
	}, func() string {
		return fmt.Sprintf("cell 1 served as %q, the server holds %q (_meta %v); served:\n%s", cell1, serverStoreCell1, meta, text)
	})
}
