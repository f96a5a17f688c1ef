package nbview

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// MIME types of the resources.
const (
	MIMENotebook = "application/x-ipynb+json"
	MIMECell     = "application/json"
	MIMEError    = "application/vnd.jupyter.error+json"
	MIMEText     = "text/plain"
)

// outputPreference is the order in which an output's richest MIME type is
// chosen from its data bundle: images first (an agent asked what a figure is
// should not be told "<Figure>"), then markup, then structured data, then
// text/plain, which every kernel attaches beside the real thing. A type not in
// the list ranks after the listed rich types and before text/plain, in
// lexical order. Streams are text/plain; errors are MIMEError (the ename,
// evalue and traceback as JSON).
var outputPreference = []string{
	"image/png",
	"image/jpeg",
	"image/svg+xml",
	"image/gif",
	"image/webp",
	"text/html",
	"text/markdown",
	"text/latex",
	"application/vnd.vegalite.v5+json",
	"application/vnd.vega.v5+json",
	"application/vnd.plotly.v1+json",
	"application/json",
	"application/javascript",
}

// binaryMIME are the types nbformat stores base64-encoded; they are served as blobs.
var binaryMIME = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// MaxMIMEBytes is the longest key of an output's data bundle taken for a MIME type (RFC
// 6838: a type and a subtype of 127 characters each): a longer one is the store's, never a
// kernel's, and is not served as a type (an output's key of 60 MB made each outline copy
// it: red team of issue 39, pass 10).
const MaxMIMEBytes = 255

// OutputMIME returns the MIME type an output is served as.
func OutputMIME(out map[string]any) string {
	switch out["output_type"] {
	case "stream":
		return MIMEText
	case "error":
		return MIMEError
	}
	data, _ := out["data"].(map[string]any)
	if len(data) == 0 {
		return MIMEText
	}
	for _, m := range outputPreference {
		if _, ok := data[m]; ok {
			return m
		}
	}
	var others []string
	for m := range data {
		if m != MIMEText && len(m) <= MaxMIMEBytes {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return MIMEText
	}
	slices.Sort(others)
	return others[0]
}

// OutputBody is an output rendered in its MIME type: Text for textual types,
// Blob (base64, as nbformat stores it) for binary ones.
type OutputBody struct {
	MIME string
	Text string
	Blob string
}

// Binary reports whether the body is served as a blob.
func (b OutputBody) Binary() bool { return b.Blob != "" || binaryMIME[b.MIME] }

// RenderOutput renders out in OutputMIME(out).
func RenderOutput(out map[string]any) (OutputBody, error) {
	mime := OutputMIME(out)
	body := OutputBody{MIME: mime}
	switch out["output_type"] {
	case "stream":
		body.Text = ynotebook.Multiline(out["text"])
		return body, nil
	case "error":
		b, err := json.Marshal(map[string]any{"ename": out["ename"], "evalue": out["evalue"], "traceback": out["traceback"]})
		if err != nil {
			return OutputBody{}, fmt.Errorf("encode error output: %w", err)
		}
		body.Text = string(b)
		return body, nil
	}
	data, _ := out["data"].(map[string]any)
	v := data[mime]
	if binaryMIME[mime] {
		// The base64 without its line breaks, built once: strings.Fields made a string
		// header of 16 bytes for each run between spaces first.
		body.Blob = strings.Map(func(r rune) rune {
			if unicode.IsSpace(r) {
				return -1
			}
			return r
		}, ynotebook.Multiline(v))
		return body, nil
	}
	if s, ok := v.(string); ok {
		body.Text = s
		return body, nil
	}
	if list, ok := v.([]any); ok && allStrings(list) {
		body.Text = ynotebook.Multiline(list)
		return body, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return OutputBody{}, fmt.Errorf("encode %s output: %w", mime, err)
	}
	body.Text = string(b)
	return body, nil
}

func allStrings(list []any) bool {
	for _, v := range list {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return true
}

// OutputEntry is one line of a cell's output table.
type OutputEntry struct {
	Index    int    `json:"index"`
	MIMEType string `json:"mimeType"`
	URI      string `json:"uri,omitempty"` // none when outputs are withheld
}

// NewCellDoc builds the JSON body of notebook://{name}/cells/{cell_id} for the cell at
// index: the cell as jupyter_ydoc's YNotebook.get() yields it, key for key (a key the
// cell lacks is absent, one outside nbformat present), with "index" added and a list of
// outputs replaced by its table (index, MIME type, URI of each output; the URI "" when
// withheld is true). The result is the caller's; its values are shared with the cell.
func NewCellDoc(name string, index int, c ynotebook.Cell, withheld bool) map[string]any {
	doc := c.Object()
	doc["index"] = index
	if _, isList := doc["outputs"].([]any); isList {
		table := make([]OutputEntry, len(c.Outputs))
		for i, out := range c.Outputs {
			table[i] = OutputEntry{Index: i, MIMEType: OutputMIME(out)}
			if !withheld {
				table[i].URI = OutputURI(name, c.ID, i)
			}
		}
		doc["outputs"] = table
	}
	return doc
}

// FindCell returns the first cell with id and its index. A cell without an id (or with
// one that is not a string) has no cell resource: it is served in the notebook, named by
// its index in the notebook's invalid list (docs/COMPATIBILITY.md).
func FindCell(s *ynotebook.Snapshot, id string) (ynotebook.Cell, int, bool) {
	if id == "" {
		return ynotebook.Cell{}, -1, false
	}
	for i, c := range s.All() {
		if c.ID == id {
			return *c, i, true
		}
	}
	return ynotebook.Cell{}, -1, false
}

// ChangedURIs lists the URIs a change to the notebook bound as name touches:
// the notebook, every added, removed, moved or changed cell, and every changed
// output index (of the cells that have URIs: Addressable). The result is sorted with the notebook URI first.
func ChangedURIs(name string, ch ynotebook.Changes) []string {
	set := map[string]bool{}
	for _, list := range [][]string{ch.Added, ch.Removed, ch.Moved} {
		for _, id := range list {
			if Addressable(id) {
				set[CellURI(name, id)] = true
			}
		}
	}
	for id, cc := range ch.Cells {
		if !Addressable(id) {
			continue
		}
		set[CellURI(name, id)] = true
		for _, i := range cc.OutputIndexes {
			set[OutputURI(name, id, i)] = true
		}
	}
	out := make([]string, 0, len(set)+1)
	for u := range set {
		out = append(out, u)
	}
	slices.Sort(out)
	return append([]string{NotebookURI(name)}, out...)
}
