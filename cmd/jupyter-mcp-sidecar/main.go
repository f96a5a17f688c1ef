// Command jupyter-mcp-sidecar tails the Y-store of a Jupyter server with real-time
// collaboration and serves its notebooks to AI agents over MCP. Run
// `jupyter-mcp-sidecar --help` for the commands; the command itself is package
// sidecarcmd, which a custom main with more extensions calls the same way.
package main

import (
	"os"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/cmd/jupyter-mcp-sidecar/sidecarcmd"
)

// Set at build time: go build -ldflags "-X main.version=v1.2.3 -X main.commit=abc123".
var (
	version = ""
	commit  = ""
)

func main() { os.Exit(sidecarcmd.Main(sidecarcmd.Build{Version: version, Commit: commit})) }
