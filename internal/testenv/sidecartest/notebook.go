package sidecartest

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// ReadMeta reads a text resource and returns its text and its contents' _meta.
func (g *GoClient) ReadMeta(uri string) (string, map[string]any) {
	g.T.Helper()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := g.Client.ReadResource(WaitCtx(g.T, testenv.Wait), req)
	if err != nil {
		g.T.Fatalf("%s: read %s: %v", g.Name(), uri, err)
	}
	if len(res.Contents) != 1 {
		g.T.Fatalf("%s: read %s: %d contents", g.Name(), uri, len(res.Contents))
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok {
		g.T.Fatalf("%s: read %s: %T", g.Name(), uri, res.Contents[0])
	}
	return tc.Text, tc.Meta
}

// FileReads counts the sidecar's log lines saying it read the notebook file p.
func (s *Sidecar) FileReads(p string) int {
	n := 0
	for line := range strings.SplitSeq(s.Logs.String(), "\n") {
		var l struct{ Msg, Path string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "notebook file read" && l.Path == p {
			n++
		}
	}
	return n
}

// WriteNotebookFile writes snap as the .ipynb at abs and returns its mtime.
func WriteNotebookFile(t *testing.T, abs string, snap *ynotebook.Snapshot) time.Time {
	t.Helper()
	body, err := snap.JSON()
	if err != nil {
		t.Fatal(err)
	}
	// Out of band, as git or nbconvert would: a new file renamed over the old one.
	tmp := abs + ".tmp"
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, abs); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}

// LogLines returns the sidecar's JSON log lines whose msg starts with prefix.
func (s *Sidecar) LogLines(prefix string) []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(s.Logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			if msg, _ := m["msg"].(string); strings.HasPrefix(msg, prefix) {
				out = append(out, m)
			}
		}
	}
	return out
}

// ParseSnapshot parses a notebook's JSON as the sidecar parses a file.
func ParseSnapshot(t *testing.T, b []byte) *ynotebook.Snapshot {
	t.Helper()
	snap, err := ynotebook.Parse(b, ynotebook.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}
