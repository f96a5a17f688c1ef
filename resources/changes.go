package resources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/nbview"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/library"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/versions"
)

// VersionKey is the _meta key of the version of the notebook a read, a notification
// or a changes answer is of (resources/versions: a content address); a client names
// the versions it last heard under VersionsKey to resume (resume.go).
const VersionKey = "io.github.jupyter-mcp-sidecar/version"

// What changed since a version is a resource, notebook://{name}/changes{?since}, not a
// tool: it is addressed by the notebook's name like its other resources, read with the
// call every client makes after a notification (resources/read), gated and cached as
// they are, and a client that reads resources needs no tool call in its loop (an
// agent's host runs tools through the model; a resource read it can do itself).

// The answers kept: a notification heard by many sessions is followed by the same read
// from each, answered from here. At most answerCacheSize of them, answerCacheBytes in all
// (a hub user's server holds its own).
const (
	answerCacheSize  = 64
	answerCacheBytes = 2 << 20
)

// answerKey names one answer: a notebook, the version asked about and the version now.
type answerKey struct{ name, path, since, version string }

// answers is a small cache of encoded changes answers, by key; the oldest goes first.
type answers struct {
	mu    sync.Mutex
	byKey map[answerKey]string
	order []answerKey
	bytes int
}

func (a *answers) get(k answerKey) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.byKey[k]
	return v, ok
}

func (a *answers) put(k answerKey, v string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byKey == nil {
		a.byKey = make(map[answerKey]string, answerCacheSize)
	}
	if _, ok := a.byKey[k]; ok || len(v) > answerCacheBytes/8 {
		return
	}
	for len(a.order) > 0 && (len(a.order) >= answerCacheSize || a.bytes+len(v) > answerCacheBytes) {
		a.bytes -= len(a.byKey[a.order[0]])
		delete(a.byKey, a.order[0])
		a.order = a.order[1:]
	}
	a.byKey[k] = v
	a.order = append(a.order, k)
	a.bytes += len(v)
}

// announced keeps the version each notebook was last announced at (or first read at), by
// path: the since its subscribers ask about after the next announcement.
type announced struct {
	mu     sync.Mutex
	byPath map[string]string
}

// swap records version ("" : the notebook is not served) as path's last announced one,
// and returns the one before.
func (a *announced) swap(path, version string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	prev := a.byPath[path]
	if version == "" {
		delete(a.byPath, path)
	} else {
		if a.byPath == nil {
			a.byPath = map[string]string{}
		}
		a.byPath[path] = version
	}
	return prev
}

// seen records version as path's when none is yet: a notebook read before its first
// announcement since the server started is asked about after it.
func (a *announced) seen(path, version string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.byPath[path]; !ok && version != "" {
		if a.byPath == nil {
			a.byPath = map[string]string{}
		}
		a.byPath[path] = version
	}
}

// prepare makes, before a change of the notebook at path, now nb, is announced, the
// answer its subscribers ask next (what changed since the version announced before), so
// that their reads find it made.
func (s *Server) prepare(path string, nb library.Served) {
	prev := s.announced.swap(path, nb.Version)
	if prev == "" || nb.Version == "" || prev == nb.Version || !s.Active() {
		return
	}
	for _, name := range s.names.NamesFor(path) {
		s.changesAnswer(name, path, prev, nb)
	}
}

// served is the notebook at path as a read gets it: with its source and version when
// the library says.
func (s *Server) served(path string) (library.Served, error) {
	switch l := s.lib.(type) {
	case library.VersionedLibrary:
		return l.Served(path)
	case library.SourcedLibrary:
		snap, src, err := l.SourcedNotebook(path)
		return library.Served{Snapshot: snap, Source: src}, err
	}
	snap, err := s.lib.Notebook(path)
	return library.Served{Snapshot: snap}, err
}

// readChanges is the SDK handler of notebook://{name}/changes{?since}.
func (s *Server) readChanges(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	return s.observeRead(ctx, uri, nbview.TemplateChanges, s.cfg.NotebookTTL, func(ctx context.Context) ([]mcp.ResourceContents, error) {
		name, since, err := nbview.ParseChangesURI(uri)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", library.ErrNotFound, err)
		}
		if !s.serves(ctx, nbview.TemplateChanges) {
			return nil, fmt.Errorf("%w: %s is not served here (%s)", errWithheld, uri, nbview.TemplateChanges)
		}
		path, ok := s.names.Path(name)
		if !ok {
			return nil, fmt.Errorf("%w: no notebook is bound to the name %q (use_notebook binds one)", library.ErrNotFound, name)
		}
		nb, err := s.served(path)
		if err != nil {
			if errors.Is(err, library.ErrNotFound) {
				return nil, fmt.Errorf("%w: notebook %q (%s) is not served: %w", library.ErrNotFound, name, path, err)
			}
			return nil, fmt.Errorf("load notebook %q (%s): %w", name, path, err)
		}
		body, status := s.changesAnswer(name, path, since, nb)
		s.metrics.changesReads.WithLabelValues(status).Inc()
		meta := cacheMeta(s.cfg.NotebookTTL)
		if nb.Version != "" {
			meta[VersionKey] = nb.Version
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{Meta: meta, URI: uri, MIMEType: nbview.MIMECell, Text: body}}, nil
	})
}

// changesAnswer is the encoded answer for since of the notebook bound as name at path,
// served as nb, and its outcome (ok, or the reason to read the notebook).
func (s *Server) changesAnswer(name, path, since string, nb library.Served) (string, string) {
	k := answerKey{name: name, path: path, since: since, version: nb.Version}
	if nb.Version != "" && versions.Valid(since) {
		if body, ok := s.answers.get(k); ok {
			return body, "cached"
		}
	}
	var doc nbview.ChangesDoc
	vl, versioned := s.lib.(library.VersionedLibrary)
	switch {
	case !versioned || nb.Version == "":
		doc = nbview.ReadNotebook(name, nb.Snapshot.Len(), nbview.ReasonUnversioned)
	case !versions.Valid(since):
		doc = nbview.ReadNotebook(name, nb.Snapshot.Len(), nbview.ReasonMalformed)
	default:
		old := nb.Snapshot
		if since != nb.Version {
			var kept bool
			if old, kept = vl.Kept(path, since); !kept {
				doc = nbview.ReadNotebook(name, nb.Snapshot.Len(), nbview.ReasonUnknown)
				break
			}
		}
		doc = nbview.Changes(name, old, nb.Snapshot, nbview.Bounds{MaxValueBytes: nbview.DefaultMaxValueBytes, MaxAnswerBytes: nbview.DefaultMaxAnswerBytes})
	}
	doc.Version = nb.Version
	if versions.Valid(since) {
		doc.Since = since
	}
	b, err := json.Marshal(doc)
	if err != nil { // the values are a snapshot's: they encode
		return fmt.Sprintf(`{"status":%q,"reason":%q}`, nbview.StatusReadNotebook, err), nbview.ReasonTooLarge
	}
	outcome := doc.Status
	if doc.Status != nbview.StatusOK {
		outcome = doc.Reason
	}
	if versioned && doc.Since != "" && nb.Version != "" {
		s.answers.put(k, string(b))
	}
	return string(b), outcome
}
