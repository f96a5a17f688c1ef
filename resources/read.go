package resources

import (
	"context"
	"errors"
	"fmt"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/jsonenc"
	"maps"
	"sync"
	"time"
	"unsafe"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/heap"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/extensions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/hooks"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/nbview"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/library"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// Errors a read answers with, and the JSON-RPC codes they map to.
var (
	// errWithheld: the resource gate withholds this resource's template.
	errWithheld = errors.New("resource withheld")
)

// codeWithheld is the JSON-RPC error code of a withheld resource, in both
// eras. Not-found is -32002 at 2025-11-25 and -32602 (invalid params) at
// 2026-07-28, as each revision specifies.
const codeWithheld = -32010

// readResource is the SDK handler of all three templates and of the bound
// notebooks' static resources.
func (s *Server) readResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	ref, perr := nbview.ParseURI(uri)
	template := ref.Template()
	if perr != nil {
		template = ""
	}
	ttl := s.cfg.NotebookTTL
	if perr == nil && ref.Output >= 0 {
		ttl = s.cfg.OutputTTL
	}
	return s.observeRead(ctx, uri, template, ttl, func(ctx context.Context) ([]mcp.ResourceContents, error) {
		if perr != nil {
			return nil, fmt.Errorf("%w: %w", library.ErrNotFound, perr)
		}
		return s.read(ctx, ref, ttl)
	})
}

// readExtension is the SDK handler of a resource template an extension
// added: behind the gate and the hooks, with the notebooks' cache hints.
func (s *Server) readExtension(r extensions.Resource) server.ResourceTemplateHandlerFunc {
	template := r.Template.URITemplate.Raw()
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		uri := req.Params.URI
		return s.observeRead(ctx, uri, template, s.cfg.NotebookTTL, func(ctx context.Context) ([]mcp.ResourceContents, error) {
			if !s.serves(ctx, template) {
				return nil, fmt.Errorf("%w: %s is not served here (%s)", errWithheld, uri, template)
			}
			contents, release, err := s.buildExtensionRead(ctx, r, uri)
			if err != nil {
				return nil, err
			}
			defer release()
			for i, c := range contents {
				if t, ok := c.(mcp.TextResourceContents); ok && t.Meta == nil {
					t.Meta = cacheMeta(s.cfg.NotebookTTL)
					contents[i] = t
				}
			}
			return contents, nil
		})
	}
}

// buildExtensionRead reads uri from r, charged to the reads' memory as the surface's own
// reads are: what an extension builds is known only once built, so the reads of the
// extensions are built one at a time and then charged (holdRead), their text written by
// the transport when the answer has one. Sixteen outline reads at once, built whole and
// charged nothing, killed the process (red team of issue 39, pass 10, H1).
func (s *Server) buildExtensionRead(ctx context.Context, r extensions.Resource, uri string) (_ []mcp.ResourceContents, release func(), err error) {
	if err := s.building.Acquire(ctx, 1); err != nil {
		return nil, nil, fmt.Errorf("read: waiting for other reads to end: %w", err)
	}
	defer s.building.Release(1)
	contents, err := r.Read(ctx, uri)
	if err != nil {
		return nil, nil, err
	}
	var size jsonenc.Size
	for _, c := range contents {
		var n jsonenc.Size
		switch c := c.(type) {
		case mcp.TextResourceContents:
			n, err = jsonenc.Measure(c.Text)
		case mcp.BlobResourceContents:
			n, err = jsonenc.Measure(c.Blob)
		}
		if err != nil {
			return nil, nil, err
		}
		size.JSON, size.AsString = size.JSON+n.JSON, size.AsString+n.AsString
	}
	streamed := len(contents) == 1
	if streamed {
		if t, ok := contents[0].(mcp.TextResourceContents); ok {
			t.Text = answerText(ctx, unsafe.Slice(unsafe.StringData(t.Text), len(t.Text)))
			contents[0] = t
		} else {
			streamed = false
		}
	}
	if !streamed {
		ctx = withoutStreamedText(ctx)
	}
	release, err = s.holdRead(ctx, size, uri)
	if err != nil {
		return nil, nil, err
	}
	return contents, release, nil
}

// observeRead runs a read inside the hooks and records its outcome (error
// code, cache hint) for the transport to patch into the response.
func (s *Server) observeRead(ctx context.Context, uri, template string, ttl time.Duration,
	read func(context.Context) ([]mcp.ResourceContents, error)) ([]mcp.ResourceContents, error) {
	var contents []mcp.ResourceContents
	call := hooks.Call{Kind: hooks.KindResource, Name: uri, Template: template, Session: sessionIDFrom(ctx)}
	err := s.hooks.Observe(ctx, call, func(ctx context.Context) error {
		var err error
		contents, err = read(ctx)
		return err
	})
	modern := mcp.IsModernProtocol(server.RequestProtocolVersion(ctx))
	if o := outcomeFrom(ctx); o != nil {
		*o = ReadOutcome{URI: uri, TTL: ttl, Modern: modern}
		switch {
		case errors.Is(err, errWithheld):
			o.Code, o.Message = codeWithheld, err.Error()
		case errors.Is(err, library.ErrNotFound):
			o.Code, o.Message = mcp.RESOURCE_NOT_FOUND, err.Error()
			if modern {
				o.Code = mcp.INVALID_PARAMS
			}
		case err != nil:
			o.Code, o.Message = mcp.INTERNAL_ERROR, err.Error()
		}
	}
	return contents, err
}

// cacheMeta is the _meta of a read's contents: private, for ttl.
func cacheMeta(ttl time.Duration) map[string]any {
	return map[string]any{"cacheScope": string(mcp.CacheScopePrivate), "ttlMs": ttl.Milliseconds()}
}

// sourceMeta is the _meta entries marking a notebook served from its file; nil otherwise.
func sourceMeta(src library.Source) map[string]any {
	if !src.File {
		return nil
	}
	return map[string]any{SourceKey: "file", ModTimeKey: src.ModTime.UTC().Format(time.RFC3339Nano)}
}

// encodingCopies is how many times its size encoding/json holds at once while it encodes
// a string into an answer: the string appended to a spare slice grown by a quarter at a
// time, the buffer it is then copied into, grown by doubling.
const encodingCopies = 3

// readCharge is what a read of a value of the given size holds until its answer is
// written: its JSON, and, unless the transport writes that into the answer itself
// (StreamedText), the answer encoding it as a string.
func readCharge(ctx context.Context, size jsonenc.Size) int64 {
	if streamedFrom(ctx) != nil {
		return size.JSON
	}
	return size.JSON + encodingCopies*size.AsString
}

// ErrReadTooLarge: a read would build more than the reads in flight may hold at once.
var ErrReadTooLarge = errors.New("read larger than the reads' memory limit")

// holdRead takes, from the memory the reads in flight may build (MaxReadBytes), what a
// read of a value of the given size builds (readCharge), waiting for other reads to end; a
// read that would build more than the whole is refused (ErrReadTooLarge): one that ran
// alone held 5 times its notebook of 60 MB past a user's bound (red team of issue 39,
// pass 9). What it took is given back once the answer is written, or by the release it
// returns (a no-op then), which the caller defers for a transport that does not say when.
// One user reading her notebook of 60 MB eight times at once built 1.5 GB.
func (s *Server) holdRead(ctx context.Context, size jsonenc.Size, what string) (release func(), err error) {
	n := readCharge(ctx, size)
	if n > s.cfg.MaxReadBytes {
		return nil, fmt.Errorf("%w: %s is %.1f MiB of JSON, and its answer would take %.1f MiB of the %.1f MiB the reads in flight may hold (server.limits.max_read_bytes; hub.max_memory_per_user in hub mode): read it by cell, or raise the limit",
			ErrReadTooLarge, what, mib(size.JSON), mib(n), mib(s.cfg.MaxReadBytes))
	}
	if err := s.reads.Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("read: waiting for other reads to end: %w", err)
	}
	once := sync.OnceFunc(func() {
		s.reads.Release(n)
		if n >= heap.Large {
			heap.Release() // the answer is written: what it built is garbage
		}
	})
	if afterAnswered(ctx, once) {
		return func() {}, nil
	}
	return once, nil
}

// answerText is the text a read answers with for body: the placeholder its transport
// writes body in place of (StreamedText), or body itself, never copied (it is not
// written again).
func answerText(ctx context.Context, body []byte) string {
	if st := streamedFrom(ctx); st != nil {
		st.Text = body
		return st.Placeholder
	}
	return unsafe.String(unsafe.SliceData(body), len(body))
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// read resolves ref against the bindings and the library.
func (s *Server) read(ctx context.Context, ref nbview.Ref, ttl time.Duration) ([]mcp.ResourceContents, error) {
	if !s.serves(ctx, ref.Template()) {
		return nil, fmt.Errorf("%w: %s is not served here (%s)", errWithheld, ref, ref.Template())
	}
	path, ok := s.names.Path(ref.Name)
	if !ok {
		return nil, fmt.Errorf("%w: no notebook is bound to the name %q (use_notebook binds one)", library.ErrNotFound, ref.Name)
	}
	nb, err := s.served(path)
	snap, src := nb.Snapshot, nb.Source
	if err != nil {
		if errors.Is(err, library.ErrNotFound) {
			return nil, fmt.Errorf("%w: notebook %q (%s) is not served: %w", library.ErrNotFound, ref.Name, path, err)
		}
		return nil, fmt.Errorf("load notebook %q (%s): %w", ref.Name, path, err)
	}
	meta := cacheMeta(ttl)
	mark := sourceMeta(src)
	maps.Copy(meta, mark)
	if nb.Version != "" {
		meta[VersionKey] = nb.Version // a cell's or an output's too: the notebook's they were read from
		s.announced.seen(path, nb.Version)
	}
	uri := ref.String()
	if ref.CellID == "" {
		get := snap.Get()
		size, err := jsonenc.Measure(get)
		if err != nil {
			return nil, fmt.Errorf("encode notebook %q: %w", ref.Name, err)
		}
		release, err := s.holdRead(ctx, size, fmt.Sprintf("notebook %q", ref.Name))
		if err != nil {
			return nil, err
		}
		defer release()
		body, err := jsonenc.Marshal(get)
		if err != nil {
			return nil, err
		}
		if invalid := snap.Invalid(); len(invalid) > 0 {
			meta[InvalidKey] = invalid
			s.metrics.invalidCells.Add(float64(len(invalid)))
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{Meta: meta, URI: uri, MIMEType: nbview.MIMENotebook, Text: answerText(ctx, body)}}, nil
	}
	cell, index, ok := nbview.FindCell(snap, ref.CellID)
	if !ok {
		return nil, fmt.Errorf("%w: notebook %q has no cell with id %q", library.ErrNotFound, ref.Name, ref.CellID)
	}
	if ref.Output < 0 {
		doc := nbview.NewCellDoc(ref.Name, index, cell, !s.serves(ctx, nbview.TemplateOutput))
		if mark != nil {
			doc["_meta"] = mark
		}
		size, err := jsonenc.Measure(doc)
		if err != nil {
			return nil, fmt.Errorf("encode cell: %w", err)
		}
		release, err := s.holdRead(ctx, size, fmt.Sprintf("cell %q of notebook %q", ref.CellID, ref.Name))
		if err != nil {
			return nil, err
		}
		defer release()
		if reasons := cell.Invalid(); len(reasons) > 0 {
			meta[InvalidKey] = []ynotebook.InvalidCell{{Index: index, Reasons: reasons}}
			s.metrics.invalidCells.Inc()
		}
		body, err := jsonenc.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("encode cell: %w", err)
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{Meta: meta, URI: uri, MIMEType: nbview.MIMECell, Text: answerText(ctx, body)}}, nil
	}
	if ref.Output >= len(cell.Outputs) {
		return nil, fmt.Errorf("%w: cell %q of notebook %q has %d outputs, no index %d", library.ErrNotFound, ref.CellID, ref.Name, len(cell.Outputs), ref.Output)
	}
	// What an output renders to is no larger than its JSON: charged before it is built.
	size, err := jsonenc.Measure(cell.Outputs[ref.Output])
	if err != nil {
		return nil, fmt.Errorf("encode output: %w", err)
	}
	release, err := s.holdRead(ctx, size, fmt.Sprintf("output %d of cell %q of notebook %q", ref.Output, ref.CellID, ref.Name))
	if err != nil {
		return nil, err
	}
	defer release()
	out, err := nbview.RenderOutput(cell.Outputs[ref.Output])
	if err != nil {
		return nil, err
	}
	meta["audience"] = []string{string(mcp.RoleAssistant)}
	if out.Binary() {
		blob := answerText(ctx, unsafe.Slice(unsafe.StringData(out.Blob), len(out.Blob)))
		return []mcp.ResourceContents{mcp.BlobResourceContents{Meta: meta, URI: uri, MIMEType: out.MIME, Blob: blob}}, nil
	}
	text := answerText(ctx, unsafe.Slice(unsafe.StringData(out.Text), len(out.Text)))
	return []mcp.ResourceContents{mcp.TextResourceContents{Meta: meta, URI: uri, MIMEType: out.MIME, Text: text}}, nil
}
