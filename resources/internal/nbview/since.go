package nbview

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/names"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// TemplateChanges is the URI template of what changed in a notebook since a version.
const TemplateChanges = "notebook://{name}/changes{?since}"

// The status of a changes answer: ok (the changes are listed), or read_notebook (they
// cannot be: read the notebook, whose version the answer gives).
const (
	StatusOK           = "ok"
	StatusReadNotebook = "read_notebook"
)

// Why a changes answer says read_notebook.
const (
	ReasonUnknown     = "unknown_version"   // not kept here: older than what is kept, another room's or user's, never served
	ReasonMalformed   = "malformed_version" // not a version at all (empty, too long, another scheme)
	ReasonNoIDs       = "cells_without_ids" // the notebook serves cells without unique ids (nbformat before 4.5), or with ids no URI names
	ReasonTooLarge    = "too_large"         // even the cells' URIs alone exceed the answer's bound
	ReasonUnversioned = "unversioned"       // the library serving the notebook keeps no versions
)

// Bounds of a changes answer.
const (
	// DefaultMaxValueBytes bounds one value given inline (a cell's source, its outputs,
	// its metadata, an added cell): a larger one is named by the URI to read instead.
	DefaultMaxValueBytes = 16 << 10
	// DefaultMaxAnswerBytes bounds the answer: past it, changed and added cells are
	// given by their URIs only (Truncated).
	DefaultMaxAnswerBytes = 256 << 10
)

// versionBytes is the length of a version (resources/versions), which the caller sets.
const versionBytes = 25

// Bounds are the sizes a changes answer keeps within.
type Bounds struct {
	MaxValueBytes  int
	MaxAnswerBytes int
}

// ChangesDoc is the body of notebook://{name}/changes?since=VERSION: what changed from
// the snapshot at Since to the one at Version, in the shape a reader applies to its last
// read of the notebook (cells by id; indexes in the notebook they belong to).
type ChangesDoc struct {
	URI     string `json:"uri"`             // the notebook's URI
	Version string `json:"version"`         // the notebook's version now
	Since   string `json:"since,omitempty"` // the version asked about, when it is one
	Status  string `json:"status"`          // StatusOK or StatusReadNotebook
	Reason  string `json:"reason,omitempty"`
	Cells   int    `json:"cells"` // the number of cells now
	// Notebook holds the notebook-level members now (metadata, nbformat,
	// nbformat_minor; one absent is absent from the notebook), when any changed.
	Notebook json.RawMessage `json:"notebook,omitempty"`
	Removed  []RemovedCell   `json:"removed,omitempty"` // in former document order
	Moved    []MovedCell     `json:"moved,omitempty"`   // by new index
	Added    []AddedCell     `json:"added,omitempty"`   // by index
	Changed  []ChangedCell   `json:"changed,omitempty"` // by index
	// Truncated says the answer reached its bound: some added or changed cells carry
	// only the URIs to read.
	Truncated bool `json:"truncated,omitempty"`
}

// RemovedCell is a cell that is gone, at its former index.
type RemovedCell struct {
	ID       string `json:"id"`
	OldIndex int    `json:"old_index"`
}

// MovedCell is a cell whose place among the others changed.
type MovedCell struct {
	ID       string `json:"id"`
	OldIndex int    `json:"old_index"`
	Index    int    `json:"index"`
}

// AddedCell is a new cell at its index: the cell as the notebook serves it, or, when it
// exceeds a bound, the URI to read.
type AddedCell struct {
	ID    string          `json:"id"`
	Index int             `json:"index"`
	Cell  json.RawMessage `json:"cell,omitempty"`
	Read  []string        `json:"read,omitempty"`
}

// ChangedCell is a cell whose content changed: the parts that changed, each with its new
// value (or, when that exceeds a bound, the URIs to read), or the whole cell when its
// members changed (a new cell type).
type ChangedCell struct {
	ID     string                     `json:"id"`
	Index  int                        `json:"index"`
	Parts  []string                   `json:"parts"` // source, metadata, outputs, execution_count, attachments, cell_type
	Values map[string]json.RawMessage `json:"values,omitempty"`
	Cell   json.RawMessage            `json:"cell,omitempty"`
	Read   []string                   `json:"read,omitempty"`
}

// Changes is the answer of the notebook bound as name: what changed from old to cur,
// within b. Its Version and Since are the caller's to set.
func Changes(name string, old, cur *ynotebook.Snapshot, b Bounds) ChangesDoc {
	doc := ChangesDoc{URI: NotebookURI(name), Status: StatusOK, Cells: cur.Len()}
	oldAt, okOld := indexByID(old)
	curAt, okCur := indexByID(cur)
	if !okOld || !okCur {
		return doc.readNotebook(ReasonNoIDs)
	}
	ch := ynotebook.Diff(old, cur)
	// The answer's own members, the versions among them, count against its bound.
	budget := b.MaxAnswerBytes - size(doc) - 2*len(`,"version":"","since":""`) - 2*versionBytes - len(`,"truncated":true`)
	if ch.Metadata {
		head, err := json.Marshal(cur.Head())
		if err != nil || len(head) > b.MaxValueBytes {
			return doc.readNotebook(ReasonTooLarge)
		}
		doc.Notebook = head
		budget -= len(head) + len(`,"notebook":`)
	}
	for _, id := range ch.Removed {
		doc.Removed = append(doc.Removed, RemovedCell{ID: id, OldIndex: oldAt[id]})
	}
	for _, id := range ch.Moved {
		doc.Moved = append(doc.Moved, MovedCell{ID: id, OldIndex: oldAt[id], Index: curAt[id]})
	}
	slices.SortFunc(doc.Moved, func(a, b MovedCell) int { return a.Index - b.Index })
	budget -= size(doc.Removed) + size(doc.Moved)

	// Added and changed cells, by index, each whole while the budget lasts.
	type pending struct {
		index int
		add   *AddedCell
		chg   *ChangedCell
	}
	var work []pending
	for _, id := range ch.Added {
		i := curAt[id]
		work = append(work, pending{index: i, add: added(name, id, i, cur.At(i), b)})
	}
	for _, id := range slices.Sorted(maps.Keys(ch.Cells)) {
		i := curAt[id]
		work = append(work, pending{index: i, chg: changed(name, id, i, old.At(oldAt[id]), cur.At(i), ch.Cells[id], b)})
	}
	slices.SortFunc(work, func(a, b pending) int { return a.index - b.index })
	for _, w := range work {
		if w.add != nil {
			if n := size(w.add); n > budget {
				w.add.Cell, w.add.Read, doc.Truncated = nil, []string{CellURI(name, w.add.ID)}, true
			}
			budget -= size(w.add)
			doc.Added = append(doc.Added, *w.add)
			continue
		}
		if n := size(w.chg); n > budget {
			w.chg.Values, w.chg.Cell, w.chg.Read, doc.Truncated = nil, nil, []string{CellURI(name, w.chg.ID)}, true
		}
		budget -= size(w.chg)
		doc.Changed = append(doc.Changed, *w.chg)
	}
	if budget < 0 {
		return doc.readNotebook(ReasonTooLarge)
	}
	return doc
}

// readNotebook is doc saying, for reason, that the notebook must be read.
func (doc ChangesDoc) readNotebook(reason string) ChangesDoc {
	return ChangesDoc{URI: doc.URI, Status: StatusReadNotebook, Reason: reason, Cells: doc.Cells}
}

// ReadNotebook is the answer saying, for reason, that the notebook bound as name, with
// cells cells now, must be read. Its Version and Since are the caller's to set.
func ReadNotebook(name string, cells int, reason string) ChangesDoc {
	return ChangesDoc{URI: NotebookURI(name), Status: StatusReadNotebook, Reason: reason, Cells: cells}
}

// indexByID maps each cell id of s to its index; false when s serves cells without ids
// (or ids no URI names: Addressable), or two with one id.
func indexByID(s *ynotebook.Snapshot) (map[string]int, bool) {
	if !s.ServesIDs() {
		return nil, false
	}
	at := make(map[string]int, s.Len())
	for i, c := range s.All() {
		if _, dup := at[c.ID]; dup || !Addressable(c.ID) {
			return nil, false
		}
		at[c.ID] = i
	}
	return at, true
}

// added is the entry of cell c, new at index i.
func added(name, id string, i int, c *ynotebook.Cell, b Bounds) *AddedCell {
	a := &AddedCell{ID: id, Index: i}
	if body, err := json.Marshal(c); err == nil && len(body) <= b.MaxValueBytes {
		a.Cell = body
	} else {
		a.Read = []string{CellURI(name, id)}
	}
	return a
}

// partNames are a cell's parts, each its member's name in the cell's JSON.
var partNames = []string{"source", "metadata", "outputs", "execution_count", "attachments", "cell_type"}

// changed is the entry of cell a, now b at index i, whose parts cc changed.
func changed(name, id string, i int, a, b *ynotebook.Cell, cc ynotebook.CellChange, bd Bounds) *ChangedCell {
	flags := []bool{cc.Source, cc.Metadata, cc.Outputs, cc.ExecutionCount, cc.Attachments, cc.CellType}
	e := &ChangedCell{ID: id, Index: i, Parts: []string{}}
	for k, on := range flags {
		if on {
			e.Parts = append(e.Parts, partNames[k])
		}
	}
	// Members appear or disappear with a new cell type, metadata that comes or goes,
	// attachments (whose presence the cell does not say) and keys outside nbformat (which
	// have no part): then the whole cell is given.
	after, err := members(b)
	if err != nil || cc.CellType || cc.Attachments || cc.Other || cc.Metadata && (a.Metadata == nil) != (b.Metadata == nil) {
		if body, err := json.Marshal(b); err == nil && len(body) <= bd.MaxValueBytes {
			e.Cell = body
		} else {
			e.Read = []string{CellURI(name, id)}
		}
		return e
	}
	for _, p := range e.Parts {
		v := after[p]
		if len(v) <= bd.MaxValueBytes {
			if e.Values == nil {
				e.Values = map[string]json.RawMessage{}
			}
			e.Values[p] = v
			continue
		}
		if !slices.Contains(e.Read, CellURI(name, id)) {
			e.Read = append(e.Read, CellURI(name, id))
		}
		if p == "outputs" {
			for _, k := range cc.OutputIndexes {
				if k < len(b.Outputs) {
					e.Read = append(e.Read, OutputURI(name, id, k))
				}
			}
		}
	}
	return e
}

// members is the cell's JSON object, member by member.
func members(c *ynotebook.Cell) (map[string]json.RawMessage, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	err = json.Unmarshal(body, &m)
	return m, err
}

// size is the length of v's JSON encoding (values here always encode).
func size(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}

// maxSinceBytes bounds the query of a changes URI that is read as a since.
const maxSinceBytes = 256

// ParseChangesURI parses notebook://{name}/changes{?since}: the name (a valid binding
// name) and the since asked about, "" for none. A URI of another shape is ErrBadURI; a
// query that is not one since (too long, other parameters) is given whole, cut to
// maxSinceBytes: no version has that shape, and the answer says so rather than fail.
func ParseChangesURI(uri string) (name, since string, err error) {
	rest, ok := strings.CutPrefix(uri, scheme)
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrBadURI, uri)
	}
	path, query, _ := strings.Cut(rest, "?")
	name, ok = strings.CutSuffix(path, "/changes")
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrBadURI, uri)
	}
	if err := names.ValidateName(name); err != nil {
		return "", "", fmt.Errorf("%w: %q: %w", ErrBadURI, uri, err)
	}
	if len(query) > maxSinceBytes {
		return name, query[:maxSinceBytes], nil
	}
	q, err := url.ParseQuery(query)
	if err != nil || len(q) > 1 || len(q["since"]) > 1 || len(q) == 1 && q["since"] == nil {
		return name, query, nil
	}
	return name, q.Get("since"), nil
}
