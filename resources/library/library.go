// Package library is the contract between the live notebooks (sidecar/rooms) and the MCP
// surface (resources): the Library the server reads notebooks from, where a snapshot
// comes from, and the ErrNotFound both wrap. It imports no SDK, so the notebook layer
// builds without mcp-go.
package library

import (
	"errors"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// ErrNotFound is what a Library, a read or an extension wraps for a notebook, name or
// resource that does not exist (extensions.ErrNotFound is the same value).
var ErrNotFound = errors.New("resource not found")

// Library is the notebooks the server serves; the sidecar implements it.
type Library interface {
	// Notebook returns the current snapshot of the notebook at path, or an
	// error wrapping ErrNotFound.
	Notebook(path string) (*ynotebook.Snapshot, error)
	// Paths returns the paths of the notebooks present in the store.
	Paths() []string
}

// Source is where the content of a served notebook comes from when it is not the live
// store: the .ipynb file, newer than the store's last row and different from it.
type Source struct {
	File    bool      // served from the file
	ModTime time.Time // the file's modification time
}

// SourcedLibrary is a Library that also says where each snapshot comes from; reads of
// a notebook served from its file are marked so.
type SourcedLibrary interface {
	Library
	// SourcedNotebook is Notebook with the snapshot's source, taken together.
	SourcedNotebook(path string) (*ynotebook.Snapshot, Source, error)
}

// Served is a notebook as a read gets it: the snapshot, where it comes from, and its
// version (resources/versions: a content address of the room and what is served).
type Served struct {
	Snapshot *ynotebook.Snapshot
	Source   Source
	Version  string
}

// VersionedLibrary is a SourcedLibrary whose notebooks carry versions and which keeps the
// snapshots of their recent versions, so that a reader can be told what changed since
// the version it read.
type VersionedLibrary interface {
	SourcedLibrary
	// Served returns the notebook at path as a read gets it now, with its version, or
	// an error wrapping ErrNotFound.
	Served(path string) (Served, error)
	// Kept returns the snapshot the notebook at path had at version, while it is kept;
	// false when the version is unknown there (never served, forgotten, another room's).
	Kept(path, version string) (*ynotebook.Snapshot, bool)
}
