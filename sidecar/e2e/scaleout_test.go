package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// TestScaleOut ships a Jupyter server's SQLite store into Postgres with `ship` and serves
// it from a second sidecar with `store.backend: postgres`: an edit written to the SQLite
// file reaches that sidecar's subscribers, and reads equal Yjs's notebook.
func TestScaleOut(t *testing.T) {
	dsn, schema := initPostgres(t)
	steps := session(t)

	jupyter, other := t.TempDir(), t.TempDir()
	w := startPreloaded(t, filepath.Join(jupyter, ".jupyter_ystore.db"), steps)
	fileidDB := filepath.Join(jupyter, "file_id_manager.db")
	createFileIDDB(t, fileidDB, filepath.Join(jupyter, nbPath))

	launch(t, jupyter, fmt.Sprintf(`store: {sqlite: {path: %q}}
ship: {source_id: jupyter-a, postgres: {dsn: %q, schema: %s}}
`, filepath.Join(jupyter, ".jupyter_ystore.db"), dsn, schema), "ship")
	sc := launch(t, other, fmt.Sprintf(`store:
  backend: postgres
  postgres: {dsn: %q, schema: %s, poll_interval: 1s}
fileid: {db_path: %q, root_dir: %q}
`, dsn, schema, fileidDB, jupyter), "serve")
	sc.waitHTTP("/readyz", http.StatusOK)

	c := dialGo(t, sc.mcpURL(), true)
	c.bind(nbName, nbPath)
	// Until ship has copied the room, the notebook is not in Postgres yet.
	eventuallyJSON(t, "shipped notebook served", tryReadText(c, nbURI), mustJSON(t, steps[preloaded-1].after))

	i, cell := changedCell(steps, preloaded)
	for _, s := range steps[preloaded:i] {
		w.write(s.update)
	}
	c.subscribe(nbURI, cellURI(nbName, cell))
	drain(c, 700*time.Millisecond)
	w.write(steps[i].update)
	await(t, c, testenv.Wait, nbURI, cellURI(nbName, cell))
	jsonEqual(t, "notebook served from Postgres", c.read(nbURI), mustJSON(t, steps[i].after))
}
