package resources

import (
	"context"
	"errors"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/hooks"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/nbview"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/names"
)

// errToolFailed stands for a tool result flagged isError, for the hooks.
var errToolFailed = errors.New("tool returned an error result")

// observeTool runs every tool call, core or extension, inside the hooks.
func (s *Server) observeTool(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var res *mcp.CallToolResult
		call := hooks.Call{Kind: hooks.KindTool, Name: req.Params.Name, Session: sessionIDFrom(ctx)}
		err := s.hooks.Observe(ctx, call, func(ctx context.Context) error {
			var err error
			res, err = next(ctx, req)
			if err == nil && res != nil && res.IsError {
				return errToolFailed
			}
			return err
		})
		if errors.Is(err, errToolFailed) {
			err = nil
		}
		return res, err
	}
}

// notebookEntry is one line of list_notebooks.
type notebookEntry struct {
	Name       string `json:"name"`
	Path       string `json:"path"`
	URI        string `json:"uri"`
	Configured bool   `json:"configured"`
	Present    bool   `json:"present"` // the notebook is in the store now
}

// notebookList is the result of list_notebooks.
type notebookList struct {
	Notebooks []notebookEntry `json:"notebooks"` // bound names, sorted
	Unnamed   []string        `json:"unnamed"`   // store notebooks no name is bound to, sorted
}

func (s *Server) addCoreTools(t *extensions.Surface) error {
	// Bindings are the sidecar's own state: a rebind drops the name's old path, an unbind the name.
	binding := extensions.Hints{Destructive: true, Idempotent: true}.Option()
	return errors.Join(
		t.AddTool(mcp.NewTool("use_notebook",
			mcp.WithDescription("Bind a name to a notebook so it can be read as notebook://{name}. "+
				"The path is relative to the Jupyter root. Bindings survive restarts."),
			mcp.WithString("notebook_name", mcp.Required(), mcp.Description("URI-safe name: letters, digits, . _ ~ -")),
			mcp.WithString("notebook_path", mcp.Required(), mcp.Description("Notebook path relative to the Jupyter root, e.g. work/analysis.ipynb")),
			binding,
		), s.useNotebook),
		t.AddTool(mcp.NewTool("unuse_notebook",
			mcp.WithDescription("Remove a name bound with use_notebook."),
			mcp.WithString("notebook_name", mcp.Required(), mcp.Description("A name bound with use_notebook")),
			binding,
		), s.unuseNotebook),
		t.AddTool(mcp.NewTool("list_notebooks",
			mcp.WithDescription("Bound names with their paths and resource URIs, and the notebooks in the store that have no name yet."),
			extensions.ReadOnlyTool(),
		), s.listNotebooks),
	)
}

func (s *Server) useNotebook(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name, err := req.RequireString("notebook_name")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	path, err := req.RequireString("notebook_path")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	changed, err := s.names.Bind(name, path)
	if err != nil {
		s.bindFailed(name, err)
		return mcp.NewToolResultError(err.Error()), nil
	}
	p, _ := s.names.Path(name)
	if changed {
		s.subs.ListChanged()
		s.log.Info("notebook bound", logkey.Path, p, "name", name)
	}
	entry := notebookEntry{Name: name, Path: p, URI: nbview.NotebookURI(name), Present: slices.Contains(s.lib.Paths(), p)}
	return mcp.NewToolResultJSON(entry)
}

func (s *Server) unuseNotebook(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name, err := req.RequireString("notebook_name")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	path, _ := s.names.Path(name)
	if err := s.names.Unbind(name); err != nil {
		s.bindFailed(name, err)
		return mcp.NewToolResultError(err.Error()), nil
	}
	s.subs.ListChanged()
	s.log.Info("notebook unbound", logkey.Path, path, "name", name)
	return mcp.NewToolResultJSON(map[string]any{"name": name, "unbound": true})
}

// bindFailed counts a refused binding and logs a failed save with its cause,
// which names the state file (the error the client gets does not).
func (s *Server) bindFailed(name string, err error) {
	var save *names.SaveError
	switch {
	case errors.As(err, &save):
		s.log.Error("bindings not saved", "name", name, "file", s.cfg.StateFile, "err", save.Err)
	case errors.Is(err, names.ErrTooManyNames):
		s.metrics.refusals.WithLabelValues("names").Inc()
	case errors.Is(err, names.ErrPathTooLong):
		s.metrics.refusals.WithLabelValues("path_bytes").Inc()
	case errors.Is(err, names.ErrInvalidPath):
		s.metrics.refusals.WithLabelValues("not_a_notebook_path").Inc()
	}
}

func (s *Server) listNotebooks(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	present := s.lib.Paths()
	list := notebookList{Notebooks: []notebookEntry{}, Unnamed: []string{}}
	named := map[string]bool{}
	for _, b := range s.names.All() {
		named[b.Path] = true
		list.Notebooks = append(list.Notebooks, notebookEntry{
			Name: b.Name, Path: b.Path, URI: nbview.NotebookURI(b.Name), Configured: b.Configured, Present: slices.Contains(present, b.Path),
		})
	}
	for _, p := range present {
		if !named[p] {
			list.Unnamed = append(list.Unnamed, p)
		}
	}
	slices.Sort(list.Unnamed)
	return mcp.NewToolResultJSON(list)
}
