//lint:file-ignore SA1019 the 2025-11-25 era (resources/subscribe, the GET stream) is served and tested on purpose; mcp-go deprecates its client API

package resources_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	clienttransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/library"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/auth"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/front"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/transport"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// This file pins the API the sidecar uses, from outside the package: the surface
// built with its transport (sidecar/transport), its endpoint served by the front
// (sidecar/front), as the sidecar composes them.

// oneNotebook is a Library holding one empty notebook.
type oneNotebook struct{ path string }

func (l oneNotebook) Notebook(path string) (*ynotebook.Snapshot, error) {
	if path != l.path {
		return nil, fmt.Errorf("notebook %s: %w", path, library.ErrNotFound)
	}
	return ynotebook.New().Snapshot(), nil
}

func (l oneNotebook) Paths() []string { return []string{l.path} }

var _ library.Library = oneNotebook{}

func TestPublicAPIOverHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := resources.Config{
		StateFile:  t.TempDir() + "/names.json",
		Notebooks:  map[string]string{"nb": "a.ipynb", "gone": "b.ipynb"},
		Publisher:  resources.Seam{Name: "subscribers"},
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registerer: reg,
	}
	srv, err := resources.New(cfg, oneNotebook{path: "a.ipynb"}, resources.WithTransport(transport.HTTP(transport.Config{Logger: cfg.Logger, Registerer: reg})))
	if err != nil {
		t.Fatal(err)
	}
	if srv.Handler() == nil {
		t.Fatal("Handler() is nil for the HTTP transport")
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	f, err := front.New(front.Config{Listener: ln, Name: "mcp", DrainTimeout: time.Second, Logger: cfg.Logger, Registerer: reg}, front.Probes{Live: ok, Ready: ok, Metrics: ok})
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.New(auth.Default, auth.Settings{Token: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	endpoint, err := front.Edge{Verifier: v}.Wrap(srv.Handler())
	if err != nil {
		t.Fatal(err)
	}
	f.Handle(transport.DefaultPath, endpoint)
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return srv.Run(ctx) })
	g.Go(func() error { <-srv.Loaded(); return f.Run(ctx) }) // the sidecar serves once the names are loaded
	defer func() {
		cancel()
		if err := g.Wait(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	base := "http://" + ln.Addr().String()

	// The probes are served outside the endpoint's authentication.
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: %s", resp.Status)
	}
	// The endpoint is not.
	resp, err = http.Post(base+transport.DefaultPath, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST without a token: %s, want 401", resp.Status)
	}

	tr, err := clienttransport.NewStreamableHTTP(base+transport.DefaultPath,
		clienttransport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer secret"}), clienttransport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	defer c.Close()
	updated := make(chan string, 10)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationResourceUpdated) {
			updated <- fmt.Sprint(n.Params.AdditionalFields["uri"])
		}
	})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	read := func(uri string) error {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		_, err := c.ReadResource(ctx, req)
		return err
	}
	if err := read("notebook://nb"); err != nil {
		t.Fatalf("read notebook://nb: %v", err)
	}
	if err := read("notebook://gone"); err == nil {
		t.Fatal("read of a notebook the Library does not have: no error")
	}
	sub := mcp.SubscribeRequest{}
	sub.Params.URI = "notebook://nb"
	if err := c.Subscribe(ctx, sub); err != nil {
		t.Fatal(err)
	}
	srv.NotebookChanged("a.ipynb", ynotebook.Changes{Metadata: true}, publish.Origin{})
	select {
	case uri := <-updated:
		if uri != "notebook://nb" {
			t.Fatalf("updated %s", uri)
		}
	case <-time.After(15 * time.Second): // the client opens its GET stream on its own time
		t.Fatalf("no notifications/resources/updated after NotebookChanged; the server's delivery series: %s", testenv.Series(reg, "_mcp_"))
	}

	fams := testenv.Gather(t, reg)
	for _, want := range []string{"jupyter_mcp_sidecar_mcp_publisher_errors_total", "jupyter_mcp_sidecar_mcp_calls_total", "jupyter_mcp_sidecar_mcp_notifications_sent_total"} {
		if fams[want] == nil {
			t.Errorf("metric %s not registered (have %v)", want, slices.Sorted(maps.Keys(fams)))
		}
	}
}

func TestPublicAPIOverStdio(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv, err := resources.New(resources.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		oneNotebook{path: "a.ipynb"}, resources.WithTransport(transport.Stdio(transport.Config{Logger: slog.New(slog.DiscardHandler)}, inR, outW)))
	if err != nil {
		t.Fatal(err)
	}
	if srv.Handler() != nil {
		t.Fatal("Handler() is not nil for stdio")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		_ = inW.Close()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	go func() {
		_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	}()
	sc := bufio.NewScanner(outR)
	if !sc.Scan() {
		t.Fatalf("no response: %v", sc.Err())
	}
	var msg struct {
		ID     int `json:"id"`
		Result struct {
			ServerInfo struct{ Name string } `json:"serverInfo"`
		} `json:"result"`
	}
	if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || msg.ID != 1 || msg.Result.ServerInfo.Name != "jupyter-mcp-sidecar" {
		t.Fatalf("initialize answered %s (%v)", sc.Bytes(), err)
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
}
