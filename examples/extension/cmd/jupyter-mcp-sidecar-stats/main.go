// Command jupyter-mcp-sidecar-stats is jupyter-mcp-sidecar with the stats
// extension compiled in: the sidecar's own command, plus one import.
//
//	go build ./cmd/jupyter-mcp-sidecar-stats
package main

import (
	"os"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/cmd/jupyter-mcp-sidecar/sidecarcmd"

	_ "example.com/notebook-stats/stats" // registers the stats extension in init()
)

func main() { os.Exit(sidecarcmd.Main(sidecarcmd.Build{})) }
