package transport

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish/publishtest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/publishers"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// outputC10URIs are the URIs the fixture edit output-c1-0 of notebook://work changes
// (resources/internal/nbview.ChangedURIs): it replaces output 0. (Applied without the
// edit before it, as here, its new output lies past a gap in its client's clocks, and
// depends on nothing missing: it integrates, as in pycrdt.)
var outputC10URIs = []string{"notebook://work", "notebook://work/cells/c1", "notebook://work/cells/c1/outputs/0"}

// noOrigin is the origin of the changes tests make up: no room, committed now.
var noOrigin = publish.Origin{}

// TestEventsForEveryNotebook: a configured publisher hears every notebook's changes,
// with the URIs of the names bound to it, renames naming both paths; scope bound
// keeps only the events of bound notebooks.
func TestEventsForEveryNotebook(t *testing.T) {
	for _, scope := range []string{publishers.ScopeAll, publishers.ScopeBound} {
		t.Run(scope, func(t *testing.T) {
			var mu sync.Mutex
			var events []publish.Event
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				var ev publish.Event
				publishtest.Validate(t, b, &ev)
				events = append(events, ev)
				mu.Unlock()
			}))
			defer hook.Close()
			lib := newLibrary(t, testPath, "other.ipynb")
			r := startServer(t, resources.Config{
				Notebooks: map[string]string{"work": testPath},
				Publisher: resources.Seam{Name: "webhook", Options: map[string]any{"url": hook.URL, "scope": scope}},
			}, lib)
			at := time.Date(2026, 12, 1, 12, 0, 0, 500, time.UTC)
			origin := publish.Origin{Room: ".notebook:f-other.y", FileID: "f-other", Time: at}
			r.srv.NotebookChanged("other.ipynb", lib.edit(t, "other.ipynb", "source-c1"), origin)
			ch := lib.edit(t, testPath, "output-c1-0")
			r.srv.NotebookChanged(testPath, ch, publish.Origin{Room: "json:notebook:f-work", FileID: "f-work", Time: at})
			r.srv.NotebookMoved("other.ipynb", "renamed.ipynb", origin)
			want := 3
			if scope == publishers.ScopeBound {
				want = 1
			}
			// A barrier: events are delivered in order, so once a last change of the
			// bound notebook arrives, every event the three above caused has.
			r.srv.NotebookChanged(testPath, ynotebook.Changes{Metadata: true}, publish.Origin{Room: "barrier", Time: at})
			testenv.Eventually(t, testenv.Wait, "the barrier event", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(events) > 0 && events[len(events)-1].Room == "barrier"
			})
			mu.Lock()
			defer mu.Unlock()
			if events = events[:len(events)-1]; len(events) != want {
				t.Fatalf("%d events, want %d: %+v", len(events), want, events)
			}
			work := events[0]
			if scope == publishers.ScopeAll {
				other, moved := events[0], events[2]
				work = events[1]
				if other.Path != "other.ipynb" || other.FileID != "f-other" || other.Room != ".notebook:f-other.y" ||
					!other.Time.Equal(at) || len(other.URIs) != 0 || other.Seq != 1 ||
					!slices.Equal(other.Changes.Cells["c1"].Parts, []string{publish.PartSource}) {
					t.Errorf("unbound notebook's event = %+v", other)
				}
				if moved.Path != "renamed.ipynb" || moved.RenamedFrom != "other.ipynb" || moved.Seq != 1 || len(moved.Changes.Cells) != 0 {
					t.Errorf("rename event = %+v", moved)
				}
			}
			if work.Path != testPath || work.FileID != "f-work" || work.Seq != 1 ||
				!slices.Equal(work.URIs, outputC10URIs) ||
				!slices.Equal(work.Changes.Cells["c1"].OutputIndexes, ch.Cells["c1"].OutputIndexes) {
				t.Errorf("bound notebook's event = %+v", work)
			}
		})
	}
}
