package transport

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// panicking is a Library that panics on reads of one path.
type panicking struct{ *fixtureLibrary }

func (p panicking) Notebook(path string) (*ynotebook.Snapshot, error) {
	if path == "boom.ipynb" {
		panic("library exploded")
	}
	return p.fixtureLibrary.Notebook(path)
}

func TestPanicsNeverReachTheClient(t *testing.T) {
	lib := panicking{newLibrary(t, testPath)}
	r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath, "boom": "boom.ipynb"}}, lib)
	c := dialGo(t, r.url, false)
	req := mcp.ReadResourceRequest{}
	req.Params.URI = "notebook://boom"
	_, err := c.ReadResource(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("read of a panicking library: %v", err)
	}
	if got := readText(t, c, "notebook://work/cells/c2"); !strings.Contains(got, "markdown") {
		t.Fatalf("server unusable after a panic: %s", got)
	}
}

func TestRunDrainsOpenStreams(t *testing.T) {
	lib := newLibrary(t, testPath)
	r := serve(t, served{Config: resources.Config{Notebooks: map[string]string{"work": testPath}}, Transport: Config{DrainTimeout: 2 * time.Second}}, lib)
	legacyClient := dialGo(t, r.url, false)
	modernClient := dialGo(t, r.url, true)
	stop, err := modernClient.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: []string{"notebook://work"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	testenv.Eventually(t, testenv.Wait, "the listen stream and the GET stream registered", func() bool {
		perEra, _, streams := stats(r)
		return perEra[era20260728] == 1 && streams == 1
	})
	_ = legacyClient
	start := time.Now()
	r.stop()
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Run took %v to drain open streams (deadline 2s)", d)
	}
}
