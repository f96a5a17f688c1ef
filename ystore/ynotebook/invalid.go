package ynotebook

import (
	"fmt"
	"regexp"
	"slices"
)

// cellID is nbformat 4.5's pattern of a cell id.
var cellID = regexp.MustCompile(`^[a-zA-Z0-9-_]{1,64}$`)

// InvalidCell is a cell get() yields that is not a valid nbformat 4.5 cell, with why. The
// sidecar serves it all the same: it is what the server holds and saves.
type InvalidCell struct {
	Index   int      `json:"index"`
	Reasons []string `json:"reasons"`
}

// cellKeys are the keys nbformat 4.5 requires of a cell of each type (id aside), and
// allowed are those it allows.
var (
	cellKeys = map[string][]string{
		CellCode:     {"cell_type", "metadata", "source", "outputs", "execution_count"},
		CellMarkdown: {"cell_type", "metadata", "source"},
		CellRaw:      {"cell_type", "metadata", "source"},
	}
	allowedKeys = map[string][]string{
		CellCode:     {"id", "cell_type", "metadata", "source", "outputs", "execution_count"},
		CellMarkdown: {"id", "cell_type", "metadata", "source", "attachments"},
		CellRaw:      {"id", "cell_type", "metadata", "source", "attachments"},
	}
)

// Invalid lists the cells of s that are not valid nbformat 4.5 cells, in order: an
// unknown or missing cell_type, a missing required key (the id too from nbformat 4.5
// on, and it must be one of nbformat's ids), a key the cell type does not allow, a source, metadata, outputs or attachments of
// the wrong type. Outputs themselves are not checked.
func (s *Snapshot) Invalid() []InvalidCell {
	var out []InvalidCell
	for i, c := range s.All() {
		r := c.Invalid()
		if _, has := c.obj["id"]; !s.pruneIDs {
			switch {
			case c.hasID && !cellID.MatchString(c.ID):
				r = append(r, "id is not an nbformat id")
			case !c.hasID && has:
				r = append(r, "id is not a string")
			case !c.hasID:
				r = append(r, "no id")
			}
		}
		if len(r) > 0 {
			out = append(out, InvalidCell{Index: i, Reasons: r})
		}
	}
	return out
}

// Invalid lists why c is not a valid nbformat 4.5 cell, its id aside (nil when it is).
func (c *Cell) Invalid() []string {
	var r []string
	ct, isString := c.obj["cell_type"].(string)
	required, known := cellKeys[ct]
	switch {
	case !isString && c.obj["cell_type"] == nil:
		r = append(r, "no cell_type")
		required = []string{"metadata", "source"}
	case !known:
		r = append(r, fmt.Sprintf("cell_type %v is not code, markdown or raw", c.obj["cell_type"]))
		required = []string{"metadata", "source"}
	}
	for _, k := range required {
		if _, ok := c.obj[k]; !ok {
			r = append(r, "no "+k)
		}
	}
	keys := make([]string, 0, len(c.obj))
	for k := range c.obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if known && !slices.Contains(allowedKeys[ct], k) {
			r = append(r, "key "+k+" is not nbformat's for a "+ct+" cell")
		}
	}
	if v, ok := c.obj["source"]; ok && !isMultiline(v) {
		r = append(r, "source is not a string")
	}
	for _, kw := range [][2]string{{"metadata", "an object"}, {"outputs", "a list"}, {"attachments", "an object"}} {
		k, want := kw[0], kw[1]
		v, ok := c.obj[k]
		if !ok || (known && !slices.Contains(allowedKeys[ct], k)) {
			continue
		}
		_, isMap := v.(map[string]any)
		_, isList := v.([]any)
		if want == "a list" && !isList || want == "an object" && !isMap {
			r = append(r, k+" is not "+want)
		}
	}
	return r
}

// isMultiline reports whether v is one of nbformat's multi-line strings.
func isMultiline(v any) bool {
	switch x := v.(type) {
	case string:
		return true
	case []any:
		for _, e := range x {
			if _, ok := e.(string); !ok {
				return false
			}
		}
		return true
	}
	return false
}
