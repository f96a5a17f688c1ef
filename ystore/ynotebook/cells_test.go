package ynotebook

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// checkTree fails unless the notebook's cell tree is well formed: sizes add up, parent
// links and slots lead to the nodes holding them, nodes are filled within bounds and
// bySlot names every cell map of the tree.
func checkTree(t testing.TB, n *Notebook) {
	t.Helper()
	root := n.snap.cells.root
	if root.parent != nil {
		t.Fatal("root has a parent")
	}
	var walk func(x *node, depth int) int
	leafDepth := -1
	cells := 0
	walk = func(x *node, depth int) int {
		if x.len() > maxFill {
			t.Fatalf("node of %d entries", x.len())
		}
		if x != root && x.len() < minFill {
			t.Fatalf("node of %d entries", x.len())
		}
		if x.leaf() {
			if leafDepth >= 0 && leafDepth != depth {
				t.Fatalf("leaves at depths %d and %d", leafDepth, depth)
			}
			leafDepth = depth
			if len(x.slots) != len(x.cells) || x.size != len(x.cells) {
				t.Fatalf("leaf of %d cells, %d slots, size %d", len(x.cells), len(x.slots), x.size)
			}
			for _, sl := range x.slots {
				if sl.leaf != x || n.bySlot[sl.typ] != sl {
					t.Fatal("slot not pointing to its leaf or not in bySlot")
				}
			}
			cells += len(x.cells)
			return x.size
		}
		size := 0
		for _, c := range x.children {
			if c.parent != x {
				t.Fatal("child not pointing to its parent")
			}
			if x.gen < n.snap.cells.gen && c.gen == n.snap.cells.gen {
				t.Fatal("owned node below a shared one")
			}
			size += walk(c, depth+1)
		}
		if size != x.size {
			t.Fatalf("inner node of size %d holds %d cells", x.size, size)
		}
		return size
	}
	walk(root, 0)
	if cells != len(n.bySlot) {
		t.Fatalf("%d cells in the tree, %d in bySlot", cells, len(n.bySlot))
	}
}

// TestTreeEdits edits a cell tree at random, handing out snapshots at random, and checks
// it against a slice after every edit, and every snapshot handed out against its content
// at the time: mixed edits, then removes until it is empty, then inserts.
func TestTreeEdits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 31, 33, 200, 1200} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			doc := yjs.NewDoc()
			types := make([]*yjs.Type, 0, size+2000)
			newType := func() *yjs.Type {
				m := doc.Map("m" + strconv.Itoa(len(types)))
				types = append(types, m.Type())
				return m.Type()
			}
			var model []*Cell
			var read []readCell
			for i := range size {
				c := &Cell{ID: strconv.Itoa(i)}
				model = append(model, c)
				read = append(read, readCell{typ: newType(), cell: c})
			}
			n := &Notebook{snap: &Snapshot{}}
			n.snap.cells = buildTree(read, 0)
			n.reset(n.snap, read)
			var slots []*slot // the slot of each cell of model
			for x := range leaves(n.snap.cells.root) {
				slots = append(slots, x.slots...)
			}
			type held struct {
				s     *Snapshot
				cells []*Cell
			}
			var snaps []held
			// mixed edits, then removes until the tree is empty, then inserts
			drained, grown := false, 0
			for step := 0; grown < 500; step++ {
				if r.IntN(4) == 0 {
					snaps = append(snaps, held{n.Snapshot(), slices.Clone(model)})
				}
				if n.shared {
					c := *n.snap
					c.cells.gen++
					n.snap, n.shared = &c, false
				}
				c := &Cell{ID: "s" + strconv.Itoa(step)}
				op := r.IntN(3)
				switch {
				case step >= 3000 && !drained && len(model) > 0:
					op = 1
				case step >= 3000:
					drained, op = true, 2
					grown++
				}
				switch {
				case op == 0 && len(model) > 0: // replace
					i := r.IntN(len(model))
					n.snap.cells.set(slots[i], c)
					model[i] = c
				case op == 1 && len(model) > 0: // remove
					i := r.IntN(len(model))
					n.snap.cells.remove(slots[i])
					delete(n.bySlot, slots[i].typ)
					model, slots = slices.Delete(model, i, i+1), slices.Delete(slots, i, i+1)
				default: // insert
					i := r.IntN(len(model) + 1)
					var left *slot
					if i > 0 {
						left = slots[i-1]
					}
					sl := &slot{typ: newType()}
					n.snap.cells.insertAfter(left, sl, c)
					n.bySlot[sl.typ] = sl
					model, slots = slices.Insert(model, i, c), slices.Insert(slots, i, sl)
				}
				checkTree(t, n)
				if got := slices.Collect(cellValues(n.snap)); !slices.Equal(got, model) {
					t.Fatalf("step %d: tree differs from the model", step)
				}
				if n.snap.Len() != len(model) {
					t.Fatalf("step %d: Len %d, want %d", step, n.snap.Len(), len(model))
				}
				if len(model) > 0 {
					i := r.IntN(len(model))
					if n.snap.At(i) != model[i] || slots[i].pos() != i || slots[i].cell() != model[i] {
						t.Fatalf("step %d: At, pos or cell of %d differs", step, i)
					}
				}
			}
			for k, h := range snaps {
				if got := slices.Collect(cellValues(h.s)); !slices.Equal(got, h.cells) {
					t.Fatalf("snapshot %d changed after it was handed out", k)
				}
			}
		})
	}
}

// cellValues yields the cells of s.
func cellValues(s *Snapshot) func(yield func(*Cell) bool) {
	return func(yield func(*Cell) bool) {
		for _, c := range s.All() {
			if !yield(c) {
				return
			}
		}
	}
}
