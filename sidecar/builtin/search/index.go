// Package search is the compiled-in extension "search": the tool
// search_notebooks(query, regex?, in?, limit?) over the notebooks of the
// caller's server. It answers from an index kept up to date from the
// notebooks' change sets (only changed cells are indexed again), bounded in
// results and in time.
//
// The index holds, per cell, its source and the text of its outputs (stream
// text, errors, text/plain and text/markdown data; never images), each with
// a small Bloom filter of its lowercased byte trigrams. A query's trigrams
// (a plain query's, or the literal runs every match of a regular expression
// contains) rule out almost every field without reading it; the rest are
// matched line by line. Readers never wait for writers: an update builds new
// per-notebook entries and publishes a new map.
package search

import (
	"maps"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// Bloom filter sizing: bitsPerGram bits per trigram position (at most
// maxBloomBits), one hash; a filter is never smaller than one word.
const (
	bitsPerGram  = 2
	maxBloomBits = 1 << 20
)

// field is one searchable text of a cell: its source, or one output.
type field struct {
	text  string
	bloom []uint64 // len is a power of two
}

func newField(text string) field {
	lower := strings.ToLower(text)
	n := len(lower) - 2
	if n < 1 {
		return field{text: text}
	}
	size := min(max(64, 1<<bits.Len(uint(n*bitsPerGram-1))), maxBloomBits)
	f := field{text: text, bloom: make([]uint64, size/64)}
	for i := 0; i < n; i++ {
		f.set(gram(lower, i))
	}
	return f
}

func (f *field) slot(g uint32) (int, uint64) {
	// Fibonacci hashing: the product's high bits depend on every bit of g.
	h := (uint64(g) * 0x9E3779B97F4A7C15) >> 40
	b := h & uint64(len(f.bloom)*64-1)
	return int(b >> 6), 1 << (b & 63)
}

func (f *field) set(g uint32) {
	w, m := f.slot(g)
	f.bloom[w] |= m
}

func (f *field) has(g uint32) bool {
	if len(f.bloom) == 0 {
		return false // shorter than a trigram
	}
	w, m := f.slot(g)
	return f.bloom[w]&m != 0
}

// cell is the indexed text of one cell.
type cell struct {
	id      string
	typ     string
	source  field
	outputs []field // one per output; an output with no text is an empty field
}

func newCell(c *ynotebook.Cell) *cell {
	out := &cell{id: c.ID, typ: c.CellType, source: newField(c.Source)}
	for _, o := range c.Outputs {
		out.outputs = append(out.outputs, newField(outputText(o)))
	}
	return out
}

// notebook is the indexed cells of one notebook, in order. Never modified
// once published.
type notebook struct {
	cells []*cell
}

// Index is the search index of a set of notebooks by path. Safe for
// concurrent use: any number of searches run beside one update.
type Index struct {
	mu    sync.Mutex // serialises updates
	books atomic.Pointer[map[string]*notebook]
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	ix := &Index{}
	ix.books.Store(&map[string]*notebook{})
	return ix
}

// Update indexes snap as the notebook at path. With changed (the change set
// since the notebook was last indexed), only the cells it names are indexed
// again; without, or for a notebook not indexed yet, every cell is.
func (ix *Index) Update(path string, snap *ynotebook.Snapshot, changed *ynotebook.Changes) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	old := *ix.books.Load()
	prev := map[string]*cell{}
	if nb, ok := old[path]; ok && changed != nil {
		for _, c := range nb.cells {
			prev[c.id] = c
		}
		for _, id := range changed.Added {
			delete(prev, id)
		}
		for id, cc := range changed.Cells {
			if cc.Source || cc.Outputs || cc.CellType {
				delete(prev, id)
			}
		}
	}
	nb := &notebook{cells: make([]*cell, snap.Len())}
	for i, c := range snap.All() {
		if p, ok := prev[c.ID]; ok {
			nb.cells[i] = p
			continue
		}
		nb.cells[i] = newCell(c)
	}
	ix.publish(old, func(m map[string]*notebook) { m[path] = nb })
}

// Remove drops the notebook at path.
func (ix *Index) Remove(path string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.publish(*ix.books.Load(), func(m map[string]*notebook) { delete(m, path) })
}

// Move files the notebook indexed at from under to.
func (ix *Index) Move(from, to string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	old := *ix.books.Load()
	nb, ok := old[from]
	if !ok {
		return
	}
	ix.publish(old, func(m map[string]*notebook) { delete(m, from); m[to] = nb })
}

// Paths returns the indexed paths, sorted.
func (ix *Index) Paths() []string { return slices.Sorted(maps.Keys(*ix.books.Load())) }

func (ix *Index) publish(old map[string]*notebook, edit func(map[string]*notebook)) {
	m := maps.Clone(old)
	edit(m)
	ix.books.Store(&m)
}

// outputText is the searchable text of an output: stream text, an error's
// name, value and traceback, or a data output's text/markdown and text/plain.
func outputText(o map[string]any) string {
	switch o["output_type"] {
	case "stream":
		return ynotebook.Multiline(o["text"])
	case "error":
		parts := []string{ynotebook.Multiline(o["ename"]) + ": " + ynotebook.Multiline(o["evalue"])}
		if tb, ok := o["traceback"].([]any); ok {
			for _, l := range tb {
				parts = append(parts, ynotebook.Multiline(l))
			}
		}
		return strings.Join(parts, "\n")
	}
	data, _ := o["data"].(map[string]any)
	var parts []string
	for _, m := range []string{"text/markdown", "text/plain"} {
		if s := ynotebook.Multiline(data[m]); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}
