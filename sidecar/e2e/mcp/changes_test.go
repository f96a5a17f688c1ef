package mcp

import (
	"bytes"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/changestest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv/sidecartest"
)

// versioned is a client that reads a resource's version and the version notifications
// carry: the official TypeScript SDK's clients and mcp-go's.
type versioned interface {
	sidecartest.MCPClient
	ReadVersioned(uri string) (string, string)
	Heard(uri string) string
}

// TestAgentLoopEndToEnd is the agent's loop of the README with the official TypeScript
// SDK's clients of both eras (and mcp-go's) against the built binary and a writer: after
// each notification, what changed since the last version, applied to the last read,
// equals a fresh read, and the notification carried the fresh read's version.
func TestAgentLoopEndToEnd(t *testing.T) {
	steps := sidecartest.Session(t)
	dir := t.TempDir()
	w := sidecartest.StartPreloaded(t, filepath.Join(dir, ".jupyter_ystore.db"), steps)
	sc := sidecartest.StartSidecar(t, dir, sidecartest.Options{})
	sc.WaitHTTP("/readyz", http.StatusOK)
	var cs []versioned
	for _, c := range sidecartest.Clients(t, sc) {
		if v, ok := c.(versioned); ok {
			cs = append(cs, v)
		}
	}
	if len(cs) < 4 {
		t.Logf("%d clients (TypeScript ones missing?)", len(cs))
	}
	last := make([]string, len(cs))
	version := make([]string, len(cs))
	for k, c := range cs {
		c.Bind(sidecartest.NbName, sidecartest.NbPath)
		c.Subscribe(sidecartest.NbURI)
		last[k], version[k] = c.ReadVersioned(sidecartest.NbURI)
	}
	edits := 0
	for i := sidecartest.Preloaded; i < len(steps) && edits < 25; i++ {
		w.Write(steps[i].Update)
		if !sidecartest.Visible(steps[i : i+1]) {
			continue
		}
		edits++
		want := sidecartest.MustJSON(t, steps[i].After)
		for k, c := range cs {
			// Hear, then read: the notification of this edit (an earlier one, of a step
			// not visible, carries the version before it).
			for {
				sidecartest.Await(t, c, sidecartest.Delivery, sidecartest.NbURI)
				fresh, now := c.ReadVersioned(sidecartest.NbURI)
				if sidecartest.JSONSame(fresh, want) {
					if heard := c.Heard(sidecartest.NbURI); heard != now {
						t.Fatalf("%s step %d: notification carried version %s, a read %s", c.Name(), i, heard, now)
					}
					body := c.Read(sidecartest.NbURI + "/changes?since=" + url.QueryEscape(version[k]))
					ans, err := changestest.Decode([]byte(body))
					if err != nil {
						t.Fatal(err)
					}
					got, err := changestest.Apply([]byte(last[k]), ans)
					if err != nil {
						t.Fatalf("%s step %d: %v: %s", c.Name(), i, err, body)
					}
					if want, _ := changestest.Canonical([]byte(fresh)); !bytes.Equal(got, want) {
						t.Fatalf("%s step %d: changes applied:\n%s\nfresh read:\n%s", c.Name(), i, got, want)
					}
					last[k], version[k] = fresh, now
					break
				}
			}
		}
	}
	if edits < 10 {
		t.Fatalf("only %d edits checked", edits)
	}
}
