// Package fileid resolves jupyter_server_fileid file ids (the ids in jupyter-collaboration
// room keys) to Jupyter API paths, relative to the Jupyter root directory: from the
// extension's SQLite database, read-only, or from the Jupyter server's REST endpoint.
//
// When no resolver knows an id, the caller falls back to the path the document itself
// records (the jupyter_ydoc state map's "path").
package fileid

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
)

// Schema creates jupyter_server_fileid's Files table as its ArbitraryFileIdManager
// does: the table a database Resolver reads (for demos and tests that write one).
const Schema = `CREATE TABLE Files(id TEXT PRIMARY KEY NOT NULL, path TEXT NOT NULL UNIQUE)`

// ErrNotFound means the resolver knows no file with that id (or none under the root).
var ErrNotFound = errors.New("file id not found")

// ErrUnreadable is wrapped by a lookup, and by Fault, when the file id database exists
// but cannot be read as jupyter_server_fileid's (not an SQLite database, no Files table,
// no permission): fileid.db_path names the wrong file.
var ErrUnreadable = errors.New("not a readable file id database")

// ErrOutsideRoot is wrapped, with ErrNotFound, by a lookup whose file lies outside the
// root directory, and by Fault: when every file does, fileid.root_dir is not the Jupyter
// server's root and no notebook gets its path.
var ErrOutsideRoot = errors.New("file outside the root directory")

// Faulty is a resolver that can say its configuration is wrong: Fault is nil, or why
// its lookups cannot succeed (wrapping ErrUnreadable or ErrOutsideRoot), naming no file id.
type Faulty interface {
	Fault() error
}

// Resolver maps a file id to its API path.
type Resolver interface {
	// Path returns the API path of the file with id fileID, or an error wrapping
	// ErrNotFound.
	Path(ctx context.Context, fileID string) (string, error)
}

// Chain tries its resolvers in order and returns the first path found.
type Chain []Resolver

// Path returns the first resolver's answer that is not an error; otherwise all errors
// joined (wrapping ErrNotFound when any resolver did not know the id).
func (c Chain) Path(ctx context.Context, fileID string) (string, error) {
	var errs []error
	for _, r := range c {
		p, err := r.Path(ctx, fileID)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return "", fmt.Errorf("resolve %s: no resolver: %w", fileID, ErrNotFound)
	}
	return "", fmt.Errorf("resolve %s: %w", fileID, errors.Join(errs...))
}

// Fault joins the faults of the resolvers that report one (Faulty); nil for none.
func (c Chain) Fault() error {
	var errs []error
	for _, r := range c {
		if f, ok := r.(Faulty); ok {
			errs = append(errs, f.Fault())
		}
	}
	return errors.Join(errs...)
}

// apiPath turns a path stored by a file id manager into an API path relative to root,
// the way the managers' _from_normalized_path do: ArbitraryFileIdManager stores
// root + "/" + api path, LocalFileIdManager a normalized absolute path. It reports false
// for a path outside root: the part after root is cleaned first, so that one climbing
// out of it ("root/../elsewhere") is refused, not read as another path inside it.
func apiPath(stored, root string) (string, bool) {
	root = strings.TrimRight(root, "/")
	if stored != root && !strings.HasPrefix(stored, root+"/") {
		return "", false
	}
	rel := path.Clean(strings.TrimLeft(stored[len(root):], "/"))
	switch {
	case rel == ".":
		return "", true
	case rel == ".." || strings.HasPrefix(rel, "../"):
		return "", false
	}
	return rel, true
}
