// Package stats is an example third-party extension of jupyter-mcp-sidecar, in a
// module of its own: the tool notebook_stats answers how many notebooks, cells
// and outputs the caller has, per cell type, from counts it keeps up to date
// with the notebooks' change sets. docs/EXTENSIONS.md walks through it.
package stats

import (
	"context"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
)

// Name is the extension's registered name: its configuration key is extensions.stats.
const Name = "stats"

func init() { extensions.Register(Name, New) }

// Stats counts cells per notebook.
type Stats struct {
	extensions.Base // defaults for the hooks it does not need
	host            *extensions.Host
	label           string

	mu      sync.Mutex
	counts  map[string]counts // path → counts
	changes int               // change sets seen since start
	worker  extensions.Worker
}

type counts struct {
	Cells   map[string]int `json:"cells"` // per cell type
	Outputs int            `json:"outputs"`
}

// New builds the extension. Its one option, label, is echoed in answers.
func New(h *extensions.Host) (extensions.Extension, error) {
	o := struct {
		Label string `option:"label"`
	}{"notebook stats"}
	if err := option.Decode(h.Options(), &o); err != nil {
		return nil, err
	}
	return &Stats{host: h, counts: map[string]counts{}, label: o.Label}, nil
}

// Manifest says which extension API the extension was written for.
func (s *Stats) Manifest() extensions.Manifest {
	return extensions.Manifest{Name: Name, Version: "0.1.0", APIVersion: extensions.APIVersion,
		Description: "notebook_stats: cells and outputs per notebook."}
}

// Register adds the tool.
func (s *Stats) Register(surface *extensions.Surface) error {
	return surface.AddTool(mcp.NewTool("notebook_stats",
		mcp.WithDescription("Cells per type and outputs of each of your notebooks."),
		extensions.ReadOnlyTool(),
	), s.answer)
}

// Capabilities declares what the extension adds, under its own namespace.
func (s *Stats) Capabilities() ([]extensions.Capability, error) {
	return []extensions.Capability{{Name: "stats.notebooks", Description: "notebook_stats: cells and outputs per notebook.", Enabled: true}}, nil
}

// Start counts every notebook, then follows change sets until Stop.
func (s *Stats) Start(ctx context.Context) error {
	sub := s.host.Subscribe() // subscribe first: no change between the count and the loop is missed
	for _, nb := range s.host.Library().Notebooks() {
		s.count(nb.Path)
	}
	s.worker.Go(ctx, func(ctx context.Context) {
		defer sub.Close()
		for {
			changes, err := sub.Next(ctx)
			if err != nil {
				return
			}
			for _, c := range changes {
				if c.From != "" {
					s.forget(c.From)
				}
				s.count(c.Path)
			}
			s.mu.Lock()
			s.changes += len(changes)
			s.mu.Unlock()
		}
	})
	s.host.Logger().Info("stats started", "notebooks", len(s.counts))
	return nil
}

// Stop ends the goroutine Start started.
func (s *Stats) Stop(ctx context.Context) error { return s.worker.Stop(ctx) }

// count recounts the notebook at path from an immutable snapshot.
func (s *Stats) count(path string) {
	snap, err := s.host.Library().Snapshot(path)
	if err != nil {
		s.forget(path)
		return
	}
	c := counts{Cells: map[string]int{}}
	for _, cell := range snap.All() {
		c.Cells[cell.CellType]++
		c.Outputs += len(cell.Outputs)
	}
	s.mu.Lock()
	s.counts[path] = c
	s.mu.Unlock()
}

func (s *Stats) forget(path string) {
	s.mu.Lock()
	delete(s.counts, path)
	s.mu.Unlock()
}

func (s *Stats) answer(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	type entry struct {
		Path  string   `json:"path"`
		Names []string `json:"names"`
		counts
	}
	out := struct {
		Label     string  `json:"label"`
		Notebooks []entry `json:"notebooks"`
		Changes   int     `json:"changes_seen"`
	}{Label: s.label, Notebooks: []entry{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, nb := range s.host.Library().Notebooks() {
		if c, ok := s.counts[nb.Path]; ok {
			out.Notebooks = append(out.Notebooks, entry{Path: nb.Path, Names: nb.Names, counts: c})
		}
	}
	out.Changes = s.changes
	return mcp.NewToolResultJSON(out)
}
