//lint:file-ignore SA1019 the 2025-11-25 era (resources/subscribe, the GET stream) is served and tested on purpose; mcp-go deprecates its client API

package transport

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/hooks"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/option"
	_ "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/outline"
	_ "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/publishers"
	_ "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/builtin/search"
)

// wrapExt wraps list_notebooks and declares a capability; failCaps fails its declarations.
type wrapExt struct {
	extensions.Base
	name     string
	failCaps bool
}

func (e wrapExt) Manifest() extensions.Manifest {
	return extensions.Manifest{Name: e.name, Version: "1.0.0", APIVersion: extensions.APIVersion}
}

func (e wrapExt) Register(s *extensions.Surface) error {
	s.WrapTool("list_notebooks", func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := next(ctx, r)
			if err == nil {
				res.Content = append(res.Content, mcp.NewTextContent("wrapped by t-wrap"))
			}
			return res, err
		}
	})
	return nil
}

func (e wrapExt) Capabilities() ([]extensions.Capability, error) {
	if e.failCaps {
		return nil, errors.New("cannot tell")
	}
	return []extensions.Capability{{Name: "twrap.listing", Description: "Wraps the listing.", Enabled: true}}, nil
}

type panicHook struct{}

func (panicHook) Before(context.Context, hooks.Call)                      { panic("before") }
func (panicHook) After(context.Context, hooks.Call, time.Duration, error) { panic("after") }

func init() {
	extensions.Register("t-wrap", func(*extensions.Host) (extensions.Extension, error) { return wrapExt{name: "t-wrap"}, nil })
	extensions.Register("t-wrap-badcaps", func(*extensions.Host) (extensions.Extension, error) {
		return wrapExt{name: "t-wrap-badcaps", failCaps: true}, nil
	})
	hooks.Register("t-panic", func(map[string]any, hooks.Deps) (hooks.Hook, error) { return panicHook{}, nil })
}

func TestNewRejectsUnbuildableSeams(t *testing.T) {
	lib := newLibrary(t)
	tests := []struct {
		cfg  resources.Config
		want string
	}{
		{resources.Config{Publisher: resources.Seam{Name: "carrier-pigeon"}}, `"carrier-pigeon"`},
		{resources.Config{Publisher: resources.Seam{Name: "webhook"}}, `"webhook"`},
		{resources.Config{Gate: resources.Seam{Name: "bouncer"}}, `"bouncer"`},
		{resources.Config{Extensions: map[string]map[string]any{"nope": nil}}, `"nope"`},
		{resources.Config{Hooks: map[string]map[string]any{"nope": nil}}, `"nope"`},
		{resources.Config{Notebooks: map[string]string{"a/b": "x.ipynb"}}, "invalid notebook name"},
	}
	for _, tt := range tests {
		tt.cfg.Logger = quietLog
		_, err := resources.New(tt.cfg, lib)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tt.cfg, err, tt.want)
		}
	}
	if _, err := resources.New(resources.Config{Logger: quietLog}, lib); err != nil {
		t.Errorf("the zero config: %v", err)
	}
	// A transport's configuration is its own: one it refuses stops the server it serves.
	if _, err := resources.New(resources.Config{Logger: quietLog}, lib, resources.WithTransport(HTTP(Config{MaxRequestBytes: 100}))); err == nil ||
		!strings.Contains(err.Error(), "max_request_bytes: must be at least 1024, got 100") {
		t.Errorf("New with a transport of max request bytes 100 = %v, want an error naming them", err)
	}
}

func TestExtensionsAndHooksThroughTheServer(t *testing.T) {
	lib := newLibrary(t, testPath)
	r := startServer(t, resources.Config{
		Notebooks:  map[string]string{"work": testPath},
		Extensions: map[string]map[string]any{"t-wrap": nil, "t-wrap-badcaps": nil},
		Hooks:      map[string]map[string]any{"t-panic": nil, "audit": nil, "metrics": nil},
	}, lib)
	c := dialGo(t, r.url, false)
	res := callTool(t, c, "list_notebooks", nil)
	if res.IsError || len(res.Content) != 3 {
		t.Fatalf("list_notebooks through two wrappers and a panicking hook: %+v", res)
	}
	if got := readText(t, c, "notebook://work/cells/c2"); !strings.Contains(got, `"cell_type":"markdown"`) {
		t.Fatalf("a panicking hook broke a read: %s", got)
	}
	var caps struct{ Capabilities []extensions.Capability }
	if err := json.Unmarshal([]byte(readText(t, c, "capabilities://")), &caps); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range caps.Capabilities {
		names = append(names, c.Name+"@"+c.Source)
	}
	want := "notebooks.resources@core notebooks.subscriptions@core twrap.listing@t-wrap"
	if strings.Join(names, " ") != want {
		t.Fatalf("capabilities:// = %v, want %s (the failing extension costs only its own)", names, want)
	}
	if _, ok := c.GetServerCapabilities().Experimental["twrap.listing"]; !ok {
		t.Fatalf("capability not advertised: %v", c.GetServerCapabilities().Experimental)
	}
}

func TestConfiguredPublisherReplacesSubscribers(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	defer hook.Close()
	lib := newLibrary(t, testPath)
	r := startServer(t, resources.Config{
		Notebooks: map[string]string{"work": testPath},
		Publisher: resources.Seam{Name: "webhook", Options: map[string]any{"url": hook.URL}},
	}, lib)
	c := dialGo(t, r.url, false)
	req := mcp.SubscribeRequest{}
	req.Params.URI = "notebook://work"
	if err := c.Subscribe(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r.srv.NotebookChanged(testPath, lib.edit(t, testPath, "source-c1"), noOrigin)
	testenv.Eventually(t, testenv.Wait, "one webhook delivery", func() bool { mu.Lock(); defer mu.Unlock(); return len(bodies) == 1 })
	if !strings.Contains(bodies[0], `"notebook://work/cells/c1"`) {
		t.Fatalf("webhook body %s", bodies[0])
	}
	// A barrier: a session's notifications arrive in order, so once the list_changed
	// of a new binding arrives, any resources/updated queued before it has.
	if res := callTool(t, c, "use_notebook", map[string]any{"notebook_name": "barrier", "notebook_path": testPath}); res.IsError {
		t.Fatalf("use_notebook: %+v", res.Content)
	}
	waitForNote(t, c, string(mcp.MethodNotificationResourcesListChanged))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.notes {
		if n.Method == string(mcp.MethodNotificationResourceUpdated) {
			t.Fatalf("local subscriber notified although a publisher replaces them: %+v", n)
		}
	}
}

func TestBindingsPersistAcrossRestartAndListChanged(t *testing.T) {
	lib := newLibrary(t, testPath, "other.ipynb")
	state := t.TempDir() + "/state.json"
	r := startServer(t, resources.Config{StateFile: state}, lib)
	c := dialGo(t, r.url, false)
	if res := callTool(t, c, "use_notebook", map[string]any{"notebook_name": "work", "notebook_path": testPath}); res.IsError {
		t.Fatalf("use_notebook: %+v", res.Content)
	}
	waitForNote(t, c, string(mcp.MethodNotificationResourcesListChanged))
	list, err := c.ListResources(context.Background(), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, res := range list.Resources {
		uris = append(uris, res.URI)
	}
	if strings.Join(uris, " ") != "capabilities:// notebook://work" {
		t.Fatalf("resources/list = %v", uris)
	}
	r.stop()

	r2 := startServer(t, resources.Config{StateFile: state}, lib)
	c2 := dialGo(t, r2.url, false)
	if got := readText(t, c2, "notebook://work/cells/c1"); !strings.Contains(got, `"id":"c1"`) {
		t.Fatalf("binding lost across restart: %s", got)
	}
	res := callTool(t, c2, "list_notebooks", nil)
	text := res.Content[0].(mcp.TextContent).Text
	if !strings.Contains(text, `"unnamed":["other.ipynb"]`) {
		t.Fatalf("list_notebooks = %s", text)
	}
	if res := callTool(t, c2, "unuse_notebook", map[string]any{"notebook_name": "work"}); res.IsError {
		t.Fatalf("unuse_notebook: %+v", res.Content)
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = "notebook://work"
	if _, err := c2.ReadResource(context.Background(), req); err == nil {
		t.Fatal("read of an unbound name succeeded")
	}
}

// waitForNote waits for a notification of the given method. A 2025-11-25 session's
// notifications wait for its GET stream, which the client opens in the background
// after initialize: on a loaded machine that can take seconds.
func waitForNote(t *testing.T, c *goClient, method string) {
	t.Helper()
	deadline := time.After(testenv.Wait)
	for {
		select {
		case n := <-c.got:
			if n.Method == method {
				return
			}
		case <-deadline:
			t.Fatalf("no %s within %v", method, testenv.Wait)
		}
	}
}

// TestEveryPluginRefusesUnknownOptions builds each compiled-in plugin of the surface, of
// every kind, with a misspelt option: all of them refuse it through the one decoder,
// naming key and plugin (the front's token verifiers: sidecar/auth's TestNewErrors, sidecar/hubauth's
// TestJupyterHubRefusesUnknownOptions).
func TestEveryPluginRefusesUnknownOptions(t *testing.T) {
	lib := newLibrary(t)
	typo := map[string]any{"max_retry": 3}
	tests := []struct {
		name string
		cfg  resources.Config
	}{
		{"publisher subscribers", resources.Config{Publisher: resources.Seam{Name: "subscribers", Options: typo}}},
		{"publisher webhook", resources.Config{Publisher: resources.Seam{Name: "webhook", Options: map[string]any{"url": "http://x", "max_retry": 3}}}},
		{"publisher pgnotify", resources.Config{Publisher: resources.Seam{Name: "pgnotify", Options: map[string]any{"dsn": "postgres://x/y", "max_retry": 3}}}},
		{"gate all", resources.Config{Gate: resources.Seam{Name: "all", Options: typo}}},
		{"gate withhold", resources.Config{Gate: resources.Seam{Name: "withhold", Options: map[string]any{"templates": []any{}, "max_retry": 3}}}},
		{"extension outline", resources.Config{Extensions: map[string]map[string]any{"outline": typo}}},
		{"extension search", resources.Config{Extensions: map[string]map[string]any{"search": typo}}},
		{"hook audit", resources.Config{Hooks: map[string]map[string]any{"audit": typo}}},
		{"hook metrics", resources.Config{Hooks: map[string]map[string]any{"metrics": typo}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Extensions = onlyExtensions(tt.cfg.Extensions)
			tt.cfg.Logger, tt.cfg.Registerer = quietLog, prometheus.NewRegistry()
			_, err := resources.New(tt.cfg, lib)
			plugin := strings.Fields(tt.name)[1]
			if !errors.Is(err, option.ErrUnknown) || !strings.Contains(err.Error(), `"`+plugin+`": max_retry: unknown key (known: `) {
				t.Fatalf("New = %v, want option.ErrUnknown naming %q and max_retry", err, plugin)
			}
		})
	}
}
