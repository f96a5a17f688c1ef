package publish

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// Version is the schema version of Event, its "v" (event.schema.json).
const Version = 1

// Origin is what the sidecar knows about where a change comes from.
type Origin struct {
	Room   string    // the store's room key
	FileID string    // the jupyter_server_fileid id; "" for a room addressed by path
	Time   time.Time // commit time of the newest row behind the change; zero: now
	// User is, in hub mode, the JupyterHub user whose store the notebook is in (each
	// user's tenant has its own publisher); "" and "user" omitted outside hub mode.
	User string
	// Source is "file" when the change is the notebook's .ipynb served instead of the
	// store (rewritten while no room was open, or the server's save served while the
	// live notebook differs from it or waits for updates missing from the store); "" for
	// the store.
	Source string
}

// Event is one debounced change of one notebook, bound to a name or not: what the
// webhook and pgnotify publishers send, as JSON (event.schema.json, docs/EVENTS.md).
type Event struct {
	V    int    `json:"v"`
	Seq  uint64 `json:"seq,omitempty"` // per path and publisher, from 1; set by Publish
	Path string `json:"path"`          // relative to the Jupyter root
	// RenamedFrom is the former path of a notebook whose file was renamed; the
	// event's changes are then empty.
	RenamedFrom string    `json:"renamed_from,omitempty"`
	FileID      string    `json:"file_id"`
	Room        string    `json:"room"`
	Time        time.Time `json:"time"`
	Changes     Changes   `json:"changes"`
	URIs        []string  `json:"uris"` // under every name bound in the sidecar; empty if none
	User        string    `json:"user,omitempty"`
	Source      string    `json:"source,omitempty"` // "file": the change came from the .ipynb, not the store
	// Version is the notebook's version once changed (resources/versions: a content
	// address, the same on every replica); notebook://{name}/changes?since= takes it.
	// Empty when the notebook is not served (removed, gone).
	Version string `json:"version,omitempty"`
	Part    *Part  `json:"part,omitempty"` // set on the parts of a split NOTIFY
}

// Changes is what changed, at the granularity of ynotebook.Changes.
type Changes struct {
	Metadata bool                  `json:"metadata"` // notebook metadata or nbformat
	Added    []string              `json:"added"`    // cell ids, in document order
	Removed  []string              `json:"removed"`
	Moved    []string              `json:"moved"`
	Cells    map[string]CellChange `json:"cells"` // cells present before and after, by id
	// Incomplete says that something changed that the event could not list (a part that
	// alone exceeds a NOTIFY payload): re-read the whole notebook.
	Incomplete bool `json:"incomplete,omitempty"`
}

// CellChange is which parts of one cell changed.
type CellChange struct {
	Parts         []string `json:"parts"`          // among Parts…: source, metadata, outputs, …
	OutputIndexes []int    `json:"output_indexes"` // outputs that changed, appeared or disappeared
}

// The names of a cell's parts in CellChange.Parts.
const (
	PartSource         = "source"
	PartMetadata       = "metadata"
	PartOutputs        = "outputs"
	PartExecutionCount = "execution_count"
	PartAttachments    = "attachments"
	PartCellType       = "cell_type"
)

// Part numbers the pieces of an event split across several NOTIFY payloads. Every
// piece is a valid event naming a share of the change; together they name all of it.
type Part struct {
	Index int `json:"index"` // from 0
	Count int `json:"count"`
}

// NewEvent is the event of a change ch of the notebook at path, without URIs.
func NewEvent(path string, ch ynotebook.Changes, o Origin) Event {
	if o.Time.IsZero() {
		o.Time = time.Now()
	}
	ev := Event{V: Version, Path: path, FileID: o.FileID, Room: o.Room, Time: o.Time.UTC(), User: o.User, Source: o.Source, URIs: []string{}}
	ev.Changes = Changes{
		Metadata: ch.Metadata,
		Added:    nonNil(ch.Added), Removed: nonNil(ch.Removed), Moved: nonNil(ch.Moved),
		Cells: make(map[string]CellChange, len(ch.Cells)),
	}
	for id, c := range ch.Cells {
		var parts []string
		for _, p := range []struct {
			on   bool
			name string
		}{{c.Source, PartSource}, {c.Metadata, PartMetadata}, {c.Outputs, PartOutputs},
			{c.ExecutionCount, PartExecutionCount}, {c.Attachments, PartAttachments}, {c.CellType, PartCellType}} {
			if p.on {
				parts = append(parts, p.name)
			}
		}
		ev.Changes.Cells[id] = CellChange{Parts: nonNil(parts), OutputIndexes: nonNil(c.OutputIndexes)}
	}
	return ev
}

// nonNil returns s, or an empty slice for nil, so that JSON has [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return slices.Clone(s)
}

// Payloads encodes ev as JSON payloads of at most limit bytes each: one when it fits,
// else parts (Event.Part) that share the event's header and split its changes and URIs
// between them. An item too large for any part is left out and the part marked
// Changes.Incomplete; nothing is dropped silently.
func (ev Event) Payloads(limit int) ([][]byte, error) {
	whole, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	if len(whole) <= limit {
		return [][]byte{whole}, nil
	}
	parts := ev.split(limit)
	out := make([][]byte, len(parts))
	for i, p := range parts {
		p.Part = &Part{Index: i, Count: len(parts)}
		if out[i], err = json.Marshal(p); err != nil {
			return nil, fmt.Errorf("encode event part: %w", err)
		}
		if len(out[i]) > limit {
			return nil, fmt.Errorf("event part %d of %s is %d bytes, over the %d-byte limit", i, ev.Path, len(out[i]), limit)
		}
	}
	return out, nil
}

// split deals ev's items into parts whose encoding stays within limit. A part's size
// is bounded by its empty encoding plus, per item, the item's encoding and a separator.
func (ev Event) split(limit int) []Event {
	empty := func() Event {
		p := ev
		p.Changes = Changes{Added: []string{}, Removed: []string{}, Moved: []string{}, Cells: map[string]CellChange{}}
		p.URIs = []string{}
		p.Part = &Part{Index: 1 << 30, Count: 1 << 30} // as wide as any real numbering
		return p
	}
	base := size(empty())
	var parts []Event
	cur, used := empty(), base
	cur.Changes.Metadata = ev.Changes.Metadata
	cur.Changes.Incomplete = ev.Changes.Incomplete
	used += len(`,"incomplete":true`)
	add := func(n int, put func(p *Event)) {
		if base+n > limit {
			cur.Changes.Incomplete = true // too large for any part: say so instead
			return
		}
		if used+n > limit {
			parts = append(parts, cur)
			cur, used = empty(), base+len(`,"incomplete":true`)
		}
		put(&cur)
		used += n
	}
	for _, list := range []struct {
		ids []string
		to  func(p *Event) *[]string
	}{
		{ev.Changes.Added, func(p *Event) *[]string { return &p.Changes.Added }},
		{ev.Changes.Removed, func(p *Event) *[]string { return &p.Changes.Removed }},
		{ev.Changes.Moved, func(p *Event) *[]string { return &p.Changes.Moved }},
		{ev.URIs, func(p *Event) *[]string { return &p.URIs }},
	} {
		for _, id := range list.ids {
			add(size(id)+1, func(p *Event) { *list.to(p) = append(*list.to(p), id) })
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ev.Changes.Cells)) {
		c := ev.Changes.Cells[id]
		add(size(id)+1+size(c)+1, func(p *Event) { p.Changes.Cells[id] = c })
	}
	return append(parts, cur)
}

// size is the length of v's JSON encoding (values here always encode).
func size(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}
