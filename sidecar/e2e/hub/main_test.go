package hub

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(holdEnv); spec != "" {
		os.Exit(holdNotebooks(spec))
	}
	sidecartest.Main(m)
}

// mcpAnswer is what mcpPost's request was answered: its status, its session id and the
// first MB of its body.
type mcpAnswer struct {
	Code          int
	Session, Body string
}

// mcpPost posts body, one JSON-RPC message, to the MCP endpoint through c as a client
// does, with the Authorization header authorization, in the 2025-11-25 session session
// ("": none) and with any further headers (name, value pairs): the tests' one
// hand-built MCP request.
func mcpPost(c *http.Client, endpoint, authorization, session, body string, header ...string) (mcpAnswer, error) {
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return mcpAnswer{}, err
	}
	req.Header.Set("Authorization", authorization)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return mcpAnswer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_, _ = io.Copy(io.Discard, resp.Body) // the connection is reused
	return mcpAnswer{Code: resp.StatusCode, Session: resp.Header.Get("Mcp-Session-Id"), Body: string(b)}, nil
}
