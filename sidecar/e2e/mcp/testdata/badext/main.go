// Command badext is the sidecar with two ill-fitting extensions compiled in, for
// the end-to-end tests of the extension rules: t-oldapi was written for an
// extension API this sidecar does not provide (start must stop, naming both
// versions); t-wrapmissing wraps a tool that does not exist (start must go on,
// with a warning).
package main

import (
	"os"

	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/cmd/jupyter-mcp-sidecar/sidecarcmd"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions"
)

type oldAPI struct{ extensions.Base }

func (oldAPI) Manifest() extensions.Manifest {
	return extensions.Manifest{Name: "t-oldapi", Version: "0.0.1", APIVersion: "v1"}
}

type wrapMissing struct{ extensions.Base }

func (wrapMissing) Manifest() extensions.Manifest {
	return extensions.Manifest{Name: "t-wrapmissing", Version: "0.0.1", APIVersion: extensions.APIVersion}
}

func (wrapMissing) Register(s *extensions.Surface) error {
	s.WrapTool("execute_code", func(next server.ToolHandlerFunc) server.ToolHandlerFunc { return next })
	return nil
}

func init() {
	extensions.Register("t-oldapi", func(*extensions.Host) (extensions.Extension, error) { return oldAPI{}, nil })
	extensions.Register("t-wrapmissing", func(*extensions.Host) (extensions.Extension, error) { return wrapMissing{}, nil })
}

func main() { os.Exit(sidecarcmd.Main(sidecarcmd.Build{})) }
