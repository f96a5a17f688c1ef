package sidecarcmd

// The extensions every build of the command has. A custom main adds its own
// by importing them beside this package.
import (
	_ "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/outline"
	_ "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/search"
)
