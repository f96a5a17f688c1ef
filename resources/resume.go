package resources

import (
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/nbview"
)

// VersionsKey is the _meta member of a 2026-07-28 subscriptions/listen request that
// names, per resource URI, the version last heard for it: a stream that ended (a replica
// lost, a network cut) is listened for again with it, and each resource whose notebook
// is at another version now is notified at once, so no change is missed silently. A
// 2025-11-25 resources/subscribe names it under VersionKey in its own _meta.
const VersionsKey = "io.github.jupyter-mcp-sidecar/versions"

// heardVersions reads VersionsKey of a listen request's _meta: the URIs among uris (the
// ones served) that name a version, and that version.
func heardVersions(meta map[string]any, uris []string) map[string]string {
	named, _ := meta[VersionsKey].(map[string]any)
	if len(named) == 0 {
		return nil
	}
	out := make(map[string]string, min(len(named), len(uris)))
	for _, u := range uris {
		if v, ok := named[u].(string); ok {
			out[u] = v
		}
	}
	return out
}

// resume tells the subscriber key of each URI in heard whose notebook's version now
// differs from the one heard, as a change of it, with the version now. A URI that is
// not a notebook's, cell's or output's, or whose notebook is not served, is left alone:
// it was admitted, and a change of it will be told as usual.
func (s *Server) resume(key string, heard map[string]string) {
	for uri, v := range heard {
		ref, err := nbview.ParseURI(uri)
		if err != nil {
			continue
		}
		path, ok := s.names.Path(ref.Name)
		if !ok {
			continue
		}
		nb, err := s.served(path)
		if err != nil || nb.Version == "" || nb.Version == v {
			continue
		}
		s.subs.Tell(key, uri, nb.Version)
	}
}
