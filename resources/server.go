// Package resources is the MCP surface of the sidecar: the three notebook
// resources (notebook://{name}, …/cells/{cell_id}, …/outputs/{index}), the
// tools that bind names to notebooks, and change notifications for both
// protocol eras (2025-11-25 resources/subscribe and 2026-07-28
// subscriptions/listen), on mcp-go. It serves no client itself: a transport
// (sidecar/transport, Streamable HTTP or stdio) is built from it through the
// seam in seam.go.
//
// The SDK records no subscriptions for its built-in sessions and filters
// resources/updated off listen streams, so the server keeps its own registry and
// delivers on each listen stream's own session tagged with its subscription id.
package resources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"golang.org/x/sync/semaphore"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/sync/errgroup"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/gate"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/hooks"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/nbview"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/subscribers"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/library"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/names"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/publish"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// The keys a read result's _meta (and a cell document's) carry for a notebook served
// from its file: SourceKey is "file", ModTimeKey the file's mtime (RFC 3339).
const (
	SourceKey  = "io.github.jupyter-mcp-sidecar/source"
	ModTimeKey = "io.github.jupyter-mcp-sidecar/mtime"
)

// InvalidKey is the read result's _meta key listing the cells served that are not valid
// nbformat 4.5 ([{index, reasons}], ynotebook.InvalidCell): the notebook is served as
// jupyter_ydoc's YNotebook.get() returns it, which is what the Jupyter server holds and
// saves, so no cell is dropped or mended.
const InvalidKey = "io.github.jupyter-mcp-sidecar/invalid"

// Server is the MCP surface of the sidecar. It owns the mcp-go server (the tools,
// the three resource templates and capabilities://), the name bindings, the seams
// chosen in the configuration (gate, publisher, hooks, extensions), the subscriber
// registry that delivers change notifications, and the transport New was given
// (WithTransport). New builds it without I/O; Run serves it.
type Server struct {
	cfg       Config
	lib       library.Library
	log       *slog.Logger
	mcp       *server.MCPServer
	names     *names.Bindings
	gate      gate.Gate
	publisher publish.Publisher
	exts      *extensions.Set
	caps      []extensions.Capability
	hooks     *hooks.Chain
	subs      *subscribers.Registry
	metrics   metrics
	transport Transport           // nil: none (Check)
	answers   answers             // changes answers made lately (changes.go)
	announced announced           // the version each notebook was last announced at (changes.go)
	reads     *semaphore.Weighted // the memory the reads in flight build (MaxReadBytes: read.go)
	building  *semaphore.Weighted // one extension read built at a time, before it is charged (read.go)

	loaded     chan struct{} // closed once the bindings are loaded
	loadedOnce sync.Once
}

// options are what the Options set.
type options struct {
	transport NewTransport
}

// Option adjusts a Server.
type Option func(*options)

// Core capabilities, listed at capabilities:// beside the extensions' ones.
var coreCapabilities = []extensions.Capability{
	{Name: "notebooks.resources", Description: "Notebooks, cells and outputs as MCP resources addressed by bound name and cell id.", Enabled: true, Source: "core"},
	{Name: "notebooks.subscriptions", Description: "notifications/resources/updated for notebook, cell and output URIs (resources/subscribe and subscriptions/listen).", Enabled: true, Source: "core"},
}

// New builds the server from cfg; it does no I/O. An unknown or unbuildable
// publisher, gate, verifier, extension or hook is an error naming it.
func New(cfg Config, lib library.Library, opts ...Option) (*Server, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid mcp config: %w", err)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s := &Server{cfg: cfg, lib: lib, log: cfg.Logger.With("component", "mcp"), loaded: make(chan struct{}),
		reads: semaphore.NewWeighted(cfg.MaxReadBytes), building: semaphore.NewWeighted(1)}
	var err error
	if s.metrics, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	if s.names, err = names.New(cfg.StateFile, cfg.Notebooks, names.Limits{MaxNames: cfg.MaxNames, MaxPathBytes: cfg.MaxPathBytes}); err != nil {
		return nil, err
	}
	if s.gate, err = gate.New(cfg.Gate.Name, cfg.Gate.Options); err != nil {
		return nil, err
	}
	if s.subs, err = subscribers.New(cfg.Registerer); err != nil {
		return nil, err
	}
	if s.publisher, err = publish.New(cfg.Publisher.Name, cfg.Publisher.Options,
		publish.Deps{Local: s.subs, Logger: s.log, Registerer: cfg.Registerer}); err != nil {
		return nil, err
	}
	if s.hooks, err = hooks.Build(cfg.Hooks, hooks.Deps{Logger: s.log, Registerer: cfg.Registerer}); err != nil {
		return nil, err
	}
	surface := extensions.NewSurface(extensions.SurfaceConfig{
		Reserved: []string{nbview.TemplateNotebook, nbview.TemplateCell, nbview.TemplateOutput, nbview.TemplateChanges, nbview.CapabilitiesURI},
		Logger:   s.log,
	})
	if err := s.addCoreTools(surface); err != nil {
		return nil, err
	}
	if s.exts, err = extensions.Build(cfg.Extensions, surface, extensions.Deps{
		Logger: s.log, Library: extLibrary{s}, Config: cfg.Effective, Core: coreCapabilities,
	}); err != nil {
		return nil, err
	}
	s.caps = append(slices.Clone(coreCapabilities), s.exts.Capabilities()...)
	s.mcp = s.newMCP(surface)
	if o.transport != nil {
		if s.transport, err = o.transport(Link{s}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// newMCP builds the mcp-go server: capabilities, hooks feeding the registry,
// the tools, the templates and the capabilities resource.
func (s *Server) newMCP(surface *extensions.Surface) *server.MCPServer {
	h := &server.Hooks{}
	h.AddOnRegisterSession(func(_ context.Context, sess server.ClientSession) {
		if s.transport != nil {
			s.subs.AddSession(sess.SessionID(), s.transport.SessionStarted(sess))
		}
	})
	h.AddOnUnregisterSession(func(_ context.Context, sess server.ClientSession) {
		s.subs.Remove(subscribers.SessionKey(sess.SessionID()))
		if s.transport != nil {
			s.transport.SessionEnded(sess.SessionID())
		}
	})
	h.AddAfterSubscribe(func(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		s.subs.Subscribe(subscribers.SessionKey(sessionIDFrom(ctx)), req.Params.URI)
	})
	h.AddAfterUnsubscribe(func(ctx context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		s.subs.Unsubscribe(subscribers.SessionKey(sessionIDFrom(ctx)), req.Params.URI)
	})
	h.AddBeforeSubscriptionsListen(func(ctx context.Context, id any, req *mcp.SubscriptionsListenRequest) {
		sink := sinkFrom(ctx)
		want := req.Params.Notifications
		if sink == nil || id == nil || (len(want.ResourceSubscriptions) == 0 && !want.ResourcesListChanged) {
			return
		}
		// The SDK acknowledges what the request holds after this hook: only
		// the URIs that will really be served.
		want.ResourceSubscriptions = s.listenable(ctx, want.ResourceSubscriptions)
		req.Params.Notifications.ResourceSubscriptions = want.ResourceSubscriptions
		key := s.subs.AddListen(sink, id, want.ResourceSubscriptions, want.ResourcesListChanged)
		context.AfterFunc(ctx, func() { s.subs.Remove(key) })
		if m := req.Params.Meta; m != nil {
			s.resume(key, heardVersions(m.AdditionalFields, want.ResourceSubscriptions))
		}
	})
	// Bound notebooks are listed here rather than registered with the SDK: a
	// registration would make the SDK broadcast list_changed itself, bypassing
	// the registry's delivery rules (see registry.listChanged). So the SDK can
	// declare resources.listChanged, and acknowledge it on listen streams.
	h.AddAfterListResources(func(ctx context.Context, _ any, _ *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
		if res.NextCursor != "" || !s.serves(ctx, nbview.TemplateNotebook) {
			return
		}
		for _, b := range s.names.All() {
			res.Resources = append(res.Resources, s.notebookResource(b))
		}
		slices.SortStableFunc(res.Resources, func(a, b mcp.Resource) int { return strings.Compare(a.Name, b.Name) })
	})
	// A withheld template is not listed either.
	h.AddAfterListResourceTemplates(func(ctx context.Context, _ any, _ *mcp.ListResourceTemplatesRequest, res *mcp.ListResourceTemplatesResult) {
		res.ResourceTemplates = slices.DeleteFunc(res.ResourceTemplates, func(t mcp.ResourceTemplate) bool {
			return t.URITemplate != nil && !s.serves(ctx, t.URITemplate.Raw())
		})
	})
	experimental := map[string]any{}
	for _, c := range s.caps {
		experimental[c.Name] = map[string]any{"description": c.Description, "enabled": c.Enabled, "source": c.Source}
	}
	m := server.NewMCPServer("jupyter-mcp-sidecar", s.cfg.Version,
		server.WithResourceCapabilities(true, true),
		server.WithToolCapabilities(false),
		server.WithExperimental(experimental),
		server.WithHooks(h),
		server.WithToolHandlerMiddleware(s.observeTool),
		server.WithRecovery(),
		server.WithResourceRecovery(),
		server.WithMethodCacheHints(mcp.MethodResourcesRead, s.cfg.NotebookTTL.Milliseconds(), mcp.CacheScopePrivate),
		server.WithMethodCacheHints(mcp.MethodResourcesList, s.cfg.NotebookTTL.Milliseconds(), mcp.CacheScopePrivate),
		server.WithInstructions("Notebooks of this Jupyter server as resources. Bind a name with use_notebook, "+
			"then read notebook://{name}, notebook://{name}/cells/{cell_id} and "+
			"notebook://{name}/cells/{cell_id}/outputs/{index}, and subscribe to be told when they change."),
	)
	m.AddTools(surface.Tools()...)
	m.AddResourceTemplate(mcp.NewResourceTemplate(nbview.TemplateNotebook, "notebook",
		mcp.WithTemplateDescription("A bound notebook as nbformat 4 JSON."), mcp.WithTemplateMIMEType(nbview.MIMENotebook)), s.readResource)
	m.AddResourceTemplate(mcp.NewResourceTemplate(nbview.TemplateCell, "cell",
		mcp.WithTemplateDescription("One cell: id, index, type, source, execution count, metadata and its outputs listed (uri, richest mimeType), none inlined."),
		mcp.WithTemplateMIMEType(nbview.MIMECell)), s.readResource)
	m.AddResourceTemplate(mcp.NewResourceTemplate(nbview.TemplateOutput, "output",
		mcp.WithTemplateDescription("One output in its richest type: text as text, images as base64 blobs. Its mimeType is on the cell's output list."),
		mcp.WithTemplateAnnotations([]mcp.Role{mcp.RoleAssistant}, 0.5, "")), s.readResource)
	m.AddResourceTemplate(mcp.NewResourceTemplate(nbview.TemplateChanges, "changes",
		mcp.WithTemplateDescription("What changed in a bound notebook since the version a read or a notification carried (_meta "+VersionKey+"): "+
			"cells added, removed and moved, each changed cell's new parts, notebook metadata; or status read_notebook with the current version."),
		mcp.WithTemplateMIMEType(nbview.MIMECell)), s.readChanges)
	for _, r := range s.exts.Resources() {
		m.AddResourceTemplate(r.Template, s.readExtension(r))
	}
	m.AddResource(mcp.NewResource(nbview.CapabilitiesURI, "capabilities",
		mcp.WithResourceDescription("What this server can do: core and extension capabilities."), mcp.WithMIMEType(nbview.MIMECell)),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			body, err := json.Marshal(map[string]any{"capabilities": s.caps})
			if err != nil {
				return nil, err
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: nbview.CapabilitiesURI, MIMEType: nbview.MIMECell, Text: string(body)}}, nil
		})
	return m
}

// notebookResource is the resources/list entry of a bound notebook.
func (s *Server) notebookResource(b names.Binding) mcp.Resource {
	return mcp.NewResource(nbview.NotebookURI(b.Name), b.Name, mcp.WithResourceDescription(b.Path), mcp.WithMIMEType(nbview.MIMENotebook))
}

// Loaded is closed once Run has loaded the name bindings (or returned): from then
// on a read of a bound name finds it.
func (s *Server) Loaded() <-chan struct{} { return s.loaded }

func (s *Server) markLoaded() { s.loadedOnce.Do(func() { close(s.loaded) }) }

// PublisherHealth is nil while the configured publisher delivers changes, and
// its last error while every attempt since its last success has failed.
func (s *Server) PublisherHealth() error { return s.publisher.Health() }

// Active reports whether a client holds a session or a listen stream.
func (s *Server) Active() bool {
	perEra, _ := s.subs.Stats()
	return perEra[subscribers.Era20251125]+perEra[subscribers.Era20260728] > 0
}

// Subscribers reports the sessions and listen streams told of changes, per protocol
// era ("2025-11-25", "2026-07-28"), and the URIs they are subscribed to in all.
func (s *Server) Subscribers() (perEra map[string]int, uris int) { return s.subs.Stats() }

// Handler returns the MCP endpoint of the server's transport: body limit, session
// tracking, panic recovery (nil for stdio or without a transport). The front
// (sidecar/front) puts the origin check, CORS and authentication before it.
func (s *Server) Handler() http.Handler {
	if s.transport == nil {
		return nil
	}
	return s.transport.Handler()
}

// NotebookChanged publishes a change of the notebook at path, bound to a name or
// not, as one event (publish.NewEvent) carrying the URIs of every name bound to
// it (the extensions' resources among them), and hands it to the extensions'
// subscriptions. The sidecar calls it after its debounce, once a read returns
// the new state, with where the change came from. It never blocks on I/O.
func (s *Server) NotebookChanged(path string, ch ynotebook.Changes, o publish.Origin) {
	s.exts.NotebookChanged(path, ch)
	ev := publish.NewEvent(path, ch, o)
	nb, err := s.served(path)
	if err == nil {
		ev.Version = nb.Version
	}
	s.prepare(path, nb)
	for _, name := range s.names.NamesFor(path) {
		uris := append(nbview.ChangedURIs(name, ch), s.exts.ChangedURIs(name, path, ch)...)
		ev.URIs = append(ev.URIs, slices.DeleteFunc(uris, func(uri string) bool { return s.subscribable(context.Background(), uri) != nil })...)
	}
	s.publish(ev)
}

// NotebookMoved tells the server that the notebook at oldPath is now at newPath (its
// file was renamed): names bound with use_notebook follow it, and their subscribers are
// told the notebook changed. Names from the configuration keep their configured path.
// The publisher gets one event naming both paths.
func (s *Server) NotebookMoved(oldPath, newPath string, o publish.Origin) {
	s.exts.NotebookMoved(oldPath, newPath)
	ev := publish.NewEvent(newPath, ynotebook.Changes{}, o)
	ev.RenamedFrom = oldPath
	if nb, err := s.served(newPath); err == nil {
		ev.Version = nb.Version
	}
	for _, name := range s.names.NamesFor(oldPath) {
		if _, err := s.names.Bind(name, newPath); err != nil {
			s.log.Info("name stays at its configured path after a rename", logkey.Path, newPath, "name", name, "from", oldPath, "err", err)
			continue
		}
		s.subs.ListChanged()
		s.log.Info("name follows its renamed notebook", logkey.Path, newPath, "name", name, "from", oldPath)
		ev.URIs = append(ev.URIs, nbview.NotebookURI(name))
	}
	s.publish(ev)
}

// publish hands ev to the publisher, counting and logging a refusal.
func (s *Server) publish(ev publish.Event) {
	if err := s.publisher.Publish(context.Background(), ev); err != nil {
		s.metrics.publisherErrors.Inc()
		s.log.Warn("publisher did not accept a change", logkey.Path, ev.Path, "uris", len(ev.URIs), "err", err)
	}
}

// Run loads the bindings, starts the publisher and extensions, and serves the
// transport until ctx is done or the transport ends (the stdio client closed its
// input), then gives the extensions StopTimeout to stop.
func (s *Server) Run(ctx context.Context) error {
	defer s.markLoaded()
	switch err := s.names.Load(); {
	case errors.Is(err, names.ErrStateFile):
		return err
	case errors.Is(err, names.ErrCorrupt):
		s.log.Error("state file could not be read; it was moved aside", "file", s.cfg.StateFile, "err", err)
	case err != nil:
		s.log.Warn("state file entries dropped", "file", s.cfg.StateFile, "err", err)
	}
	s.markLoaded()
	if err := s.exts.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.StopTimeout)
		defer cancel()
		if err := s.exts.Stop(stopCtx); err != nil {
			s.log.Error("extensions did not stop cleanly", "err", err)
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	gctx, served := context.WithCancel(gctx) // the transport done (stdio input closed), the rest stops
	defer served()
	g.Go(func() error { return s.publisher.Run(gctx) })
	if s.transport != nil {
		g.Go(func() error { defer served(); return s.transport.Serve(gctx) })
	}
	err := g.Wait()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// extLibrary is the extensions' read-only view of the server's notebooks.
type extLibrary struct{ s *Server }

func (l extLibrary) Notebooks() []extensions.Notebook {
	paths := slices.Sorted(slices.Values(l.s.lib.Paths()))
	out := make([]extensions.Notebook, len(paths))
	for i, p := range paths {
		out[i] = extensions.Notebook{Path: p, Names: slices.Sorted(slices.Values(l.s.names.NamesFor(p)))}
	}
	return out
}

func (l extLibrary) Snapshot(path string) (*ynotebook.Snapshot, error) { return l.s.lib.Notebook(path) }

func (l extLibrary) Resolve(name string) (string, bool) { return l.s.names.Path(name) }

// sessionIDFrom returns the client session id in ctx ("" for none).
func sessionIDFrom(ctx context.Context) string {
	if sess := server.ClientSessionFromContext(ctx); sess != nil {
		return sess.SessionID()
	}
	return ""
}
