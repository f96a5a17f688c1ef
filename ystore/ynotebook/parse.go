package ynotebook

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
)

// Errors of Parse; each is wrapped with what was refused.
var (
	// ErrTooLarge: the file is longer than Limits.MaxBytes.
	ErrTooLarge = errors.New("notebook too large")
	// ErrTooManyCells: the notebook has more than Limits.MaxCells cells.
	ErrTooManyCells = errors.New("notebook has too many cells")
	// ErrTooDeep: JSON nested deeper than Limits.MaxDepth.
	ErrTooDeep = errors.New("notebook nested too deep")
	// ErrInvalid: not an nbformat 4 notebook (not JSON, not an object, cells not an array).
	ErrInvalid = errors.New("not an nbformat 4 notebook")
)

// Limits bound what Parse reads; a zero field takes its default.
type Limits struct {
	MaxBytes int // longest input, DefaultMaxBytes
	MaxCells int // most cells, DefaultMaxCells
	MaxDepth int // deepest JSON nesting, DefaultMaxDepth
}

// Defaults of Limits.
const (
	DefaultMaxBytes = 64 << 20
	DefaultMaxCells = 100_000
	DefaultMaxDepth = 128
)

// The nbformat version jupyter_ydoc's YNotebook.set assumes when a notebook lacks one.
const (
	defaultNBFormat      = 4
	defaultNBFormatMinor = 5
)

// withDefaults is l with each field that is not positive set to its default.
func (l Limits) withDefaults() Limits {
	l.MaxBytes = cmp.Or(max(l.MaxBytes, 0), DefaultMaxBytes)
	l.MaxCells = cmp.Or(max(l.MaxCells, 0), DefaultMaxCells)
	l.MaxDepth = cmp.Or(max(l.MaxDepth, 0), DefaultMaxDepth)
	return l
}

// Parse converts an nbformat 4 .ipynb file into the snapshot a room holds after
// jupyter-server-ydoc loaded that file: what nbformat.read gives (multi-line strings
// joined, transient fields stripped) as jupyter_ydoc's YNotebook.set stores it (cell
// metadata always present, empty attachments dropped, the notebook's nbformat 4.5 and
// metadata {} when absent). Cells of unknown type are left out, as from a room. A cell
// without an id has none (a room would give it a random one). Parse never panics; its
// errors wrap ErrTooLarge, ErrTooManyCells, ErrTooDeep or ErrInvalid.
func Parse(data []byte, lim Limits) (*Snapshot, error) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), lim.MaxBytes)
	}
	if d := depth(data); d > lim.MaxDepth {
		return nil, fmt.Errorf("%w: depth over %d", ErrTooDeep, lim.MaxDepth)
	}
	var raw struct {
		Cells         []json.RawMessage `json:"cells"`
		Metadata      any               `json:"metadata"`
		NBFormat      any               `json:"nbformat"`
		NBFormatMinor any               `json:"nbformat_minor"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(raw.Cells) > lim.MaxCells {
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooManyCells, len(raw.Cells), lim.MaxCells)
	}
	s := &Snapshot{nbformat: raw.NBFormat, nbformatMinor: raw.NBFormatMinor, hasNBFormat: true, hasMinor: true}
	if s.nbformat == nil {
		s.nbformat = float64(defaultNBFormat)
	}
	if s.nbformatMinor == nil {
		s.nbformatMinor = float64(defaultNBFormatMinor)
	}
	if major, ok := s.nbformat.(float64); !ok || major != 4 {
		return nil, fmt.Errorf("%w: nbformat %v", ErrInvalid, s.nbformat)
	}
	md, _ := raw.Metadata.(map[string]any)
	md = maps.Clone(md)
	if md == nil {
		md = map[string]any{}
	}
	for _, k := range []string{"orig_nbformat", "orig_nbformat_minor", "signature"} {
		delete(md, k) // nbformat's strip_transient
	}
	s.setLevel(md)
	read := make([]readCell, 0, len(raw.Cells))
	for i, rc := range raw.Cells {
		var obj map[string]any
		if err := json.Unmarshal(rc, &obj); err != nil {
			return nil, fmt.Errorf("%w: cell %d: %w", ErrInvalid, i, err)
		}
		if c, ok := parseCell(obj); ok {
			read = append(read, readCell{cell: c})
		}
	}
	s.cells = buildTree(read, 0)
	return s, nil
}

// parseCell is one cell of a file as a room holds it; ok is false for an unknown type.
func parseCell(obj map[string]any) (*Cell, bool) {
	c := &Cell{}
	c.CellType, _ = obj["cell_type"].(string)
	switch c.CellType {
	case CellCode, CellMarkdown, CellRaw:
	default:
		return nil, false
	}
	c.ID, c.hasID = obj["id"].(string)
	c.storedID = c.ID
	c.Source = Multiline(obj["source"])
	c.Metadata, _ = obj["metadata"].(map[string]any)
	c.Metadata = maps.Clone(c.Metadata)
	if c.Metadata == nil {
		c.Metadata = map[string]any{}
	}
	delete(c.Metadata, "trusted") // nbformat's strip_transient
	if c.CellType == CellCode {
		c.ExecutionCount = obj["execution_count"] // 0 included, as the server reads it
		items, _ := obj["outputs"].([]any)
		c.Outputs = make([]map[string]any, 0, len(items))
		for _, it := range items {
			if o, ok := it.(map[string]any); ok {
				c.Outputs = append(c.Outputs, parseOutput(o))
			}
		}
		return c, true
	}
	if att, ok := obj["attachments"]; ok && truthy(att) && !isEmptyObject(att) { // YNotebook drops empty ones
		c.attachments, c.hasAttachments = joinBundles(att), true
		c.Attachments, _ = c.attachments.(map[string]any)
	}
	return c, true
}

// parseOutput joins an output's multi-line strings as nbformat's rejoin_lines does.
func parseOutput(o map[string]any) map[string]any {
	o = maps.Clone(o)
	switch o["output_type"] {
	case "stream":
		if t, ok := o["text"]; ok {
			o["text"] = Multiline(t)
		}
	case "display_data", "execute_result":
		if d, ok := o["data"].(map[string]any); ok {
			o["data"] = joinBundle(d)
		}
	}
	return o
}

// joinBundles joins the MIME bundles of attachments (name → bundle).
func joinBundles(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, b := range m {
		if bundle, ok := b.(map[string]any); ok {
			out[k] = joinBundle(bundle)
		} else {
			out[k] = b
		}
	}
	return out
}

// joinBundle joins the list values of a MIME bundle whose type is not JSON.
func joinBundle(d map[string]any) map[string]any {
	out := make(map[string]any, len(d))
	for mime, v := range d {
		if _, isList := v.([]any); isList && !isJSONMIME(mime) {
			v = Multiline(v)
		}
		out[mime] = v
	}
	return out
}

// isJSONMIME is nbformat's _is_json_mime: application/json and application/*+json.
func isJSONMIME(mime string) bool {
	return mime == "application/json" ||
		len(mime) > len("application/+json") && mime[:len("application/")] == "application/" && mime[len(mime)-len("+json"):] == "+json"
}

// Multiline joins one of nbformat's multi-line strings: a string, or a list of strings
// concatenated ("" for anything else).
func Multiline(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var b bytes.Buffer
		for _, e := range x {
			if s, ok := e.(string); ok {
				b.WriteString(s)
			}
		}
		return b.String()
	}
	return ""
}

func isEmptyObject(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}

// depth is the deepest nesting of arrays and objects in JSON text, strings skipped.
func depth(data []byte) int {
	d, deepest := 0, 0
	inString, escaped := false, false
	for _, b := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '[' || b == '{':
			d++
			deepest = max(deepest, d)
		case b == ']' || b == '}':
			d--
		}
	}
	return deepest
}
