package ynotebook

import (
	"encoding/json"
	"fmt"
	"iter"
	"slices"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// Cell types YNotebook knows; cells of any other type are not part of a snapshot (the
// YNotebook model refuses them too).
const (
	CellCode     = "code"
	CellMarkdown = "markdown"
	CellRaw      = "raw"
)

// Snapshot is an immutable nbformat view of a notebook at one point in time. Its cells are
// read with Len, At, All and Cell; snapshots of the same notebook share the cells neither
// changed. It holds each cell id once, as YNotebook.get() does (dedup.go): a later exact
// duplicate of a cell is left out, a later differing cell with its id is served under a
// stand-in id.
type Snapshot struct {
	NBFormat      int            // meta.nbformat, 0 when absent or not a number
	NBFormatMinor int            // meta.nbformat_minor, 0 when absent or not a number
	Metadata      map[string]any // notebook metadata; nil when the document has none

	cells                   tree // in document order
	nbformat, nbformatMinor any  // the values as stored
	hasNBFormat, hasMinor   bool // whether meta holds them
	pruneIDs                bool // nbformat 4.0–4.4: cell ids are left out
}

// Cell is one notebook cell in nbformat shape.
type Cell struct {
	ID             string
	CellType       string
	Source         string
	Metadata       map[string]any   // nil when the cell has no metadata
	ExecutionCount any              // code cells: nil or the count
	Outputs        []map[string]any // code cells: the outputs in order
	Attachments    map[string]any   // markdown and raw cells: nil when absent

	attachments    any    // the attachments value as stored, for values that are not objects
	storedID       string // the id in the document; ID is a stand-in for a duplicate (dedup.go)
	hasID          bool   // false for a cell map without an id (or with one not a string)
	hasAttachments bool
}

// NewSnapshot returns a snapshot of the given cells and no notebook-level fields, for
// tests of code that reads snapshots; a cell with a non-empty ID has that id (Cell, JSON).
func NewSnapshot(cells ...Cell) *Snapshot {
	cells = slices.Clone(cells)
	read := make([]readCell, len(cells))
	for i := range cells {
		cells[i].hasID = cells[i].ID != ""
		cells[i].storedID = cells[i].ID
		read[i].cell = &cells[i]
	}
	return &Snapshot{cells: buildTree(read, 0)}
}

// Len returns the number of cells.
func (s *Snapshot) Len() int {
	if s.cells.root == nil {
		return 0
	}
	return s.cells.root.size
}

// At returns the cell at index i, 0 <= i < Len(), in O(log Len()); the cell is shared with
// the notebook and other snapshots: do not modify it.
func (s *Snapshot) At(i int) *Cell {
	if i < 0 || i >= s.Len() {
		panic(fmt.Sprintf("ynotebook: cell index %d out of range [0,%d)", i, s.Len()))
	}
	return s.cells.root.at(i)
}

// All yields the cells with their indexes in document order; the cells are shared with
// the notebook and other snapshots: do not modify them.
func (s *Snapshot) All() iter.Seq2[int, *Cell] {
	return func(yield func(int, *Cell) bool) {
		if s.cells.root == nil {
			return
		}
		i := 0
		for x := range leaves(s.cells.root) {
			for _, c := range x.cells {
				if !yield(i, c) {
					return
				}
				i++
			}
		}
	}
}

// JSON encodes the snapshot as the nbformat JSON YNotebook.toJSON() yields.
func (s *Snapshot) JSON() ([]byte, error) {
	nb := s.Head()
	nb["cells"] = s.cellsJSON()
	out, err := json.Marshal(nb)
	if err != nil {
		return nil, fmt.Errorf("encode notebook: %w", err)
	}
	return out, nil
}

// cellsJSON returns the cells as JSON objects, without ids for nbformat before 4.5.
func (s *Snapshot) cellsJSON() []any {
	cells := make([]any, s.Len())
	for i, cell := range s.All() {
		c := cell.jsonObject()
		if s.pruneIDs {
			delete(c, "id")
		}
		cells[i] = c
	}
	return cells
}

// Cell returns the first cell with the given id and its index, in O(Len()).
func (s *Snapshot) Cell(id string) (Cell, int, bool) {
	for i, c := range s.All() {
		if c.hasID && c.ID == id {
			return *c, i, true
		}
	}
	return Cell{}, -1, false
}

// MarshalJSON encodes the cell as the nbformat cell object YNotebook.toJSON() yields.
func (c Cell) MarshalJSON() ([]byte, error) {
	return json.Marshal(c.jsonObject())
}

func (c *Cell) jsonObject() map[string]any {
	o := map[string]any{"cell_type": c.CellType, "source": c.Source}
	if c.hasID {
		o["id"] = c.ID
	}
	if c.Metadata != nil {
		o["metadata"] = c.Metadata
	}
	if c.CellType == CellCode {
		outputs := make([]any, len(c.Outputs))
		for i, out := range c.Outputs {
			outputs[i] = out
		}
		o["outputs"] = outputs
		o["execution_count"] = c.ExecutionCount
	} else if c.hasAttachments {
		o["attachments"] = c.attachments
	}
	return o
}

// readSnapshotMeta sets every notebook-level field of s from the meta map.
func readSnapshotMeta(s *Snapshot, meta *yjs.Map) {
	s.nbformat, s.hasNBFormat = get(meta, "nbformat")
	s.nbformatMinor, s.hasMinor = get(meta, "nbformat_minor")
	if s.hasNBFormat {
		s.nbformat = plain(s.nbformat)
	}
	if s.hasMinor {
		s.nbformatMinor = plain(s.nbformatMinor)
	}
	var md any
	if v, ok := get(meta, "metadata"); ok {
		md = copied(v)
	}
	s.setLevel(md)
}

// setLevel derives the typed notebook-level fields of s from the values as stored, and
// sets its metadata from md (nil when absent; a value that is not an object counts as
// none).
func (s *Snapshot) setLevel(md any) {
	s.NBFormat = intOf(s.nbformat)
	s.NBFormatMinor = intOf(s.nbformatMinor)
	major, isNum := s.nbformat.(float64)
	minor, cmp := number(s.nbformatMinor)
	s.pruneIDs = isNum && major == 4 && s.hasMinor && cmp && minor <= 4
	s.Metadata, _ = md.(map[string]any)
}

func intOf(v any) int {
	if f, ok := v.(float64); ok {
		return int(f)
	}
	return 0
}

// readCellMap materializes a cell map; ok is false for a cell YNotebook cannot model (an
// unknown cell type).
func readCellMap(m *yjs.Map) (*Cell, bool) {
	ct, _ := get(m, "cell_type")
	c := &Cell{}
	c.CellType, _ = ct.(string)
	switch c.CellType {
	case CellCode, CellMarkdown, CellRaw:
	default:
		return nil, false
	}
	if id, ok := get(m, "id"); ok {
		c.ID, c.hasID = id.(string)
		c.storedID = c.ID
	}
	c.readParts(m, partAll)
	return c, true
}

// readParts reads the given parts of cell map m into c, whose type is known.
func (c *Cell) readParts(m *yjs.Map, p part) {
	if p&partSource != 0 {
		c.Source = readSource(m)
	}
	if p&partMetadata != 0 {
		c.Metadata = readMetadata(m)
	}
	if c.CellType == CellCode {
		if p&partOutputs != 0 {
			c.Outputs = readOutputs(m)
		}
		if p&partExecutionCount != 0 {
			// As jupyter_ydoc (Python) reads it, and the server saves it: 0 is a count
			// (@jupyter/ydoc's `|| null` makes it null).
			c.ExecutionCount = nil
			if n, ok := get(m, "execution_count"); ok {
				c.ExecutionCount = plain(n)
			}
		}
		return
	}
	if p&partAttachments != 0 {
		c.attachments, c.hasAttachments = get(m, "attachments")
		c.attachments = plain(c.attachments)
		c.Attachments, _ = c.attachments.(map[string]any)
	}
}

// readSource is String(source) for the values a cell source can hold.
func readSource(m *yjs.Map) string {
	v, _ := get(m, "source")
	switch x := v.(type) {
	case *yjs.Text:
		return x.String()
	case string:
		return x
	}
	return ""
}

// readMetadata returns the cell metadata, nil when absent.
func readMetadata(m *yjs.Map) map[string]any {
	md, ok := get(m, "metadata")
	if !ok {
		return nil
	}
	out, _ := copied(md).(map[string]any)
	return out
}

// readOutputs returns the outputs of a code cell: each output is a Y map (stream text as
// Y text) or, in the jupyter_ydoc 2.x layout, a plain object.
func readOutputs(m *yjs.Map) []map[string]any {
	v, _ := get(m, "outputs")
	var items []any
	switch x := v.(type) {
	case *yjs.Array:
		items = x.Values()
	case []any:
		items = x
	}
	outs := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if o, ok := copied(it).(map[string]any); ok {
			outs = append(outs, o)
		}
	}
	return outs
}
