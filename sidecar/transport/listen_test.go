package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

func listenBody(id int, uri string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"resourceSubscriptions":[%q]}}}`, id, uri)
}

// publishing keeps changing the notebook bound to "work" until the test ends.
func publishing(t *testing.T, r *running) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			r.srv.NotebookChanged(testPath, ynotebook.Changes{Metadata: true}, noOrigin)
			runtime.Gosched()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// A change that lands while a listen stream is being set up is sent after
// the stream's acknowledgement, never before it, over HTTP and stdio.
func TestListenAcknowledgementComesFirst(t *testing.T) {
	const uri, streams = "notebook://work", 40
	t.Run("http", func(t *testing.T) {
		r := startServer(t, resources.Config{Notebooks: map[string]string{"work": testPath}}, newLibrary(t, testPath))
		publishing(t, r)
		headers := map[string]string{"Authorization": "Bearer " + testToken, "MCP-Protocol-Version": era20260728, "Mcp-Method": "subscriptions/listen"}
		for i := range streams {
			resp := post(t, r.url, "", headers, listenBody(i+1, uri))
			sc := bufio.NewScanner(resp.Body)
			var methods []string
			for len(methods) < 2 && sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					var m struct{ Method string }
					if err := json.Unmarshal([]byte(data), &m); err != nil {
						t.Fatal(err)
					}
					methods = append(methods, m.Method)
				}
			}
			resp.Body.Close()
			if len(methods) < 2 || methods[0] != string(mcp.MethodNotificationSubscriptionsAcknowledged) || methods[1] != string(mcp.MethodNotificationResourceUpdated) {
				t.Fatalf("stream %d began with %v, want the acknowledgement, then resources/updated", i+1, methods)
			}
		}
	})
	t.Run("stdio", func(t *testing.T) {
		r, p := startStdio(t, served{Config: resources.Config{Notebooks: map[string]string{"work": testPath}}}, newLibrary(t, testPath))
		publishing(t, r)
		for i := range streams {
			id := float64(i + 1)
			p.send(t, listenBody(i+1, uri))
			first := p.await(t, func(m map[string]any) bool {
				params, _ := m["params"].(map[string]any)
				meta, _ := params["_meta"].(map[string]any)
				return m["id"] == id || meta[mcp.MetaKeySubscriptionID] == id
			})
			if first["method"] != string(mcp.MethodNotificationSubscriptionsAcknowledged) {
				t.Fatalf("stream %d began with %v, want the acknowledgement", i+1, first)
			}
			p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, i+1))
			p.await(t, byID(id))
		}
	})
}
