package sidecartest

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

// GoClient is mcp-go's client on one protocol era.
type GoClient struct {
	T      testing.TB
	Client *client.Client
	Modern bool
	Notes  chan string
	Times  chan time.Time // receipt time of each notification, beside notes
	acks   chan struct{}  // one per listen acknowledgement (2026-07-28)

	mu         sync.Mutex
	filter     []string
	stopListen func()
	heard      map[string]string // the version the last notification of each URI carried
}

// DialGo connects mcp-go's client to url with the test token, on the 2026-07-28 era
// if modern, else 2025-11-25.
func DialGo(t testing.TB, url string, modern bool) *GoClient {
	t.Helper()
	g, err := DialGoAs(t, url, modern, "Bearer "+Token)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// DialGoAs connects an mcp-go client sending authorization as its Authorization header;
// it fails when the server refuses to initialize.
func DialGoAs(t testing.TB, url string, modern bool, authorization string) (*GoClient, error) {
	t.Helper()
	topts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": authorization})}
	// The discover probe waits as long as the test does: a hub user's first request waits
	// for her store's load, and mcp-go falls back to 2025-11-25 after 5 s without an answer.
	opts := []client.ClientOption{client.WithProtocolVersion(mcp.ProtocolVersion20260728), client.WithDiscoverTimeout(testenv.Wait)}
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
	g := &GoClient{T: t, Client: client.NewClient(tr, opts...), Modern: modern, Notes: make(chan string, 100000), Times: make(chan time.Time, 100000), acks: make(chan struct{}, 16), heard: map[string]string{}}
	g.Client.OnNotification(func(n mcp.JSONRPCNotification) {
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
			v, _ := n.Params.Meta[VersionKey].(string)
			g.mu.Lock()
			g.heard[uri] = v
			g.mu.Unlock()
			g.Times <- time.Now()
			g.Notes <- uri
		}
	})
	// The 2025-11-25 GET listener lives on Start's context: it must outlast the test.
	if err := g.Client.Start(context.Background()); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "sidecar-e2e", Version: "1"}
	res, err := g.Client.Initialize(WaitCtx(t, testenv.Wait), init)
	if err != nil {
		_ = g.Client.Close()
		return nil, err
	}
	want := mcp.ProtocolVersion20251125
	if modern {
		want = mcp.ProtocolVersion20260728
	}
	if res.ProtocolVersion != want {
		t.Fatalf("negotiated %s, want %s", res.ProtocolVersion, want)
	}
	t.Cleanup(g.Close)
	return g, nil
}

// Name is the client's kind and era.
func (g *GoClient) Name() string {
	if g.Modern {
		return "mcp-go/2026-07-28"
	}
	return "mcp-go/2025-11-25"
}

// Bind binds name to the notebook at path (use_notebook).
func (g *GoClient) Bind(name, path string) {
	g.T.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = "use_notebook"
	req.Params.Arguments = map[string]any{"notebook_name": name, "notebook_path": path}
	res, err := g.Client.CallTool(WaitCtx(g.T, testenv.Wait), req)
	if err != nil {
		g.T.Fatal(err)
	}
	if res.IsError {
		g.T.Fatalf("use_notebook: %+v", res.Content)
	}
}

// Subscribe subscribes to each uri.
func (g *GoClient) Subscribe(uris ...string) {
	g.T.Helper()
	if g.Modern {
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
		if err := g.Client.Subscribe(WaitCtx(g.T, testenv.Wait), req); err != nil {
			g.T.Fatal(err)
		}
	}
}

// Unsubscribe ends the subscriptions to each uri.
func (g *GoClient) Unsubscribe(uris ...string) {
	g.T.Helper()
	if g.Modern {
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
		if err := g.Client.Unsubscribe(WaitCtx(g.T, testenv.Wait), req); err != nil {
			g.T.Fatal(err)
		}
	}
}

// listen (re)opens the subscriptions/listen stream with the current filter.
func (g *GoClient) listen() {
	g.T.Helper()
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
	stop, err := g.Client.ListenAsync(context.Background(),
		mcp.SubscriptionFilter{ResourceSubscriptions: slices.Clone(g.filter)},
		func(err error) { g.T.Errorf("%s listen: %v", g.Name(), err) })
	if err != nil {
		g.T.Fatal(err)
	}
	g.stopListen = stop
	// The server registers the stream's subscriptions before it acknowledges them.
	testenv.Receive(g.T, testenv.Wait, g.Name()+" listen acknowledged", g.acks)
}

// Read returns the text of uri (resources/read).
func (g *GoClient) Read(uri string) string {
	g.T.Helper()
	text, err := g.TryRead(uri)
	if err != nil {
		g.T.Fatal(err)
	}
	return text
}

// TryRead reads a text resource, returning what went wrong instead of failing.
func (g *GoClient) TryRead(uri string) (string, error) {
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := g.Client.ReadResource(WaitCtx(g.T, testenv.Wait), req)
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

// ReadVersioned reads a text resource and returns its text and the version in its
// _meta (io.github.jupyter-mcp-sidecar/version; "" for none).
func (g *GoClient) ReadVersioned(uri string) (string, string) {
	g.T.Helper()
	text, meta := g.ReadMeta(uri)
	v, _ := meta[VersionKey].(string)
	return text, v
}

// Heard returns the version the last notification of uri carried ("" for none).
func (g *GoClient) Heard(uri string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.heard[uri]
}

// VersionKey is the _meta key of a read's version (resources.VersionKey).
const VersionKey = "io.github.jupyter-mcp-sidecar/version"

// Updates are the URIs the server says were updated.
func (g *GoClient) Updates() <-chan string { return g.Notes }

// Close ends the session.
func (g *GoClient) Close() {
	g.mu.Lock()
	if g.stopListen != nil {
		g.stopListen()
		g.stopListen = nil
	}
	g.mu.Unlock()
	_ = g.Client.Close()
}

// CallTool calls a tool and returns its text; an error result fails the test.
func (g *GoClient) CallTool(name string, args map[string]any) string {
	g.T.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := g.Client.CallTool(WaitCtx(g.T, testenv.Wait), req)
	if err != nil {
		g.T.Fatalf("%s: %v", name, err)
	}
	if res.IsError || len(res.Content) == 0 {
		g.T.Fatalf("%s: %+v", name, res.Content)
	}
	return res.Content[0].(mcp.TextContent).Text
}
