package resources

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func drain(ch chan mcp.JSONRPCNotification) []string {
	var out []string
	for {
		select {
		case n := <-ch:
			out = append(out, n.Params.AdditionalFields["uri"].(string))
		default:
			return out
		}
	}
}

func TestRegistryFullChannelRetriesThenDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newServerMetrics()
		r := newRegistry(quietLog, m, time.Second)
		ch := make(chan mcp.JSONRPCNotification, 2)
		r.addSession("s1", ch, false)
		uris := []string{"notebook://w", "notebook://w/cells/a", "notebook://w/cells/b", "notebook://w/cells/c"}
		for _, u := range uris {
			r.subscribe(sessionKey("s1"), u)
		}
		_ = r.Publish(context.Background(), uris)
		got := drain(ch)
		if len(got) != 2 {
			t.Fatalf("first hand-off = %v, want the channel's capacity", got)
		}
		time.Sleep(2 * retryFlush)
		synctest.Wait()
		got = append(got, drain(ch)...)
		if len(got) != 4 {
			t.Fatalf("after a retry = %v, want all four in order", got)
		}
		for i, u := range uris {
			if got[i] != u {
				t.Fatalf("order %v", got)
			}
		}
		// A session that never reads loses its subscriptions after the send timeout.
		_ = r.Publish(context.Background(), uris)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, subs := r.stats(); subs != 0 {
			t.Fatalf("%d subscriptions left on a stuck session", subs)
		}
		if d := testutil.ToFloat64(m.dropped.WithLabelValues(era20251125)); d != 2 {
			t.Fatalf("dropped = %v, want the 2 that never fit", d)
		}
		r.remove(sessionKey("s1"))
	})
}

// A held listen stream queues its changes, coalesced, until it is released.
func TestRegistryHeldListenWaitsForRelease(t *testing.T) {
	r := newRegistry(quietLog, newServerMetrics(), time.Second)
	ch := make(chan mcp.JSONRPCNotification, 10)
	key := r.addListen(ch, 1.0, []string{"notebook://w"}, false, true)
	for range 3 {
		_ = r.Publish(context.Background(), []string{"notebook://w"})
	}
	if got := drain(ch); len(got) != 0 {
		t.Fatalf("held stream sent %v", got)
	}
	r.release(key)
	if got := drain(ch); len(got) != 1 {
		t.Fatalf("released stream sent %v, want one coalesced notification", got)
	}
	r.remove(key)
}

// The registry fills at most three quarters of an SDK channel.
func TestRegistryLeavesRoomForTheSDK(t *testing.T) {
	r := newRegistry(quietLog, newServerMetrics(), time.Second)
	ch := make(chan mcp.JSONRPCNotification, 8)
	key := r.addListen(ch, 1.0, nil, false, false)
	var uris []string
	for i := range 10 {
		uris = append(uris, fmt.Sprintf("notebook://w/cells/c%d", i))
		r.subscribe(key, uris[i])
	}
	_ = r.Publish(context.Background(), uris)
	if len(ch) != 6 {
		t.Fatalf("registry queued %d of a channel of 8, want 6", len(ch))
	}
	r.remove(key)
}

func TestRegistryGatedCoalesces(t *testing.T) {
	r := newRegistry(quietLog, newServerMetrics(), time.Second)
	ch := make(chan mcp.JSONRPCNotification, 100)
	r.addSession("s1", ch, true)
	r.subscribe(sessionKey("s1"), "notebook://w")
	r.unsubscribe(sessionKey("s1"), "notebook://never") // not an error
	_ = r.Publish(context.Background(), []string{"notebook://w"})
	if got := drain(ch); len(got) != 0 {
		t.Fatalf("sent without a GET stream: %v", got)
	}
	r.streamOpened("s1")
	if got := drain(ch); len(got) != 1 {
		t.Fatalf("opening the GET stream sent %v, want the pending one", got)
	}
	r.postStarted("s1", time.Millisecond)
	for range 10 {
		_ = r.Publish(context.Background(), []string{"notebook://w", "notebook://other"})
	}
	if got := drain(ch); len(got) != 0 {
		t.Fatalf("sent while a POST was in flight: %v", got)
	}
	r.postEnded("s1")
	if got := drain(ch); len(got) != 1 || got[0] != "notebook://w" {
		t.Fatalf("after the POST = %v, want one coalesced notification", got)
	}
	r.unsubscribe(sessionKey("s1"), "notebook://w")
	_ = r.Publish(context.Background(), []string{"notebook://w"})
	if got := drain(ch); len(got) != 0 {
		t.Fatalf("sent after unsubscribe: %v", got)
	}
}

func TestRegistryListenTagsSubscriptionID(t *testing.T) {
	r := newRegistry(quietLog, newServerMetrics(), time.Second)
	ch := make(chan mcp.JSONRPCNotification, 10)
	key := r.addListen(ch, "listen:7", []string{"notebook://w/cells/c1"}, false, false)
	_ = r.Publish(context.Background(), []string{"notebook://w", "notebook://w/cells/c1"})
	n := <-ch
	if n.Params.Meta[mcp.MetaKeySubscriptionID] != "listen:7" || n.Params.AdditionalFields["uri"] != "notebook://w/cells/c1" {
		t.Fatalf("notification %+v", n)
	}
	if len(ch) != 0 {
		t.Fatal("notified for a URI not subscribed")
	}
	r.remove(key)
	if perEra, _ := r.stats(); perEra[era20260728] != 0 {
		t.Fatal("listen stream not removed")
	}
}

// listenBody is a 2026-07-28 subscriptions/listen request for uri with the given id.
func listenBody(id int, uri string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"resourceSubscriptions":[%q]}}}`, id, uri)
}

// publishing publishes uri in a tight loop until the test ends, so that a
// change lands while each listen stream is being set up.
func publishing(t *testing.T, r *registry, uri string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_ = r.Publish(ctx, []string{uri})
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
		r := startServer(t, Config{}, newLibrary(t, testPath))
		publishing(t, r.srv.subs, uri)
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
		srv, p := startStdio(t, Config{}, newLibrary(t, testPath))
		publishing(t, srv.subs, uri)
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
