// Package nbview is the pure notebook view of the MCP surface: the three resource URIs
// (parse, format, the URIs a change touches) and how notebooks, cells and outputs are
// rendered (cell documents, an output in its richest MIME type). No I/O.
package nbview

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/names"
)

// The URI templates of the three resources, and of the capabilities list.
const (
	TemplateNotebook = "notebook://{name}"
	TemplateCell     = "notebook://{name}/cells/{cell_id}"
	TemplateOutput   = "notebook://{name}/cells/{cell_id}/outputs/{index}"
	CapabilitiesURI  = "capabilities://"
)

const scheme = "notebook://"

// ErrBadURI is returned by ParseURI for a URI that is not one of the three shapes.
var ErrBadURI = errors.New("not a notebook resource URI")

// Ref is a parsed notebook resource URI.
type Ref struct {
	Name   string // bound notebook name
	CellID string // "" for the notebook itself
	Output int    // output index; -1 unless the URI addresses an output
}

// Template returns the URI template r belongs to.
func (r Ref) Template() string {
	switch {
	case r.CellID == "":
		return TemplateNotebook
	case r.Output < 0:
		return TemplateCell
	default:
		return TemplateOutput
	}
}

// String formats r as its canonical URI.
func (r Ref) String() string {
	switch r.Template() {
	case TemplateNotebook:
		return NotebookURI(r.Name)
	case TemplateCell:
		return CellURI(r.Name, r.CellID)
	default:
		return OutputURI(r.Name, r.CellID, r.Output)
	}
}

// NotebookURI is notebook://{name}.
func NotebookURI(name string) string { return scheme + name }

// MaxCellIDBytes is the longest cell id a URI names: nbformat allows 64 characters, and
// a URI the server accepts holds at most a few kB (server.limits.max_uri_bytes). A cell
// with a longer id is served in its notebook only: a store's cell id of 60 MB made every
// change build its URIs, escaped, three times over (red team of issue 39, pass 9).
const MaxCellIDBytes = 1024

// Addressable reports whether a cell with id has URIs of its own: a non-empty id of at
// most MaxCellIDBytes.
func Addressable(id string) bool { return id != "" && len(id) <= MaxCellIDBytes }

// CellURI is notebook://{name}/cells/{cell_id}, the id path-escaped; "" for a cell that
// has none (Addressable).
func CellURI(name, cellID string) string {
	if !Addressable(cellID) {
		return ""
	}
	return scheme + name + "/cells/" + url.PathEscape(cellID)
}

// OutputURI is notebook://{name}/cells/{cell_id}/outputs/{index}; "" for a cell that has
// no URI (Addressable).
func OutputURI(name, cellID string, index int) string {
	if !Addressable(cellID) {
		return ""
	}
	return CellURI(name, cellID) + "/outputs/" + strconv.Itoa(index)
}

// ParseURI parses one of the three notebook resource URIs. The name must be a
// valid binding name; the cell id is path-unescaped; the output index is a
// canonical non-negative decimal.
func ParseURI(uri string) (Ref, error) {
	rest, ok := strings.CutPrefix(uri, scheme)
	if !ok {
		return Ref{}, fmt.Errorf("%w: %q", ErrBadURI, uri)
	}
	parts := strings.Split(rest, "/")
	ref := Ref{Name: parts[0], Output: -1}
	if err := names.ValidateName(ref.Name); err != nil {
		return Ref{}, fmt.Errorf("%w: %q: %w", ErrBadURI, uri, err)
	}
	switch len(parts) {
	case 1:
		return ref, nil
	case 3, 5:
	default:
		return Ref{}, fmt.Errorf("%w: %q", ErrBadURI, uri)
	}
	if parts[1] != "cells" || parts[2] == "" {
		return Ref{}, fmt.Errorf("%w: %q", ErrBadURI, uri)
	}
	id, err := url.PathUnescape(parts[2])
	if err != nil || !Addressable(id) {
		return Ref{}, fmt.Errorf("%w: %q: bad cell id", ErrBadURI, uri)
	}
	ref.CellID = id
	if len(parts) == 3 {
		return ref, nil
	}
	if parts[3] != "outputs" {
		return Ref{}, fmt.Errorf("%w: %q", ErrBadURI, uri)
	}
	n, err := strconv.Atoi(parts[4])
	if err != nil || n < 0 || strconv.Itoa(n) != parts[4] {
		return Ref{}, fmt.Errorf("%w: %q: bad output index", ErrBadURI, uri)
	}
	ref.Output = n
	return ref, nil
}
