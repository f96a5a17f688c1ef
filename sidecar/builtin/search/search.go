package search

import (
	"context"
	"strings"
	"unicode/utf8"
)

// Where a search looks.
const (
	InSource  = "source"
	InOutputs = "outputs"
	InBoth    = "both"
)

// Bounds of one search.
const (
	maxLinesPerCell = 5   // matching lines listed per cell; the rest are counted
	maxLineBytes    = 240 // a listed line is cut here
)

// Options bound one search.
type Options struct {
	In    string // InSource, InOutputs or InBoth ("" is both)
	Limit int    // cells returned at most
	// Paths are the notebooks searched, in order; others in the index are not.
	Paths []string
}

// Hit is one matching cell.
type Hit struct {
	Path     string
	CellID   string
	CellType string
	Lines    []Line
	More     int // matching lines not listed
}

// Line is one matching line of a cell's source or of one of its outputs.
type Line struct {
	In     string `json:"in"`               // "source" or "output"
	Output int    `json:"output,omitempty"` // the output's index, for "output"
	Line   int    `json:"line"`             // 1-based
	Text   string `json:"text"`
}

// Result is a search's hits and whether it stopped early.
type Result struct {
	Hits      []Hit
	Truncated bool // the limit was reached: there may be more
	TimedOut  bool // ctx ended first: notebooks after the last hit's were not all searched
	Searched  int  // notebooks searched
}

// Search runs q over the notebooks of o.Paths, in order, until o.Limit cells
// matched or ctx ends.
func (ix *Index) Search(ctx context.Context, q *Query, o Options) Result {
	books := *ix.books.Load()
	var r Result
	for _, path := range o.Paths {
		if ctx.Err() != nil {
			r.TimedOut = true
			return r
		}
		nb, ok := books[path]
		if !ok {
			continue
		}
		r.Searched++
		for _, c := range nb.cells {
			h, ok := c.match(q, o.In)
			if !ok {
				continue
			}
			if len(r.Hits) == o.Limit {
				r.Truncated = true
				return r
			}
			h.Path = path
			r.Hits = append(r.Hits, h)
		}
	}
	return r
}

// match returns the cell's matching lines.
func (c *cell) match(q *Query, in string) (Hit, bool) {
	h := Hit{CellID: c.id, CellType: c.typ}
	if in != InOutputs {
		h.add(q, &c.source, InSource, 0)
	}
	if in != InSource {
		for i := range c.outputs {
			h.add(q, &c.outputs[i], "output", i)
		}
	}
	return h, len(h.Lines) > 0
}

func (h *Hit) add(q *Query, f *field, in string, output int) {
	if !q.mayMatch(f) {
		return
	}
	n := 0
	for line := range strings.Lines(f.text) {
		n++
		line = strings.TrimRight(line, "\r\n")
		if !q.matchLine(line) {
			continue
		}
		if len(h.Lines) == maxLinesPerCell {
			h.More++
			continue
		}
		h.Lines = append(h.Lines, Line{In: in, Output: output, Line: n, Text: cut(line)})
	}
}

// cut shortens a line to at most maxLineBytes, on a rune boundary.
func cut(s string) string {
	if len(s) <= maxLineBytes {
		return s
	}
	i := maxLineBytes
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
