// Package changestest is, for the tests of any package, what an agent does with an
// answer of notebook://{name}/changes?since=: it applies the answer, as JSON, to the
// notebook JSON it read last, the way README's loop says, so that a test can compare
// the result with a fresh read.
package changestest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Answer is a changes answer as a client decodes it.
type Answer struct {
	Version   string         `json:"version"`
	Since     string         `json:"since"`
	Status    string         `json:"status"`
	Reason    string         `json:"reason"`
	Cells     int            `json:"cells"`
	Notebook  map[string]any `json:"notebook"`
	Truncated bool           `json:"truncated"`
	Removed   []struct {
		ID       string `json:"id"`
		OldIndex int    `json:"old_index"`
	} `json:"removed"`
	Moved []struct {
		ID       string `json:"id"`
		OldIndex int    `json:"old_index"`
		Index    int    `json:"index"`
	} `json:"moved"`
	Added []struct {
		ID    string         `json:"id"`
		Index int            `json:"index"`
		Cell  map[string]any `json:"cell"`
		Read  []string       `json:"read"`
	} `json:"added"`
	Changed []struct {
		ID     string         `json:"id"`
		Index  int            `json:"index"`
		Parts  []string       `json:"parts"`
		Values map[string]any `json:"values"`
		Cell   map[string]any `json:"cell"`
		Read   []string       `json:"read"`
	} `json:"changed"`
}

// ErrRead is returned by Apply for an answer that names URIs to read (a value over its
// bound) or says read_notebook: it cannot be applied alone.
var ErrRead = errors.New("the answer asks for a read")

// Decode decodes a changes answer.
func Decode(body []byte) (Answer, error) {
	var a Answer
	if err := json.Unmarshal(body, &a); err != nil {
		return Answer{}, fmt.Errorf("decode changes answer: %w", err)
	}
	return a, nil
}

// Apply applies answer a to prev, the notebook's JSON at a.Since, and returns the
// notebook's JSON at a.Version (encoding/json's canonical encoding: sorted keys).
func Apply(prev []byte, a Answer) ([]byte, error) {
	if a.Status != "ok" {
		return nil, fmt.Errorf("%w: status %s (%s)", ErrRead, a.Status, a.Reason)
	}
	var nb map[string]any
	if err := json.Unmarshal(prev, &nb); err != nil {
		return nil, fmt.Errorf("decode notebook: %w", err)
	}
	if a.Notebook != nil {
		for _, k := range []string{"metadata", "nbformat", "nbformat_minor"} {
			delete(nb, k)
		}
		for k, v := range a.Notebook {
			nb[k] = v
		}
	}
	list, _ := nb["cells"].([]any)
	byID := map[string]map[string]any{}
	for _, c := range list {
		m, _ := c.(map[string]any)
		id, _ := m["id"].(string)
		byID[id] = m
	}
	for _, ch := range a.Changed {
		if len(ch.Read) > 0 {
			return nil, fmt.Errorf("%w: cell %s: %v", ErrRead, ch.ID, ch.Read)
		}
		c := byID[ch.ID]
		if c == nil {
			return nil, fmt.Errorf("changed cell %s is not in the previous read", ch.ID)
		}
		if ch.Cell != nil {
			clear(c)
			for k, v := range ch.Cell {
				c[k] = v
			}
			continue
		}
		for _, p := range ch.Parts {
			v, ok := ch.Values[p]
			if !ok {
				return nil, fmt.Errorf("changed cell %s: part %s without a value", ch.ID, p)
			}
			c[p] = v
		}
	}
	// Take out the removed and the moved cells; what stays keeps its order. Then put
	// the added and the moved ones at their new indexes, lowest first.
	out := make(map[string]bool)
	for _, r := range a.Removed {
		out[r.ID] = true
	}
	type placed struct {
		index int
		cell  map[string]any
	}
	var put []placed
	for _, m := range a.Moved {
		out[m.ID] = true
		if byID[m.ID] == nil {
			return nil, fmt.Errorf("moved cell %s is not in the previous read", m.ID)
		}
		put = append(put, placed{m.Index, byID[m.ID]})
	}
	for _, ad := range a.Added {
		if len(ad.Read) > 0 {
			return nil, fmt.Errorf("%w: cell %s: %v", ErrRead, ad.ID, ad.Read)
		}
		put = append(put, placed{ad.Index, ad.Cell})
	}
	kept := make([]any, 0, a.Cells)
	for _, c := range list {
		id, _ := c.(map[string]any)["id"].(string)
		if !out[id] {
			kept = append(kept, c)
		}
	}
	slices.SortFunc(put, func(x, y placed) int { return x.index - y.index })
	for _, p := range put {
		if p.index < 0 || p.index > len(kept) {
			return nil, fmt.Errorf("cell index %d out of range (%d cells)", p.index, len(kept))
		}
		kept = slices.Insert(kept, p.index, any(p.cell))
	}
	if len(kept) != a.Cells {
		return nil, fmt.Errorf("%d cells after applying, the answer says %d", len(kept), a.Cells)
	}
	nb["cells"] = kept
	return json.Marshal(nb)
}

// Canonical re-encodes a notebook's JSON with sorted keys, for comparison with Apply's.
func Canonical(body []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
