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
