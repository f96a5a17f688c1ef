package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// goClient is mcp-go's client on one protocol era.
type goClient struct {
	t      testing.TB
	c      *client.Client
	modern bool
	notes  chan string
	times  chan time.Time // receipt time of each notification, beside notes
	acks   chan struct{}  // one per listen acknowledgement (2026-07-28)

	mu         sync.Mutex
	filter     []string
	stopListen func()
}

func dialGo(t testing.TB, url string, modern bool) *goClient {
	t.Helper()
	g, err := dialGoAs(t, url, modern, "Bearer "+token)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// dialGoAs connects an mcp-go client sending authorization as its Authorization header;
// it fails when the server refuses to initialize.
func dialGoAs(t testing.TB, url string, modern bool, authorization string) (*goClient, error) {
	t.Helper()
	topts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": authorization})}
	opts := []client.ClientOption{client.WithProtocolVersion(mcp.ProtocolVersion20260728)}
	if !modern {
		// 2025-11-25 notifications arrive on the session's standalone GET stream.
		//lint:ignore SA1019 the 2025-11-25 era, GET stream included, is under test
		topts = append(topts, transport.WithContinuousListening())
		opts = []client.ClientOption{client.WithProtocolVersion(mcp.ProtocolVersion20251125)}
	}
	tr, err := transport.NewStreamableHTTP(url, topts...)
	if err != nil {
		t.Fatal(err)
	}
	g := &goClient{t: t, c: client.NewClient(tr, opts...), modern: modern, notes: make(chan string, 100000), times: make(chan time.Time, 100000), acks: make(chan struct{}, 16)}
	g.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationSubscriptionsAcknowledged) {
			select {
			case g.acks <- struct{}{}:
			default: // nobody waits for that many
			}
			return
		}
		if n.Method != string(mcp.MethodNotificationResourceUpdated) {
			return
		}
		if uri, ok := n.Params.AdditionalFields["uri"].(string); ok {
			g.times <- time.Now()
			g.notes <- uri
		}
	})
	// The 2025-11-25 GET listener lives on Start's context: it must outlast the test.
	if err := g.c.Start(context.Background()); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "sidecar-e2e", Version: "1"}
	res, err := g.c.Initialize(waitCtx(t, testenv.Wait), init)
	if err != nil {
		_ = g.c.Close()
		return nil, err
	}
	want := mcp.ProtocolVersion20251125
	if modern {
		want = mcp.ProtocolVersion20260728
	}
	if res.ProtocolVersion != want {
		t.Fatalf("negotiated %s, want %s", res.ProtocolVersion, want)
	}
	t.Cleanup(g.close)
	return g, nil
}

func (g *goClient) name() string {
	if g.modern {
		return "mcp-go/2026-07-28"
	}
	return "mcp-go/2025-11-25"
}

func (g *goClient) bind(name, path string) {
	g.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = "use_notebook"
	req.Params.Arguments = map[string]any{"notebook_name": name, "notebook_path": path}
	res, err := g.c.CallTool(waitCtx(g.t, testenv.Wait), req)
	if err != nil {
		g.t.Fatal(err)
	}
	if res.IsError {
		g.t.Fatalf("use_notebook: %+v", res.Content)
	}
}

func (g *goClient) subscribe(uris ...string) {
	g.t.Helper()
	if g.modern {
		g.mu.Lock()
		g.filter = append(g.filter, uris...)
		g.mu.Unlock()
		g.listen()
		return
	}
	for _, u := range uris {
		req := mcp.SubscribeRequest{}
		req.Params.URI = u
		//lint:ignore SA1019 the 2025-11-25 era is under test
		if err := g.c.Subscribe(waitCtx(g.t, testenv.Wait), req); err != nil {
			g.t.Fatal(err)
		}
	}
}

func (g *goClient) unsubscribe(uris ...string) {
	g.t.Helper()
	if g.modern {
		g.mu.Lock()
		g.filter = slices.DeleteFunc(g.filter, func(u string) bool { return slices.Contains(uris, u) })
		g.mu.Unlock()
		g.listen()
		return
	}
	for _, u := range uris {
		req := mcp.UnsubscribeRequest{}
		req.Params.URI = u
		//lint:ignore SA1019 the 2025-11-25 era is under test
		if err := g.c.Unsubscribe(waitCtx(g.t, testenv.Wait), req); err != nil {
			g.t.Fatal(err)
		}
	}
}

// listen (re)opens the subscriptions/listen stream with the current filter.
func (g *goClient) listen() {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopListen != nil {
		g.stopListen()
		g.stopListen = nil
	}
	if len(g.filter) == 0 {
		return
	}
	for len(g.acks) > 0 { // of streams closed before theirs arrived
		<-g.acks
	}
	stop, err := g.c.ListenAsync(context.Background(),
		mcp.SubscriptionFilter{ResourceSubscriptions: slices.Clone(g.filter)},
		func(err error) { g.t.Errorf("%s listen: %v", g.name(), err) })
	if err != nil {
		g.t.Fatal(err)
	}
	g.stopListen = stop
	// The server registers the stream's subscriptions before it acknowledges them.
	testenv.Receive(g.t, testenv.Wait, g.name()+" listen acknowledged", g.acks)
}

func (g *goClient) read(uri string) string {
	g.t.Helper()
	text, err := g.tryRead(uri)
	if err != nil {
		g.t.Fatal(err)
	}
	return text
}

// tryRead reads a text resource, returning what went wrong instead of failing.
func (g *goClient) tryRead(uri string) (string, error) {
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := g.c.ReadResource(waitCtx(g.t, testenv.Wait), req)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", uri, err)
	}
	if len(res.Contents) != 1 {
		return "", fmt.Errorf("read %s: %d contents", uri, len(res.Contents))
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok {
		return "", fmt.Errorf("read %s: %T", uri, res.Contents[0])
	}
	return tc.Text, nil
}

func (g *goClient) updates() <-chan string { return g.notes }

func (g *goClient) close() {
	g.mu.Lock()
	if g.stopListen != nil {
		g.stopListen()
		g.stopListen = nil
	}
	g.mu.Unlock()
	_ = g.c.Close()
}
