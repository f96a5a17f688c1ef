package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"
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
	sc.waitHTTP("/readyz", http.StatusOK, 15*time.Second)

	c := dialGo(t, sc.mcpURL(), true)
	c.bind(nbName, nbPath)
	// Until ship has copied the room, the notebook is not in Postgres yet.
	deadline := time.Now().Add(15 * time.Second)
	want := mustJSON(t, steps[preloaded-1].after)
	for {
		got, err := c.tryRead(nbURI)
		if err == nil && jsonSame(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shipped notebook not served within 15 s: %v\n%s", err, got)
		}
		time.Sleep(200 * time.Millisecond)
	}

	i, cell := changedCell(steps, preloaded)
	for _, s := range steps[preloaded:i] {
		w.write(s.update)
	}
	c.subscribe(nbURI, cellURI(nbName, cell))
	drain(c, 700*time.Millisecond)
	w.write(steps[i].update)
	await(t, c, delivery, nbURI, cellURI(nbName, cell))
	jsonEqual(t, "notebook served from Postgres", c.read(nbURI), mustJSON(t, steps[i].after))
}
