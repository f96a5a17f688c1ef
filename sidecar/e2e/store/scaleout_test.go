package store

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// TestScaleOut ships a Jupyter server's SQLite store into Postgres with `ship` and serves
// it from a second sidecar with `store.backend: postgres`: an edit written to the SQLite
// file reaches that sidecar's subscribers, and reads equal Yjs's notebook.
func TestScaleOut(t *testing.T) {
	dsn, schema := sidecartest.InitPostgres(t)
	steps := sidecartest.Session(t)

	jupyter, other := t.TempDir(), t.TempDir()
	w := sidecartest.StartPreloaded(t, filepath.Join(jupyter, ".jupyter_ystore.db"), steps)
	fileidDB := filepath.Join(jupyter, "file_id_manager.db")
	sidecartest.CreateFileIDDB(t, fileidDB, filepath.Join(jupyter, sidecartest.NbPath))

	sidecartest.Launch(t, jupyter, fmt.Sprintf(`store: {sqlite: {path: %q}}
ship: {source_id: jupyter-a, postgres: {dsn: %q, schema: %s}}
`, filepath.Join(jupyter, ".jupyter_ystore.db"), dsn, schema), "ship")
	sc := sidecartest.Launch(t, other, fmt.Sprintf(`store:
  backend: postgres
  postgres: {dsn: %q, schema: %s, poll_interval: 1s}
fileid: {db_path: %q, root_dir: %q}
`, dsn, schema, fileidDB, jupyter), "serve")
	sc.WaitHTTP("/readyz", http.StatusOK)

	c := sidecartest.DialGo(t, sc.MCPURL(), true)
	c.Bind(sidecartest.NbName, sidecartest.NbPath)
	// Until ship has copied the room, the notebook is not in Postgres yet.
	sidecartest.EventuallyJSON(t, "shipped notebook served", sidecartest.TryReadText(c, sidecartest.NbURI), sidecartest.MustJSON(t, steps[sidecartest.Preloaded-1].After))

	i, cell := sidecartest.ChangedCell(steps, sidecartest.Preloaded)
	for _, s := range steps[sidecartest.Preloaded:i] {
		w.Write(s.Update)
	}
	c.Subscribe(sidecartest.NbURI, sidecartest.CellURI(sidecartest.NbName, cell))
	sidecartest.Drain(c, 700*time.Millisecond)
	w.Write(steps[i].Update)
	sidecartest.Await(t, c, testenv.Wait, sidecartest.NbURI, sidecartest.CellURI(sidecartest.NbName, cell))
	sidecartest.JSONEqual(t, "notebook served from Postgres", c.Read(sidecartest.NbURI), sidecartest.MustJSON(t, steps[i].After))
}
