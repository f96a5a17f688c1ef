package extensions

import "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/nbview"

// The surface's notebook view, for an extension that points at its resources.

// MIMECell is the MIME type of a cell document: JSON.
const MIMECell = nbview.MIMECell

// NotebookURI is notebook://{name}, the notebook bound as name.
func NotebookURI(name string) string { return nbview.NotebookURI(name) }

// CellURI is notebook://{name}/cells/{cell_id}, the cell id path-escaped; "" for a cell
// with no URI of its own: no id, or one longer than nbview.MaxCellIDBytes (1 KiB).
func CellURI(name, cellID string) string { return nbview.CellURI(name, cellID) }

// OutputMIME is the MIME type a cell output is served as: its richest.
func OutputMIME(out map[string]any) string { return nbview.OutputMIME(out) }

// Addressable reports whether a cell with id has URIs of its own (CellURI): an extension
// leaves out an id that is not, whatever its size.
func Addressable(id string) bool { return nbview.Addressable(id) }
