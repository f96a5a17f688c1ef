package sidecarcmd

// The plugins every build of the command has: the publishers webhook, pgnotify and
// sse, the extensions outline and search. A custom main adds its own by importing
// them beside this package.
import (
	_ "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/outline"
	_ "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/publishers"
	_ "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/search"
)
