package ynotebook

import (
	"encoding/json"
	"fmt"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/jsonenc"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// The cell types of nbformat 4.5. A cell map of any other type, or of none, is served all
// the same, as YNotebook.get() yields it (Cell.Invalid says why it is not valid nbformat).
const (
	CellCode     = "code"
	CellMarkdown = "markdown"
	CellRaw      = "raw"
)

// Snapshot is an immutable view of a notebook at one point in time: what jupyter_ydoc's
// YNotebook.get() returns for the document, key for key. Its cells are read with Len,
// At, All and Cell; snapshots of the same notebook share the cells neither changed. It
// holds each cell id once, as get() does (dedup.go): a later exact duplicate of a cell is
// left out, a later differing cell with its id is served under a stand-in id.
type Snapshot struct {
	NBFormat      int            // get()'s nbformat: int(meta.nbformat), 0 when absent
	NBFormatMinor int            // get()'s nbformat_minor, 0 when absent
	Metadata      map[string]any // notebook metadata; nil when the document has none or it is not an object

	cells    tree // in document order
	metadata any  // get()'s metadata: meta.metadata as stored, {} when absent
	pruneIDs bool // nbformat 4.0–4.4: cell ids are left out
}

// Cell is one notebook cell: Object is what get() yields for it; the other fields are
// views of it for the sidecar's own use.
type Cell struct {
	ID             string           // the id served ("" when the cell has none)
	CellType       string           // cell_type, "" when absent or not a string
	Source         string           // source, a list of strings joined ("" when absent)
	Metadata       map[string]any   // nil when absent or not an object
	ExecutionCount any              // execution_count, nil when absent
	Outputs        []map[string]any // the outputs, of any cell type (nil for an item that is not an object)
	Attachments    map[string]any   // nil when absent or not an object

	obj      map[string]any // get()'s cell, id as stored
	storedID string         // the id in the document when a string; ID is a stand-in for a duplicate (dedup.go)
	strID    bool           // the stored id is a string
	hasID    bool           // an id is served: the stored string or a stand-in
	key      cellKey        // what get() deduplicates by (idKey)
	// outs name the outputs when read from a list of the document, one an output
	// (yjs.Array.All), with the memory of each: a reread keeps those still there and
	// unchanged, and Footprint does not walk them again.
	outs     []outRef
	outBytes int64 // the outputs' memory: the list and its elements (valueBytes)
	// outShared is the part of it the cell this one was read again from holds too
	// (NewFootprint).
	outShared int64
}

// outRef is an output read from the document: the clock holding it, its memory and the
// sum of its content (jsonSum).
type outRef struct {
	id    yjs.ID
	bytes int64
	sum   contentSum
}

// NewSnapshot returns a snapshot of the given cells and no notebook-level fields, for
// tests of code that reads snapshots; a cell with a non-empty ID has that id (Cell, JSON).
func NewSnapshot(cells ...Cell) *Snapshot {
	cells = slices.Clone(cells)
	read := make([]readCell, len(cells))
	for i := range cells {
		cells[i].setObject(cells[i].fieldsObject())
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

// JSON encodes the snapshot as YNotebook.get() yields it.
func (s *Snapshot) JSON() ([]byte, error) {
	out, err := jsonenc.Marshal(s.Get())
	if err != nil {
		return nil, fmt.Errorf("encode notebook: %w", err)
	}
	return out, nil
}

// Get returns the value YNotebook.get() returns, for Marshal and JSONSize; what it holds
// is shared with the snapshot: do not modify it.
func (s *Snapshot) Get() map[string]any {
	nb := s.Head()
	nb["cells"] = s.cellsJSON()
	return nb
}

// metadataJSON is get()'s notebook metadata: as stored, {} when absent.
func (s *Snapshot) metadataJSON() any {
	switch {
	case s.metadata != nil:
		return s.metadata
	case s.Metadata != nil:
		return s.Metadata // a snapshot of NewSnapshot given metadata
	}
	return map[string]any{}
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

// MarshalJSON encodes the cell as YNotebook.get() yields it.
func (c Cell) MarshalJSON() ([]byte, error) {
	return json.Marshal(c.jsonObject())
}

// Object returns the cell as YNotebook.get() yields it (its id the one served); the
// result is the caller's, its values shared: do not modify them.
func (c *Cell) Object() map[string]any { return c.jsonObject() }

func (c *Cell) jsonObject() map[string]any {
	o := maps.Clone(c.obj)
	if o == nil {
		o = map[string]any{}
	}
	if c.hasID {
		o["id"] = c.ID
	}
	return o
}

// fieldsObject is the get() cell of a Cell made from its fields (NewSnapshot).
func (c *Cell) fieldsObject() map[string]any {
	o := map[string]any{"cell_type": c.CellType, "source": c.Source}
	if c.ID != "" {
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
	}
	if c.Attachments != nil {
		o["attachments"] = c.Attachments
	}
	return o
}

// setObject makes obj, get()'s cell, the cell's and derives its fields from it.
func (c *Cell) setObject(obj map[string]any) {
	c.obj = obj
	c.CellType, _ = obj["cell_type"].(string)
	c.Source = Multiline(obj["source"])
	c.Metadata, _ = obj["metadata"].(map[string]any)
	c.ExecutionCount = obj["execution_count"]
	c.Attachments, _ = obj["attachments"].(map[string]any)
	c.Outputs = nil
	if items, ok := obj["outputs"].([]any); ok {
		c.Outputs = make([]map[string]any, len(items))
		for i, it := range items {
			c.Outputs[i], _ = it.(map[string]any)
		}
	}
	id, has := obj["id"]
	c.storedID, c.strID = "", false
	if s, ok := id.(string); has && ok {
		c.storedID, c.strID = s, true
	}
	c.ID, c.hasID = c.storedID, c.strID
	c.key = idKey(id, has)
}

// withObject is setObject keeping the id c serves (a stand-in stays).
func (c *Cell) withObject(obj map[string]any) {
	id, has := c.ID, c.hasID
	c.setObject(obj)
	c.ID, c.hasID = id, has
}

// idKey is the key get() deduplicates a cell by: its id when Python takes it for true
// (a non-empty string, a number other than 0, true, which equals 1). A number is keyed
// by its text (get()'s, so 5.0 is 5) after numberKey, apart from the string ids (in
// Python 5 != "5").
func idKey(id any, has bool) cellKey {
	if !has {
		return cellKey{}
	}
	switch x := id.(type) {
	case string:
		return cellKey{x, true}
	case json.Number:
		if pyTruthyJSON(x) {
			return cellKey{numberKey + string(x), true}
		}
	case bool:
		if x {
			return cellKey{numberKey + "1", true}
		}
	}
	return cellKey{}
}

// numberKey prefixes the key of a numeric id.
const numberKey = "\x00number:"

// readSnapshotMeta sets every notebook-level field of s from the meta map, as get()
// reads them.
func readSnapshotMeta(s *Snapshot, meta *yjs.Map) {
	var nbformat, minor, md any
	if v, ok := get(meta, "nbformat"); ok {
		nbformat = pyValue(v)
	}
	if v, ok := get(meta, "nbformat_minor"); ok {
		minor = pyValue(v)
	}
	if v, ok := get(meta, "metadata"); ok {
		md = pyValue(v)
	}
	s.setLevel(nbformat, minor, md)
}

// setLevel sets the notebook-level fields of s from get()'s values (nil when absent).
func (s *Snapshot) setLevel(nbformat, minor, md any) {
	s.NBFormat, s.NBFormatMinor = pyInt(nbformat), pyInt(minor)
	s.pruneIDs = s.NBFormat == 4 && s.NBFormatMinor <= 4
	s.metadata = md
	s.Metadata, _ = md.(map[string]any)
}

// pyInt is Python's int() of a value get() holds; 0 where int() would raise (get()
// itself raises there: docs/COMPATIBILITY.md).
func pyInt(v any) int {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.Atoi(string(x)); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(string(x), 64)
		return int(f)
	case bool:
		if x {
			return 1
		}
	case string:
		i, _ := strconv.Atoi(strings.TrimSpace(x))
		return i
	}
	return 0
}

// readCellMap reads a cell map as get() does (_cell_to_py, before ids are pruned).
func readCellMap(m *yjs.Map) *Cell {
	c := &Cell{}
	keys := m.Keys()
	obj := make(map[string]any, len(keys))
	for _, k := range keys {
		v, _ := m.Get(k)
		c.setPyKey(obj, k, v, nil)
	}
	dropFalsyAttachments(obj)
	c.setObject(obj)
	return c
}

// setPyKey sets key k of get()'s cell obj from v, the value of the cell map there (a
// yjs.UndefinedType is None to pycrdt); execution_state is left out, as get() drops it.
// Outputs read from a list of the document are read element by element (readOutputs),
// after the update sc describes (nil: c holds none read before).
func (c *Cell) setPyKey(obj map[string]any, k string, v any, sc *scope) {
	switch k {
	case "execution_state":
		return
	case "outputs":
		if a, ok := v.(*yjs.Array); ok {
			obj[k] = c.readOutputs(a, sc)
			return
		}
		c.outs, c.outBytes, c.outShared = nil, 0, 0
	}
	obj[k] = pyValue(v)
}

// readOutputs reads the outputs list a as get() does. An element read before, as c
// holds it, is taken from c when it is still in a and holds what it held: a plain value
// (an ID's value never changes) or a shared type with no change inside (not in
// scope.inner). Following a cell that appends, inserts or deletes an output a row then
// converts one output a row, not all of them (red team of issue 42, pass 19b, N1: 6,000
// outputs took 116 s; pass 20, R1: inserted at the front, 58 s).
//
// The elements keep their order, so each one the update did not add (yjs.Txn.Added) is
// found in c's at or after the last one found: where it left off, or past the ones the
// update deleted (a walk as long as what it deleted). One not found there (c read
// before another update, which the rooms never do) is looked up in an index of c's,
// made once. It sets c's outs and outBytes.
func (c *Cell) readOutputs(a *yjs.Array, sc *scope) []any {
	prev, _ := c.obj["outputs"].([]any)
	refs := c.outs
	if len(refs) != len(prev) || sc == nil {
		refs = nil
	}
	vals := make([]any, 0, a.Len())
	c.outs = make([]outRef, 0, a.Len())
	c.outBytes, c.outShared = sliceBytes+sliceElem*int64(cap(vals)), 0
	var at map[yjs.ID]int // where refs are, made once one is not found by walking
	j := 0
	for id, v := range a.All() {
		k := -1
		switch {
		case len(refs) == 0 || sc.txn.Added(id):
			// new: read
		case j < len(refs) && refs[j].id == id:
			k = j
		case at == nil:
			for i := j + 1; i < len(refs); i++ {
				if refs[i].id == id {
					k = i
					break
				}
			}
			if k >= 0 {
				break
			}
			at = make(map[yjs.ID]int, len(refs))
			for i, r := range refs {
				at[r.id] = i
			}
			fallthrough
		default:
			if i, ok := at[id]; ok && i >= j {
				k = i
			}
		}
		if k >= 0 {
			j = k + 1
		}
		r := outRef{id: id}
		if k >= 0 && !changedInside(v, sc.inner) {
			vals = append(vals, prev[k])
			r.bytes, r.sum = refs[k].bytes, refs[k].sum
			c.outShared += r.bytes
		} else {
			v := pyValue(v)
			vals = append(vals, v)
			r.bytes, r.sum = valueBytes(v), jsonSum(v)
		}
		c.outs = append(c.outs, r)
		c.outBytes += r.bytes
	}
	return vals
}

// changedInside reports whether v, an element of a list, may hold otherwise than when
// last read: a shared type with a change inside (in inner, scope.inner), or a
// subdocument.
func changedInside(v any, inner map[*yjs.Type]bool) bool {
	switch x := v.(type) {
	case interface{ Type() *yjs.Type }:
		return inner[x.Type()]
	case *yjs.Doc, *yjs.Type:
		return true
	}
	return false
}

// dropFalsyAttachments leaves out attachments that are falsy in Python on a raw or
// markdown cell, as get() does.
func dropFalsyAttachments(obj map[string]any) {
	if ct := obj["cell_type"]; ct != CellRaw && ct != CellMarkdown {
		return
	}
	if att, ok := obj["attachments"]; ok && !pyTruthyJSON(att) {
		delete(obj, "attachments")
	}
}

// pyTruthyJSON is Python's bool() of a value get() holds.
func pyTruthyJSON(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return err != nil || f != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// readParts reads the given parts of cell map m into c again, after the update sc
// describes.
func (c *Cell) readParts(m *yjs.Map, p part, sc *scope) {
	obj := maps.Clone(c.obj)
	for _, k := range partKeys(p) {
		delete(obj, k)
		if v, ok := m.Get(k); ok {
			c.setPyKey(obj, k, v, sc)
		} else if k == "outputs" {
			c.outs, c.outBytes, c.outShared = nil, 0, 0
		}
	}
	dropFalsyAttachments(obj)
	c.withObject(obj)
}

// The sizes Footprint counts: a cell's own structures (its Cell, its place in the tree,
// the views beside its map), a map's header and each of its slots (a key, a value and
// their share of the control bytes at the maps' load factor), a slice's header and
// each element, a string's header.
const (
	cellBytes   = 256
	mapBytes    = 48
	mapSlot     = 40
	sliceBytes  = 24
	sliceElem   = 16
	stringBytes = 16
	refBytes    = 48 // an outRef
)

// Footprint estimates the bytes of memory s holds: its cells, their maps, lists and
// strings, and its notebook metadata, counted whole (cells s shares with other
// snapshots of the same document too). For a snapshot parsed from a file it is within
// a small factor of the heap it takes (a file of one-line cells takes about ten times
// its size), so that what a file makes the process hold is bounded by it.
func (s *Snapshot) Footprint() int64 {
	n := s.HeadFootprint()
	for _, c := range s.All() {
		n += c.Footprint()
	}
	return n
}

// HeadFootprint estimates the memory of the notebook's metadata, Footprint's share that
// is not a cell's.
func (s *Snapshot) HeadFootprint() int64 { return valueBytes(s.metadata) + valueBytes(s.Metadata) }

// Footprint estimates the memory of the cell, as Snapshot.Footprint counts it.
// Outputs read from the document are counted as they were read (outBytes), with no walk.
func (c *Cell) Footprint() int64 {
	list, _ := c.obj["outputs"].([]any)
	if c.outs == nil || list == nil {
		return cellBytes + valueBytes(c.obj)
	}
	return cellBytes + objectBytes(c.obj, "outputs") + int64(len("outputs")) + c.outBytes + refBytes*int64(cap(c.outs))
}

// NewFootprint is the part of Footprint the cell this one was read again from (the same
// cell map's in the notebook's last snapshot) does not hold too: its outputs shared with
// that cell are left out (a cell of 6,000 outputs, one appended, holds about 150 kB of its
// own, not its 3 MB). The versions of a room count it (resources/versions).
func (c *Cell) NewFootprint() int64 { return c.Footprint() - c.outShared }

// objectBytes is valueBytes of x, but for the key skip and its value.
func objectBytes(x map[string]any, skip string) int64 {
	n := int64(mapBytes + mapSlot*max(len(x), 8)*min(len(x), 1))
	for k, e := range x {
		if k != skip || skip == "" {
			n += int64(len(k)) + valueBytes(e)
		}
	}
	return n
}

// valueBytes estimates the memory of v, a decoded JSON value, beyond the slot it is in.
func valueBytes(v any) int64 {
	switch x := v.(type) {
	case map[string]any:
		return objectBytes(x, "")
	case []any:
		n := int64(sliceBytes + sliceElem*cap(x))
		for _, e := range x {
			n += valueBytes(e)
		}
		return n
	case []map[string]any:
		n := int64(sliceBytes + 8*cap(x))
		for _, e := range x {
			n += valueBytes(e)
		}
		return n
	case string:
		return int64(stringBytes + len(x))
	case json.Number:
		return int64(stringBytes + len(x))
	case nil, bool:
		return 0
	}
	return stringBytes // a number
}
