//lint:file-ignore SA1019 the 2025-11-25 era (resources/subscribe, the GET stream) is served and tested on purpose; mcp-go deprecates its client API

package transport

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/library"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/front"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

const (
	testToken = "test-token"
	testPath  = "work/analysis.ipynb"
)

// stats reports the server's subscribers per era and subscribed URIs, and the
// 2025-11-25 sessions with a GET stream open.
func stats(r *running) (perEra map[string]int, subscriptions, streams int) {
	perEra, subscriptions = r.srv.Subscribers()
	if t, ok := r.tr.(*httpTransport); ok {
		t.outboxes.mu.Lock()
		defer t.outboxes.mu.Unlock()
		for _, o := range t.outboxes.open {
			if o.streaming() {
				streams++
			}
		}
	}
	return perEra, subscriptions, streams
}

// What the surface answers and counts, as clients and /metrics see it
// (resources/read.go, resources/admit.go).
const (
	codeWithheld           = -32010
	codeTooManySessions    = -32011
	limitSessions          = "sessions"
	limitSubscriptionBytes = "subscription_bytes"
)

// fixture is resources/testdata/notebooks.json, made by
// testdata/mcpclient/gen-notebooks.mjs with @jupyter/ydoc.
type fixture struct {
	Initial string `json:"initial"`
	Edits   []struct {
		Name   string `json:"name"`
		Update string `json:"update"`
	} `json:"edits"`
}

func loadFixture(t testing.TB) fixture {
	t.Helper()
	data, err := os.ReadFile("../../resources/testdata/notebooks.json")
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// fixtureLibrary is a library.Library of real ynotebook documents built from the fixture.
type fixtureLibrary struct {
	mu  sync.Mutex
	nbs map[string]*ynotebook.Notebook
	fx  fixture
}

func newLibrary(t testing.TB, paths ...string) *fixtureLibrary {
	t.Helper()
	l := &fixtureLibrary{nbs: map[string]*ynotebook.Notebook{}, fx: loadFixture(t)}
	for _, p := range paths {
		nb := ynotebook.New()
		if _, err := nb.Apply(mustB64(t, l.fx.Initial)); err != nil {
			t.Fatal(err)
		}
		l.nbs[p] = nb
	}
	return l
}

func mustB64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (l *fixtureLibrary) Notebook(path string) (*ynotebook.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nb, ok := l.nbs[path]
	if !ok {
		return nil, fmt.Errorf("%w: %s", library.ErrNotFound, path)
	}
	return nb.Snapshot(), nil
}

func (l *fixtureLibrary) Paths() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for p := range l.nbs {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// edit applies the fixture edit called name to the notebook at path, after the edits
// recorded before it that the notebook has not had (each update holds what the edits
// before it left, their deletes among them: applied alone, it would be applied past a
// gap), and returns what the named edit changed.
func (l *fixtureLibrary) edit(t testing.TB, path, name string) ynotebook.Changes {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	nb := l.nbs[path]
	for _, e := range l.fx.Edits {
		update := mustB64(t, e.Update)
		if e.Name != name {
			if _, err := nb.Apply(update); err != nil {
				t.Fatal(err)
			}
			continue
		}
		ch, err := nb.Apply(update)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	t.Fatalf("no edit %q", name)
	return ynotebook.Changes{}
}

// onlyExtensions disables every compiled-in extension that configured does
// not name: compiled-in extensions are on by default.
func onlyExtensions(configured map[string]map[string]any) map[string]map[string]any {
	out := maps.Clone(configured)
	if out == nil {
		out = map[string]map[string]any{}
	}
	for _, n := range extensions.Names() {
		if _, ok := out[n]; !ok {
			out[n] = map[string]any{"enabled": false}
		}
	}
	return out
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// running is a server serving HTTP on a loopback port, behind the front as the
// sidecar serves it (origin check, CORS, bearer token).
type running struct {
	srv  *resources.Server
	link resources.Link      // the surface as its transport sees it
	tr   resources.Transport // the server's transport
	url  string
	stop func()
}

// withTransport is the option building the transport with nt, recording it and its
// link in r.
func (r *running) withTransport(nt resources.NewTransport) resources.Option {
	return resources.WithTransport(func(l resources.Link) (resources.Transport, error) {
		tr, err := nt(l)
		r.link, r.tr = l, tr
		return tr, err
	})
}

// endpoint is the server's MCP endpoint behind the edge the sidecar puts before it,
// admitting testToken.
func (r *running) endpoint(t testing.TB, reg prometheus.Registerer) http.Handler {
	t.Helper()
	v, err := auth.New(auth.Default, auth.Settings{Token: testToken, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	h, err := front.Edge{Verifier: v, Guard: auth.Guard{Logger: quietLog, Registerer: reg}}.Wrap(r.srv.Handler())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// served is what a test serves: the surface's configuration and its transport's (its
// logger and registerer are the surface's).
type served struct {
	resources.Config
	Transport Config
}

// transportConfig is s.Transport with the surface's logger and registerer.
func (s served) transportConfig() Config {
	c := s.Transport
	c.Logger, c.Registerer = s.Logger, s.Registerer
	return c
}

// startServer serves cfg over HTTP with the transport's defaults (serve).
func startServer(t testing.TB, cfg resources.Config, lib library.Library, opts ...resources.Option) *running {
	t.Helper()
	return serve(t, served{Config: cfg}, lib, opts...)
}

// serve serves s over HTTP behind the front, as the sidecar does.
func serve(t testing.TB, s served, lib library.Library, opts ...resources.Option) *running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if s.StateFile == "" {
		s.StateFile = t.TempDir() + "/state.json"
	}
	s.Extensions = onlyExtensions(s.Extensions)
	s.Logger = cmp.Or(s.Logger, quietLog)
	tc := s.transportConfig().Defaults()
	r := &running{}
	srv, err := resources.New(s.Config, lib, append([]resources.Option{r.withTransport(HTTP(tc))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	r.srv, r.url = srv, "http://"+ln.Addr().String()+tc.Path
	f, err := front.New(front.Config{Listener: ln, Name: "mcp", DrainTimeout: tc.DrainTimeout, Logger: quietLog, Registerer: s.Registerer},
		front.Probes{Live: http.NotFoundHandler(), Ready: http.NotFoundHandler(), Metrics: http.NotFoundHandler()})
	if err != nil {
		t.Fatal(err)
	}
	f.Handle(tc.Path, r.endpoint(t, s.Registerer))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- srv.Run(ctx) }()
	go func() { <-srv.Loaded(); done <- f.Run(ctx) }() // as the sidecar serves it: once the names are loaded
	r.stop = sync.OnceFunc(func() {
		cancel()
		for range 2 {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Run did not return after cancel")
			}
		}
	})
	t.Cleanup(r.stop)
	return r
}

// serving returns once the server answers HTTP: Run has started serving (a request
// waits for its accept), so its goroutines are counted in a baseline taken next.
func (r *running) serving(t testing.TB) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, r.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true // no idle connection left behind
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the server does not answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// goClient is an mcp-go client with every notification it receives.
type goClient struct {
	*client.Client
	mu    sync.Mutex
	notes []mcp.JSONRPCNotification
	got   chan mcp.JSONRPCNotification
}

func dialGo(t testing.TB, url string, modern bool) *goClient {
	t.Helper()
	topts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + testToken})}
	if !modern {
		topts = append(topts, transport.WithContinuousListening())
	}
	tr, err := transport.NewStreamableHTTP(url, topts...)
	if err != nil {
		t.Fatal(err)
	}
	var opts []client.ClientOption
	if !modern {
		opts = append(opts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	}
	c := &goClient{Client: client.NewClient(tr, opts...), got: make(chan mcp.JSONRPCNotification, 10000)}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		c.mu.Lock()
		c.notes = append(c.notes, n)
		c.mu.Unlock()
		c.got <- n
	})
	// Start's context is the GET listener's for the client's whole life.
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "resources-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitUpdated waits for resources/updated notifications until every uri in
// want was seen, and returns the subscription ids they carried.
func (c *goClient) waitUpdated(t testing.TB, within time.Duration, want ...string) []any {
	t.Helper()
	missing := map[string]bool{}
	for _, u := range want {
		missing[u] = true
	}
	var ids []any
	deadline := time.After(within)
	for len(missing) > 0 {
		select {
		case n := <-c.got:
			if n.Method != string(mcp.MethodNotificationResourceUpdated) {
				continue
			}
			uri, _ := n.Params.AdditionalFields["uri"].(string)
			delete(missing, uri)
			if n.Params.Meta != nil {
				ids = append(ids, n.Params.Meta[mcp.MetaKeySubscriptionID])
			}
		case <-deadline:
			t.Fatalf("after %v still missing resources/updated for %v", within, slices.Sorted(maps.Keys(missing)))
		}
	}
	return ids
}

func callTool(t testing.TB, c *goClient, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func readText(t testing.TB, c *goClient, uri string) string {
	t.Helper()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := c.ReadResource(context.Background(), req)
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok {
		t.Fatalf("read %s: %T", uri, res.Contents[0])
	}
	return tc.Text
}
