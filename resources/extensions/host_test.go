package extensions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

func TestSubscriptionMergesPerNotebookAndNeverBlocks(t *testing.T) {
	set := &Set{fan: &fanout{}}
	sub := set.fan.subscribe()
	// Far more changes than anyone reads: delivery must not wait for Next.
	for range 10000 {
		set.NotebookChanged("a.ipynb", ynotebook.Changes{Cells: map[string]ynotebook.CellChange{"c1": {Source: true}}})
	}
	set.NotebookChanged("b.ipynb", ynotebook.Changes{Added: []string{"n1"}})
	set.NotebookMoved("a.ipynb", "moved.ipynb")
	set.NotebookChanged("moved.ipynb", ynotebook.Changes{Cells: map[string]ynotebook.CellChange{"c2": {Outputs: true}}})
	got, err := sub.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Path != "b.ipynb" || got[1].Path != "moved.ipynb" || got[1].From != "a.ipynb" {
		t.Fatalf("changes = %+v: one per notebook, the renamed one under its new path", got)
	}
	if !got[1].Changes.Cells["c1"].Source || !got[1].Changes.Cells["c2"].Outputs {
		t.Fatalf("merged changes = %+v", got[1].Changes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with nothing pending = %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := sub.Next(context.Background()); done <- err }()
	set.fan.closeAll()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after close = %v", err)
	}
	set.NotebookChanged("a.ipynb", ynotebook.Changes{Metadata: true}) // no subscriber left: no-op
}

func TestHostConfigAndOptionsAreCopies(t *testing.T) {
	type server struct {
		Token  string `yaml:"token"`
		Listen string `yaml:"listen"`
	}
	cfg, err := newConfigView(struct {
		Server server `yaml:"server"`
	}{server{Token: "xxxxx", Listen: "127.0.0.1:4040"}})
	if err != nil {
		t.Fatal(err)
	}
	h := &Host{options: map[string]any{"nested": map[string]any{"k": "v"}}, cfg: cfg}
	c := h.Config()
	c["server"].(map[string]any)["listen"] = "changed"
	if got := h.Config()["server"].(map[string]any)["listen"]; got != "127.0.0.1:4040" {
		t.Fatalf("config after a caller changed its copy: %v", got)
	}
	o := h.Options()
	o["nested"].(map[string]any)["k"] = "changed"
	if got := h.Options()["nested"].(map[string]any)["k"]; got != "v" {
		t.Fatalf("options after a caller changed its copy: %v", got)
	}
	if len((&Host{}).Config()) != 0 {
		t.Fatal("no configuration: empty map")
	}
}
