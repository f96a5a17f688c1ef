package jupyter

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/jupytertest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// deleteLastContentRow deletes from the store the newest row of room that changes what
// the notebook shows (read as the sidecar reads rows), as a write pycrdt-store lost would
// be missing, and returns its rowid.
func deleteLastContentRow(t *testing.T, store, room string) int64 {
	t.Helper()
	db := sidecartest.OpenSQL(t, store) // the server writes and the sidecar reads meanwhile
	defer db.Close()
	rows, err := db.Query(`SELECT rowid, yupdate FROM yupdates WHERE path = ? ORDER BY rowid`, room)
	if err != nil {
		t.Fatal(err)
	}
	nb := ynotebook.New()
	last := int64(-1)
	for rows.Next() {
		var id int64
		var u []byte
		if err := rows.Scan(&id, &u); err != nil {
			t.Fatal(err)
		}
		if ch, err := nb.Apply(u); err == nil && !ch.Empty() {
			last = id
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	_ = rows.Close()
	if last < 0 {
		t.Fatal("no row of the room changes the notebook")
	}
	if _, err := db.Exec(`DELETE FROM yupdates WHERE rowid = ?`, last); err != nil {
		t.Fatal(err)
	}
	return last
}

// TestJupyterLostRowServedFromSavedFile: the real server, a row deleted from its store
// while the room is open (a write pycrdt-store lost), and an edit after it. The live
// document lacks the lost edit and cannot apply the next one (it waits for the lost
// row), while the server saves both: the sidecar serves the saved file, marked as the
// file's, within document_save_delay + 2 s of the edit, with the divergence counted and
// logged; once the updates waited store.gap_after, the gap is counted and /readyz names
// the room with the client and clocks missing.
func TestJupyterLostRowServedFromSavedFile(t *testing.T) {
	const path, name = "oracle.ipynb", "nb"
	const saveDelay = 500 * time.Millisecond // jupytertest's default document_save_delay
	s := startStack(t, jupytertest.Options{SaveDelay: saveDelay,
		Notebooks: map[string]string{path: jupytertest.NotebookJSON([2]string{"c1", "x = 1"})}}, map[string]string{name: path})
	fileID := s.join(t, path, "a", "o")
	room := jupytertest.RoomKey(fileID)
	s.step(t, name, "a", path, "type", map[string]any{"index": 0, "text": "\ny = 2"})
	s.step(t, name, "a", path, "type", map[string]any{"index": 0, "text": "\nz = 3"})
	if n := s.sc.Metric("jupyter_mcp_sidecar_divergences_total"); n != 0 {
		t.Fatalf("%v divergences before any row was lost", n)
	}

	// The row of the last edit is lost; the sidecar rebuilds the room without it, and
	// tells the subscribers.
	s.drainSubs()
	deleteLastContentRow(t, s.srv.StorePath, room)
	testenv.Eventually(t, testenv.Wait, "the room rebuilt without the lost row", func() bool {
		text, _ := s.subs[0].ReadMeta("notebook://" + name)
		return !strings.Contains(text, "z = 3")
	})
	s.told(t, name)
	s.drainSubs()

	// The next edit waits for the lost one in the sidecar; the server saves both.
	start := time.Now()
	s.edit(t, "a", path, "type", map[string]any{"index": 0, "text": "\nw = 4"})
	var served time.Duration
	testenv.Eventually(t, testenv.Wait, "the saved file served", func() bool {
		text, meta := s.subs[0].ReadMeta("notebook://" + name)
		if meta[resources.SourceKey] != "file" || !strings.Contains(text, "z = 3") || !strings.Contains(text, "w = 4") {
			return false
		}
		served = time.Since(start)
		saved, err := s.savedFile(path)
		return err == nil && ynotebook.Equivalent(sidecartest.ParseSnapshot(t, []byte(text)), sidecartest.ParseSnapshot(t, saved))
	})
	t.Logf("served from the saved file %v after the edit", served)
	s.told(t, name) // the edit itself waits in the sidecar: what they hear is the file
	if served > saveDelay+2*time.Second {
		t.Errorf("served from the saved file %v after the edit; want within document_save_delay + 2 s (%v)", served, saveDelay+2*time.Second)
	}
	if n := s.sc.Metric("jupyter_mcp_sidecar_divergences_total"); n < 1 {
		t.Errorf("divergences_total %v, want at least 1", n)
	}
	logged := s.sc.LogLines("live notebook differs from the server's saved file")
	if len(logged) == 0 || logged[0]["room"] != room || logged[0]["at"] != "/cells/0/source" {
		t.Errorf("divergence logged as %v; want room %s at /cells/0/source", logged, room)
	}

	// The gap: counted, and named in /readyz with the client and clocks missing.
	testenv.Eventually(t, testenv.Wait, "the gap counted", func() bool {
		return s.sc.Metric("jupyter_mcp_sidecar_store_gaps_total") >= 1
	})
	code, body := s.sc.Get("/readyz")
	var ready struct {
		Degradations []struct {
			Room    string `json:"room"`
			Missing []struct {
				Client   uint64 `json:"client"`
				From, To uint64
			} `json:"missing_updates"`
		} `json:"degradations"`
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil || code != 503 || len(ready.Degradations) != 1 ||
		ready.Degradations[0].Room != room || len(ready.Degradations[0].Missing) == 0 {
		t.Fatalf("/readyz %d %s; want 503 naming %s with the updates missing", code, body, room)
	}
	if gap := ready.Degradations[0].Missing[0]; gap.Client == 0 || gap.To <= gap.From {
		t.Fatalf("/readyz names the gap %+v", gap)
	}
	if lines := s.sc.LogLines("updates missing from the store"); len(lines) == 0 || lines[0]["room"] != room {
		t.Fatalf("gap logged as %v", lines)
	}
	s.probe.notReady() // the probe saw the degraded room: expected here
}
