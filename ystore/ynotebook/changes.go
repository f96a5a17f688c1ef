package ynotebook

import (
	"encoding/json"
	"hash/maphash"
	"reflect"
	"slices"
	"sort"
)

// Changes is what changed in a notebook between two snapshots. Cells are named by id;
// cells present on both sides are paired by id (the k-th cell with an id on one side with
// the k-th cell with that id on the other).
type Changes struct {
	Metadata bool                  // notebook metadata, nbformat or nbformat_minor changed
	Added    []string              // ids of cells that appeared, in document order
	Removed  []string              // ids of cells that disappeared, in former document order
	Moved    []string              // ids of cells whose order relative to the others changed
	Cells    map[string]CellChange // cells present on both sides whose content changed (cells sharing an id are merged)
}

// CellChange says which parts of a cell changed.
type CellChange struct {
	Source, Metadata, Outputs, ExecutionCount, Attachments, CellType bool
	Other                                                            bool  // a key outside nbformat (get() shows it too)
	OutputIndexes                                                    []int // indexes of outputs that changed, appeared or disappeared, sorted
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool {
	return !c.Metadata && len(c.Added) == 0 && len(c.Removed) == 0 && len(c.Moved) == 0 && len(c.Cells) == 0
}

// Merge adds o, a later change set, to c: flags are or-ed, id lists and output indexes
// united.
func (c *Changes) Merge(o Changes) {
	c.Metadata = c.Metadata || o.Metadata
	c.Added = union(c.Added, o.Added)
	c.Removed = union(c.Removed, o.Removed)
	c.Moved = union(c.Moved, o.Moved)
	for id, oc := range o.Cells {
		c.mergeCell(id, oc, len(o.Cells))
	}
}

// mergeCell adds oc, a later change of cell id, to c; hint sizes a new Cells map.
func (c *Changes) mergeCell(id string, oc CellChange, hint int) {
	if c.Cells == nil {
		c.Cells = make(map[string]CellChange, hint)
	}
	cc := c.Cells[id]
	cc.Source = cc.Source || oc.Source
	cc.Metadata = cc.Metadata || oc.Metadata
	cc.Outputs = cc.Outputs || oc.Outputs
	cc.ExecutionCount = cc.ExecutionCount || oc.ExecutionCount
	cc.Attachments = cc.Attachments || oc.Attachments
	cc.CellType = cc.CellType || oc.CellType
	cc.Other = cc.Other || oc.Other
	for _, i := range oc.OutputIndexes {
		if j, found := slices.BinarySearch(cc.OutputIndexes, i); !found {
			cc.OutputIndexes = slices.Insert(cc.OutputIndexes, j, i)
		}
	}
	c.Cells[id] = cc
}

// unionScan is the most elements union compares one by one; past it, it looks them up
// in a set, so that a notebook of 100,000 cells is not compared cell against cell.
const unionScan = 32

// union appends to a the elements of b it does not hold yet, in b's order: each once.
func union(a, b []string) []string {
	if len(a)+len(b) <= unionScan {
		for _, s := range b {
			if !slices.Contains(a, s) {
				a = append(a, s)
			}
		}
		return a
	}
	seen := make(map[string]struct{}, len(a)+len(b))
	for _, s := range a {
		seen[s] = struct{}{}
	}
	for _, s := range b {
		if _, ok := seen[s]; !ok {
			seen[s] = struct{}{}
			a = append(a, s)
		}
	}
	return a
}

// levelChanged reports whether the notebook-level fields of a and b differ.
func levelChanged(a, b *Snapshot) bool {
	return a.NBFormat != b.NBFormat || a.NBFormatMinor != b.NBFormatMinor ||
		!reflect.DeepEqual(a.metadataJSON(), b.metadataJSON())
}

// occurrence names a cell by its id and how many cells before it carry the same id.
type occurrence struct {
	id    string
	hasID bool
	n     int
}

func occurrences(cells []readCell) []occurrence {
	seen := make(map[occurrence]int, len(cells))
	keys := make([]occurrence, len(cells))
	for i, r := range cells {
		k := occurrence{id: r.cell.ID, hasID: r.cell.hasID}
		keys[i] = occurrence{id: r.cell.ID, hasID: r.cell.hasID, n: seen[k]}
		seen[k]++
	}
	return keys
}

// reorder reports added, removed and moved cells between prev and next, the cells with
// their maps before and after, and compares the cells present on both sides that were
// read anew or are another cell map than before.
func reorder(prev, next []readCell) Changes {
	var ch Changes
	oldKeys, newKeys := occurrences(prev), occurrences(next)
	oldPos := make(map[occurrence]int, len(oldKeys))
	for i, k := range oldKeys {
		oldPos[k] = i
	}
	newPos := make(map[occurrence]int, len(newKeys))
	for j, k := range newKeys {
		newPos[k] = j
	}
	var removed, added, moved []string // ids, united once each (union) at the end
	for i, k := range oldKeys {
		if _, ok := newPos[k]; !ok {
			removed = append(removed, prev[i].cell.ID)
		}
	}
	var common []int // new index of each common cell, in new order
	var commonOld []int
	for j, k := range newKeys {
		i, ok := oldPos[k]
		if !ok {
			added = append(added, next[j].cell.ID)
			continue
		}
		common = append(common, j)
		commonOld = append(commonOld, i)
		if next[j].fresh || prev[i].typ != next[j].typ {
			ch.addCell(prev[i].cell, next[j].cell, partOther)
		}
	}
	keep := increasing(commonOld)
	for n, j := range common {
		if !keep[n] {
			moved = append(moved, next[j].cell.ID)
		}
	}
	ch.Removed, ch.Added, ch.Moved = union(nil, removed), union(nil, added), union(nil, moved)
	return ch
}

// increasing marks a longest strictly increasing subsequence of xs.
func increasing(xs []int) []bool {
	tails := []int{} // tails[l] = index in xs of the smallest tail of an increasing run of length l+1
	prev := make([]int, len(xs))
	for i, x := range xs {
		l := sort.Search(len(tails), func(k int) bool { return xs[tails[k]] >= x })
		if l > 0 {
			prev[i] = tails[l-1]
		} else {
			prev[i] = -1
		}
		if l == len(tails) {
			tails = append(tails, i)
		} else {
			tails[l] = i
		}
	}
	keep := make([]bool, len(xs))
	if len(tails) > 0 {
		for i := tails[len(tails)-1]; i >= 0; i = prev[i] {
			keep[i] = true
		}
	}
	return keep
}

// addCell records what differs between a and b, the same cell before and after, where
// b may differ from a in the parts p only (reread copies the others; partOther: in any).
func (c *Changes) addCell(a, b *Cell, p part) {
	all := p&partOther != 0
	differs := func(q part, key string) bool {
		if !all && p&q == 0 {
			return false
		}
		x, inA := a.obj[key]
		y, inB := b.obj[key]
		return inA != inB || !equalJSON(x, y)
	}
	cc := CellChange{
		Source:         differs(partSource, "source"),
		Metadata:       differs(partMetadata, "metadata"),
		ExecutionCount: differs(partExecutionCount, "execution_count"),
		Attachments:    differs(partAttachments, "attachments"),
		CellType:       differs(partOther, "cell_type"),
	}
	if all {
		for k := range a.obj {
			if _, in := b.obj[k]; !in && partOf(k) == partOther && k != "cell_type" && k != "id" {
				cc.Other = true
			}
		}
		for k, v := range b.obj {
			// a key added with a null value differs from no key: get() shows it
			if x, inA := a.obj[k]; partOf(k) == partOther && k != "cell_type" && k != "id" && (!inA || !equalJSON(x, v)) {
				cc.Other = true
			}
		}
	}
	if all || p&partOutputs != 0 {
		x, inA := a.obj["outputs"]
		y, inB := b.obj["outputs"]
		al, _ := x.([]any)
		bl, _ := y.([]any)
		// one pass over the outputs: one both lists share is compared by pointer
		// (equalJSON); outputs read from the document carry the sums of their content,
		// so that those moved to an index where another was (one inserted at the front
		// moves them all) are compared with no walk of them (contentSum)
		summed := len(a.outs) == len(al) && len(b.outs) == len(bl) && a.outs != nil && b.outs != nil
		for i := range max(len(al), len(bl)) {
			var differ bool
			switch {
			case i >= len(al) || i >= len(bl):
				differ = true
			case summed && a.outs[i].sum.decides(b.outs[i].sum):
				differ = a.outs[i].sum != b.outs[i].sum
			default:
				differ = !equalJSON(al[i], bl[i])
			}
			if differ {
				cc.OutputIndexes = append(cc.OutputIndexes, i)
			}
		}
		cc.Outputs = inA != inB || len(cc.OutputIndexes) > 0 || len(al) == 0 && len(bl) == 0 && !equalJSON(x, y)
	}
	if !cc.Source && !cc.Metadata && !cc.ExecutionCount && !cc.Attachments && !cc.CellType && !cc.Outputs && !cc.Other {
		return
	}
	c.mergeCell(b.ID, cc, 1)
}

// contentSum is a sum of a value as get() yields it (jsonSum): equal for equal values,
// an object's members summed in any order. Two 64-bit sums keyed by seeds the process
// draws at start, which nothing outside it sees: values that differ have the same sum
// with a chance of about 2^-128, so that equal sums are taken for equal values, as the
// versions take equal SHA-256 digests (a collision would leave an output index out of
// a change set, never a content unserved). A value holding a type the sum does not
// know is summed all the same but not taken for equal on its sum (ok false).
type contentSum struct {
	a, b uint64
	ok   bool
}

// decides reports whether comparing the sums decides whether their values are equal.
func (s contentSum) decides(o contentSum) bool { return s != o || s.ok && o.ok }

// sumSeeds key jsonSum.
var sumSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// jsonSum returns the contentSum of v.
func jsonSum(v any) contentSum {
	a, ok := sumWith(sumSeeds[0], v)
	b, _ := sumWith(sumSeeds[1], v)
	return contentSum{a, b, ok}
}

// sumWith is one half of jsonSum, keyed by seed; ok is false when v holds a type it does
// not know (summed as one constant).
func sumWith(seed maphash.Seed, v any) (sum uint64, ok bool) {
	const prime = 0x100000001b3
	switch x := v.(type) {
	case string:
		return maphash.String(seed, x)*prime + 1, true
	case json.Number:
		return maphash.String(seed, string(x))*prime + 2, true
	case bool:
		if x {
			return 3, true
		}
		return 4, true
	case nil:
		return 5, true
	case []any:
		s, ok := uint64(6), true
		for _, e := range x {
			es, eok := sumWith(seed, e)
			s, ok = s*prime+es, ok && eok
		}
		return s, ok
	case map[string]any:
		s, ok := uint64(7), true
		for k, e := range x {
			es, eok := sumWith(seed, e)
			s, ok = s+(maphash.String(seed, k)^es)*prime, ok && eok
		}
		return s, ok
	}
	return 8, false
}

// equalJSON reports whether x and y, values as get() yields them, are equal. An object
// or list both share is equal at once, with no walk: a reread shares what it did not
// read again (readOutputs), so comparing a cell's outputs costs what changed in them.
func equalJSON(x, y any) bool {
	switch a := x.(type) {
	case map[string]any:
		b, ok := y.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		if reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
			return true
		}
		for k, v := range a {
			if w, ok := b[k]; !ok || !equalJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := y.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		if len(a) > 0 && &a[0] == &b[0] {
			return true
		}
		for i := range a {
			if !equalJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(x, y)
}
