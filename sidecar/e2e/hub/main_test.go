package hub

import (
	"os"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(holdEnv); spec != "" {
		os.Exit(holdNotebooks(spec))
	}
	sidecartest.Main(m)
}
