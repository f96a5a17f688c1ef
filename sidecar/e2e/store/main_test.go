package store

import (
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

func TestMain(m *testing.M) { sidecartest.Main(m) }
