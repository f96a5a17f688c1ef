package resources

import (
	"context"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/gate"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/nbview"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/subscribers"
)

// Limits refused, as the limit label of mcp_limit_refusals_total.
const (
	limitURIBytes          = "uri_bytes"
	limitNotAResource      = "not_a_resource"
	limitWithheld          = "withheld"
	limitSubscriptions     = "subscriptions"
	limitSubscriptionBytes = "subscription_bytes"
	limitListenURIs        = "listen_uris"
	limitSessions          = "sessions"
)

// errTooManySessions: MaxSessions sessions are live.
var errTooManySessions = errors.New("too many sessions")

// codeTooManySessions is the JSON-RPC error code of an initialize refused for
// MaxSessions (a server error code, as codeWithheld).
const codeTooManySessions = -32011

// Refusal is why a subscription or a session is not admitted: a JSON-RPC error.
type Refusal struct {
	limit   string
	code    int
	message string
}

// subscribable decides whether uri may be subscribed to or listened for: a
// URI of the three notebook templates or of a template an extension added,
// whose template the gate serves, or capabilities://, no longer than MaxURIBytes.
func (s *Server) subscribable(ctx context.Context, uri string) *Refusal {
	if len(uri) > s.cfg.MaxURIBytes {
		return &Refusal{limitURIBytes, mcp.INVALID_PARAMS, fmt.Sprintf("uri is %d bytes; at most %d", len(uri), s.cfg.MaxURIBytes)}
	}
	if uri == nbview.CapabilitiesURI {
		return nil
	}
	var template string
	if ref, err := nbview.ParseURI(uri); err == nil {
		template = ref.Template()
	} else if r, ok := s.exts.Match(uri); ok {
		template = r.Template.URITemplate.Raw()
	} else {
		return &Refusal{limitNotAResource, mcp.RESOURCE_NOT_FOUND,
			fmt.Sprintf("%q is not a resource of this server (notebook://{name}[/cells/{cell_id}[/outputs/{index}]], an extension's template, or capabilities://)", uri)}
	}
	if !s.serves(ctx, template) {
		return &Refusal{limitWithheld, codeWithheld, fmt.Sprintf("%v: %s is not served here (%s)", errWithheld, uri, template)}
	}
	return nil
}

// admitSubscribe decides a resources/subscribe of a 2025-11-25 session before
// the SDK sees it (the SDK's sessions cannot refuse one), and records an
// admitted one in the registry at once so that concurrent subscribes stay
// within the session's limits. heard is the version the subscribe names as last
// heard (_meta VersionKey; "" for none): if the notebook is at another now, the
// session is told at once (resume.go).
func (s *Server) admitSubscribe(ctx context.Context, sessionID, uri, heard string) *Refusal {
	if r := s.subscribable(ctx, uri); r != nil {
		return s.refused(r)
	}
	err := s.subs.Admit(subscribers.SessionKey(sessionID), uri, s.cfg.MaxSubscriptions, s.cfg.MaxSubscriptionBytes)
	switch {
	case errors.Is(err, subscribers.ErrSubscriptions):
		return s.refused(&Refusal{limitSubscriptions, mcp.INVALID_PARAMS, fmt.Sprintf("at most %d subscriptions per session", s.cfg.MaxSubscriptions)})
	case errors.Is(err, subscribers.ErrSubscriptionBytes):
		return s.refused(&Refusal{limitSubscriptionBytes, mcp.INVALID_PARAMS,
			fmt.Sprintf("at most %d bytes of subscribed URIs per session; unsubscribe from some first", s.cfg.MaxSubscriptionBytes)})
	}
	if heard != "" {
		s.resume(subscribers.SessionKey(sessionID), map[string]string{uri: heard})
	}
	return nil
}

// admitRead refuses a resources/read of a URI over MaxURIBytes (nil admits it).
func (s *Server) admitRead(uri string) *Refusal {
	if len(uri) > s.cfg.MaxURIBytes {
		return s.refused(&Refusal{limitURIBytes, mcp.INVALID_PARAMS, fmt.Sprintf("uri is %d bytes; at most %d", len(uri), s.cfg.MaxURIBytes)})
	}
	return nil
}

// listenable returns the URIs of a subscriptions/listen filter that will be
// served: at most MaxListenURIs of them, each subscribable. The SDK
// acknowledges exactly these.
func (s *Server) listenable(ctx context.Context, uris []string) []string {
	if len(uris) > s.cfg.MaxListenURIs {
		s.refused(&Refusal{limit: limitListenURIs})
		uris = uris[:s.cfg.MaxListenURIs]
	}
	kept := make([]string, 0, len(uris))
	for _, u := range uris {
		if r := s.subscribable(ctx, u); r != nil {
			s.refused(r)
			continue
		}
		kept = append(kept, u)
	}
	return kept
}

// refused counts r and returns it.
func (s *Server) refused(r *Refusal) *Refusal {
	s.metrics.refusals.WithLabelValues(r.limit).Inc()
	return r
}

// serves asks the gate whether resources of template are served. What changed in a
// notebook is served only with the notebook itself: it tells its content too.
func (s *Server) serves(ctx context.Context, template string) bool {
	if template == nbview.TemplateChanges && !gate.Decide(ctx, s.gate, nbview.TemplateNotebook, s.log) {
		return false
	}
	return gate.Decide(ctx, s.gate, template, s.log)
}

// refuseSession counts and returns the refusal of an initialize beyond max sessions.
func (s *Server) refuseSession(max int) *Refusal {
	return s.refused(&Refusal{limitSessions, codeTooManySessions,
		fmt.Sprintf("%v: %d sessions are open, the most this server holds; retry later, or end a session you no longer use (DELETE)",
			errTooManySessions, max)})
}

// Answer is the JSON-RPC error answering request id.
func (r *Refusal) Answer(id any) mcp.JSONRPCError {
	return mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id),
		Error: mcp.NewJSONRPCErrorDetails(r.code, r.message, nil)}
}
