package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
)

// Name is the extension's registered name.
const Name = "search"

// Version is the extension's version.
const Version = "1.0.0"

// Defaults of the options and of the tool's arguments.
const (
	DefaultTimeout = 2 * time.Second // option "timeout": a search stops and answers what it found
	DefaultLimit   = 20              // cells a search returns unless limit says otherwise
	MaxLimit       = 200             // and at most
)

func init() { extensions.Register(Name, New) }

// Extension keeps the index and answers search_notebooks.
type Extension struct {
	extensions.Base
	lib     extensions.Library
	log     *slog.Logger
	host    *extensions.Host
	timeout time.Duration
	index   *Index
	ready   chan struct{} // closed once every notebook was indexed at start
	worker  extensions.Worker
}

// New builds the extension. Options: timeout (a duration, default 2s).
func New(h *extensions.Host) (extensions.Extension, error) {
	e := &Extension{lib: h.Library(), log: h.Logger(), host: h, timeout: DefaultTimeout, index: NewIndex(), ready: make(chan struct{})}
	o := struct {
		Timeout time.Duration `option:"timeout"`
	}{DefaultTimeout}
	if err := option.Decode(h.Options(), &o); err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		return nil, fmt.Errorf("option timeout: want a positive duration such as 2s, got %v", o.Timeout)
	}
	e.timeout = o.Timeout
	return e, nil
}

// Manifest names the extension.
func (e *Extension) Manifest() extensions.Manifest {
	return extensions.Manifest{Name: Name, Version: Version, APIVersion: extensions.APIVersion,
		Description: "search_notebooks: search the notebooks' sources and outputs from an index kept up to date."}
}

// Capabilities declares the tool.
func (e *Extension) Capabilities() ([]extensions.Capability, error) {
	return []extensions.Capability{{Name: "search.notebooks", Enabled: true,
		Description: "search_notebooks: matching cells of every notebook as cell URIs with their matching lines, from a live index."}}, nil
}

// Register adds search_notebooks.
func (e *Extension) Register(s *extensions.Surface) error {
	return s.AddTool(mcp.NewTool("search_notebooks",
		mcp.WithDescription("Search the sources and outputs of every notebook for text. Returns each matching cell as "+
			"notebook://{name}/cells/{cell_id} with its matching lines and their line numbers. A plain query matches "+
			"case-insensitively; with regex it is an RE2 expression matched per line ((?i) for case-insensitive). "+
			"Notebooks no name is bound to are listed by path: bind one with use_notebook to read its cells."),
		mcp.WithString("query", mcp.Required(), mcp.Description("Text to find, or an RE2 expression with regex")),
		mcp.WithBoolean("regex", mcp.Description("Treat query as a regular expression (default false)")),
		mcp.WithString("in", mcp.Enum(InSource, InOutputs, InBoth), mcp.Description("Search cell sources, outputs or both (default both)")),
		mcp.WithNumber("limit", mcp.Description(fmt.Sprintf("Most cells to return (default %d, at most %d)", DefaultLimit, MaxLimit))),
		extensions.ReadOnlyTool(),
	), e.search)
}

// Start indexes every notebook, then keeps the index up to date from change
// sets, until Stop or the server stops.
func (e *Extension) Start(ctx context.Context) error {
	sub := e.host.Subscribe() // before the first scan: nothing changes unseen
	e.worker.Go(ctx, func(ctx context.Context) {
		defer sub.Close()
		e.run(ctx, sub)
	})
	return nil
}

// Stop ends the indexing goroutine.
func (e *Extension) Stop(ctx context.Context) error { return e.worker.Stop(ctx) }

func (e *Extension) run(ctx context.Context, sub *extensions.Subscription) {
	start, cells := time.Now(), 0
	for _, nb := range e.lib.Notebooks() {
		if ctx.Err() != nil {
			return
		}
		if snap, err := e.lib.Snapshot(nb.Path); err == nil {
			e.index.Update(nb.Path, snap, nil)
			cells += snap.Len()
		}
	}
	close(e.ready)
	e.log.Info("notebooks indexed", "notebooks", len(e.index.Paths()), "cells", cells, "duration", time.Since(start))
	for {
		changes, err := sub.Next(ctx)
		if err != nil {
			return
		}
		for _, c := range changes {
			e.apply(c)
		}
	}
}

// apply brings the index up to date with one notebook's change.
func (e *Extension) apply(c extensions.Change) {
	if c.From != "" {
		e.index.Move(c.From, c.Path)
	}
	snap, err := e.lib.Snapshot(c.Path)
	switch {
	case errors.Is(err, extensions.ErrNotFound):
		e.index.Remove(c.Path)
	case err != nil:
		e.log.Warn("notebook not indexed", logkey.Path, c.Path, "err", err)
	default:
		e.index.Update(c.Path, snap, &c.Changes)
	}
}

// result is what search_notebooks answers.
type result struct {
	Results   []hit  `json:"results"`
	Truncated bool   `json:"truncated"`           // more cells matched than limit
	TimedOut  bool   `json:"timed_out,omitempty"` // the time bound ended the search
	Indexing  bool   `json:"indexing,omitempty"`  // the first indexing at start has not finished
	Searched  int    `json:"searched_notebooks"`
	Hint      string `json:"hint,omitempty"`
}

// hit is one matching cell.
type hit struct {
	URI      string `json:"uri,omitempty"` // notebook://{name}/cells/{cell_id}; none when no name is bound
	Name     string `json:"name,omitempty"`
	Path     string `json:"path"`
	CellID   string `json:"cell_id"`
	CellType string `json:"cell_type"`
	Lines    []Line `json:"lines"`
	More     int    `json:"more_lines,omitempty"`
}

const unboundHint = "Some matches are in notebooks no name is bound to (no uri): bind one with " +
	"use_notebook(notebook_name, notebook_path) to read notebook://{name}/cells/{cell_id}."

func (e *Extension) search(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	query, err := req.RequireString("query")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	in := req.GetString("in", InBoth)
	if in != InSource && in != InOutputs && in != InBoth {
		return mcp.NewToolResultError(fmt.Sprintf("in must be %s, %s or %s", InSource, InOutputs, InBoth)), nil
	}
	limit := req.GetInt("limit", DefaultLimit)
	if limit < 1 || limit > MaxLimit {
		return mcp.NewToolResultError(fmt.Sprintf("limit must be between 1 and %d", MaxLimit)), nil
	}
	q, err := Compile(query, req.GetBool("regex", false))
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	books := e.lib.Notebooks()
	names := make(map[string][]string, len(books))
	paths := make([]string, len(books))
	for i, nb := range books {
		paths[i], names[nb.Path] = nb.Path, nb.Names
	}
	r := e.index.Search(ctx, q, Options{In: in, Limit: limit, Paths: paths})
	out := result{Results: make([]hit, 0, len(r.Hits)), Truncated: r.Truncated, TimedOut: r.TimedOut, Searched: r.Searched}
	select {
	case <-e.ready:
	default:
		out.Indexing = true
	}
	for _, h := range r.Hits {
		x := hit{Path: h.Path, CellID: h.CellID, CellType: h.CellType, Lines: h.Lines, More: h.More}
		if !extensions.Addressable(x.CellID) {
			x.CellID = "" // an id no URI names is left out, whatever its size
		}
		if ns := names[h.Path]; len(ns) > 0 {
			x.Name, x.URI = ns[0], extensions.CellURI(ns[0], h.CellID)
		} else {
			out.Hint = unboundHint
		}
		out.Results = append(out.Results, x)
	}
	return mcp.NewToolResultJSON(out)
}
