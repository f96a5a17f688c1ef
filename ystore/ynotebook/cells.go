package ynotebook

import (
	"iter"
	"slices"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// The cells of a snapshot are a B+-tree: leaves of cells, inner nodes counting the cells
// below each child. Snapshots share its nodes and cells: the notebook edits a node in place
// only while no snapshot handed out holds it, and otherwise copies it and the path above
// it (path copying), so that an edit after a read copies O(log n) nodes of at most
// maxFill entries and no cell. Each cell map's slot names the leaf holding its cell, and
// parent links lead from there to the root, which gives a cell's index without
// renumbering.

const (
	maxFill = 32          // most entries of a node
	minFill = maxFill / 4 // fewest entries of a node other than the root after a delete
)

// node is a node of the cell tree: a leaf holds cells, an inner node children. The cells
// are never modified once in a tree; a node is edited in place only when its gen is the
// tree's. parent and slots describe the notebook's current tree and are never read
// through a snapshot.
type node struct {
	size     int     // the cells below
	cells    []*Cell // leaf: the cells in order
	children []*node // inner node: the children in order, never empty

	gen    uint64
	parent *node   // in the notebook's current tree; nil for its root
	slots  []*slot // leaf: the cell map behind each cell
}

// slot is the place of one cell map in the notebook's tree.
type slot struct {
	typ  *yjs.Type
	leaf *node
}

func (x *node) leaf() bool { return x.children == nil }

// len is the number of entries of x: cells or children.
func (x *node) len() int {
	if x.leaf() {
		return len(x.cells)
	}
	return len(x.children)
}

// at returns the i-th cell below x.
func (x *node) at(i int) *Cell {
	for !x.leaf() {
		for _, c := range x.children {
			if i < c.size {
				x = c
				break
			}
			i -= c.size
		}
	}
	return x.cells[i]
}

// leaves yields the leaves below x in order.
func leaves(x *node) iter.Seq[*node] {
	return func(yield func(*node) bool) { walkLeaves(x, yield) }
}

func walkLeaves(x *node, yield func(*node) bool) bool {
	if x.leaf() {
		return yield(x)
	}
	for _, c := range x.children {
		if !walkLeaves(c, yield) {
			return false
		}
	}
	return true
}

// entries returns the cells below x with their cell maps, in order.
func (x *node) entries() []readCell {
	out := make([]readCell, 0, x.size)
	for l := range leaves(x) {
		for j, c := range l.cells {
			out = append(out, readCell{typ: l.slots[j].typ, cell: c})
		}
	}
	return out
}

// tree is the cell tree of a snapshot: its root and the generation of the nodes the
// notebook may edit in place.
type tree struct {
	root *node
	gen  uint64
}

// buildTree returns a tree of the cells read, each with a new slot, at generation gen.
func buildTree(read []readCell, gen uint64) tree {
	cells := make([]*Cell, len(read))
	slots := make([]*slot, len(read))
	backing := make([]slot, len(read))
	for i, r := range read {
		cells[i], slots[i] = r.cell, &backing[i]
		backing[i].typ = r.typ
	}
	var level []*node
	for lo, hi := range chunks(len(read)) {
		x := &node{size: hi - lo, cells: cells[lo:hi:hi], slots: slots[lo:hi:hi], gen: gen}
		for _, sl := range x.slots {
			sl.leaf = x
		}
		level = append(level, x)
	}
	for len(level) > 1 {
		var up []*node
		for lo, hi := range chunks(len(level)) {
			p := &node{children: level[lo:hi:hi], gen: gen}
			for _, c := range p.children {
				c.parent = p
				p.size += c.size
			}
			up = append(up, p)
		}
		level = up
	}
	if len(level) == 0 {
		return tree{root: &node{gen: gen}, gen: gen}
	}
	return tree{root: level[0], gen: gen}
}

// chunks splits n entries into as few runs of at most maxFill as it takes, of nearly
// equal lengths, and yields the bounds of each.
func chunks(n int) func(yield func(lo, hi int) bool) {
	return func(yield func(lo, hi int) bool) {
		k := (n + maxFill - 1) / maxFill
		for i := range k {
			if !yield(i*n/k, (i+1)*n/k) {
				return
			}
		}
	}
}

// own returns x ready to be edited: x itself when it is of the tree's generation,
// otherwise a copy put in its place, its ancestors owned as well.
func (t *tree) own(x *node) *node {
	if x.gen == t.gen {
		return x
	}
	c := &node{size: x.size, gen: t.gen, parent: x.parent}
	if x.leaf() {
		c.cells = append(make([]*Cell, 0, maxFill+1), x.cells...)
		c.slots = append(make([]*slot, 0, maxFill+1), x.slots...)
	} else {
		c.children = append(make([]*node, 0, maxFill+1), x.children...)
	}
	c.adopt(0)
	if x.parent == nil {
		t.root = c
	} else {
		p := t.own(x.parent)
		p.children[slices.Index(p.children, x)] = c
		c.parent = p
	}
	return c
}

// adopt points the slots or children of x from i on to x.
func (x *node) adopt(i int) {
	if x.leaf() {
		for _, sl := range x.slots[i:] {
			sl.leaf = x
		}
		return
	}
	for _, c := range x.children[i:] {
		c.parent = x
	}
}

// cell returns the cell of sl.
func (sl *slot) cell() *Cell {
	return sl.leaf.cells[slices.Index(sl.leaf.slots, sl)]
}

// pos returns the index of sl's cell in the tree.
func (sl *slot) pos() int {
	x := sl.leaf
	i := slices.Index(x.slots, sl)
	for ; x.parent != nil; x = x.parent {
		for _, c := range x.parent.children {
			if c == x {
				break
			}
			i += c.size
		}
	}
	return i
}

// set puts c in the place of sl's cell.
func (t *tree) set(sl *slot, c *Cell) {
	x := t.own(sl.leaf)
	x.cells[slices.Index(x.slots, sl)] = c
}

// insertAfter puts c, the cell of the new slot sl, after the cell of left, or first when
// left is nil.
func (t *tree) insertAfter(left, sl *slot, c *Cell) {
	var x *node
	j := 0
	if left != nil {
		x = t.own(left.leaf)
		j = slices.Index(x.slots, left) + 1
	} else {
		for x = t.root; !x.leaf(); x = x.children[0] {
		}
		x = t.own(x)
	}
	x.cells = slices.Insert(x.cells, j, c)
	x.slots = slices.Insert(x.slots, j, sl)
	sl.leaf = x
	for p := x; p != nil; p = p.parent {
		p.size++
	}
	for ; x != nil && x.len() > maxFill; x = x.parent {
		t.split(x)
	}
}

// split moves the upper half of x, owned, into a new sibling after it.
func (t *tree) split(x *node) {
	r := &node{gen: t.gen, parent: x.parent}
	move(r, x, x.len()/2)
	if x.parent == nil {
		t.root = &node{size: x.size + r.size, children: []*node{x, r}, gen: t.gen}
		x.parent, r.parent = t.root, t.root
		return
	}
	p := x.parent
	p.children = slices.Insert(p.children, slices.Index(p.children, x)+1, r)
}

// move appends the entries of src from i on to dst, a node of the same kind, and takes
// them out of src.
func move(dst, src *node, i int) {
	n := dst.len()
	var moved int
	if src.leaf() {
		moved = len(src.cells) - i
		dst.cells = append(dst.cells, src.cells[i:]...)
		dst.slots = append(dst.slots, src.slots[i:]...)
		clear(src.cells[i:])
		clear(src.slots[i:])
		src.cells, src.slots = src.cells[:i], src.slots[:i]
	} else {
		for _, c := range src.children[i:] {
			moved += c.size
		}
		dst.children = append(dst.children, src.children[i:]...)
		clear(src.children[i:])
		src.children = src.children[:i]
	}
	dst.adopt(n)
	dst.size += moved
	src.size -= moved
}

// remove takes the cell of sl out of the tree, merging nodes left short with a sibling.
func (t *tree) remove(sl *slot) {
	x := t.own(sl.leaf)
	j := slices.Index(x.slots, sl)
	x.cells = slices.Delete(x.cells, j, j+1)
	x.slots = slices.Delete(x.slots, j, j+1)
	for p := x; p != nil; p = p.parent {
		p.size--
	}
	for ; x.parent != nil; x = x.parent {
		p := x.parent
		if x.len() >= minFill || len(p.children) < 2 {
			continue
		}
		i := max(slices.Index(p.children, x), 1)
		a, b := t.own(p.children[i-1]), t.own(p.children[i])
		move(a, b, 0)
		p.children = slices.Delete(p.children, i, i+1)
		if a.len() > maxFill {
			t.split(a)
		}
	}
	for !t.root.leaf() && len(t.root.children) == 1 {
		t.root = t.root.children[0]
		t.root.parent = nil
	}
}
