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

// treeModel is a notebook's cell tree beside the cells and slots it should hold, and the
// snapshots it handed out with the cells they held then.
type treeModel struct {
	n     *Notebook
	doc   *yjs.Doc
	made  int // cells made
	cells []*Cell
	slots []*slot
	held  []*Snapshot
	was   [][]*Cell
}

func newTreeModel(size int) *treeModel {
	m := &treeModel{n: &Notebook{snap: &Snapshot{}}, doc: yjs.NewDoc()}
	read := make([]readCell, size)
	for i := range read {
		read[i] = readCell{typ: m.newType(), cell: m.newCell()}
	}
	m.n.snap.cells = buildTree(read, 0)
	m.n.reset(m.n.snap, rebuilt{all: read, visible: read})
	for x := range leaves(m.n.snap.cells.root) {
		m.slots = append(m.slots, x.slots...)
	}
	for _, r := range read {
		m.cells = append(m.cells, r.cell)
	}
	return m
}

func (m *treeModel) newType() *yjs.Type {
	return m.doc.Map("m" + strconv.Itoa(m.made)).Type()
}

func (m *treeModel) newCell() *Cell {
	m.made++
	return &Cell{ID: strconv.Itoa(m.made)}
}

// edit hands out the snapshot first when share is set, then replaces (op 0), removes
// (op 1) or inserts (op 2, or any op on an empty tree) the cell at index i modulo the
// cells, and checks the tree and the cell at index at.
func (m *treeModel) edit(t testing.TB, share bool, op, i, at int) {
	t.Helper()
	if share {
		m.held, m.was = append(m.held, m.n.Snapshot()), append(m.was, slices.Clone(m.cells))
	}
	tr := &m.n.editable().cells
	c := m.newCell()
	switch {
	case op == 0 && len(m.cells) > 0:
		i %= len(m.cells)
		tr.set(m.slots[i], c)
		m.cells[i] = c
	case op == 1 && len(m.cells) > 0:
		i %= len(m.cells)
		tr.remove(m.slots[i])
		delete(m.n.bySlot, m.slots[i].typ)
		m.cells, m.slots = slices.Delete(m.cells, i, i+1), slices.Delete(m.slots, i, i+1)
	default:
		i %= len(m.cells) + 1
		var left *slot
		if i > 0 {
			left = m.slots[i-1]
		}
		sl := &slot{typ: m.newType()}
		tr.insertAfter(left, sl, c)
		m.n.bySlot[sl.typ] = sl
		m.cells, m.slots = slices.Insert(m.cells, i, c), slices.Insert(m.slots, i, sl)
	}
	checkTree(t, m.n)
	if got := slices.Collect(cellValues(m.n.snap)); !slices.Equal(got, m.cells) || m.n.snap.Len() != len(m.cells) {
		t.Fatalf("tree of %d cells differs from the model of %d", m.n.snap.Len(), len(m.cells))
	}
	if len(m.cells) > 0 {
		at %= len(m.cells)
		if m.n.snap.At(at) != m.cells[at] || m.slots[at].pos() != at || m.slots[at].cell() != m.cells[at] {
			t.Fatalf("At, pos or cell of %d differs", at)
		}
	}
}

// checkHeld fails unless every snapshot handed out holds the cells it held then.
func (m *treeModel) checkHeld(t testing.TB) {
	t.Helper()
	for k, s := range m.held {
		if got := slices.Collect(cellValues(s)); !slices.Equal(got, m.was[k]) {
			t.Fatalf("snapshot %d changed after it was handed out", k)
		}
	}
}

// TestTreeEdits edits a cell tree at random, handing out snapshots at random, and checks
// it against a slice after every edit, and every snapshot handed out against its content
// at the time: mixed edits, then removes until it is empty, then inserts.
func TestTreeEdits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 31, 33, 200, 1200} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			m := newTreeModel(size)
			for range 3000 {
				m.edit(t, r.IntN(4) == 0, r.IntN(3), r.IntN(1<<20), r.IntN(1<<20))
			}
			for len(m.cells) > 0 {
				m.edit(t, r.IntN(4) == 0, 1, r.IntN(1<<20), r.IntN(1<<20))
			}
			for range 500 {
				m.edit(t, r.IntN(4) == 0, 2, r.IntN(1<<20), r.IntN(1<<20))
			}
			m.checkHeld(t)
		})
	}
}

// TestTreeConcurrentReads reads every snapshot handed out in another goroutine while the
// tree is edited: under -race, edits must not write what a snapshot's reader reads.
func TestTreeConcurrentReads(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := newTreeModel(1200)
	snaps := make(chan *Snapshot, 16)
	done := make(chan int)
	go func() {
		cells := 0
		for s := range snaps {
			for range 3 {
				for _, c := range s.All() {
					cells += len(c.ID)
				}
				if s.Len() > 0 {
					cells += len(s.At(s.Len() / 2).ID)
				}
			}
		}
		done <- cells
	}()
	for range 2000 {
		m.edit(t, true, r.IntN(3), r.IntN(1<<20), r.IntN(1<<20))
		snaps <- m.held[len(m.held)-1]
	}
	close(snaps)
	<-done
	m.checkHeld(t)
}

// FuzzTreeEdits edits a cell tree of up to 2047 cells as the bytes say, three bytes an
// edit (share and op, index, index checked), and checks it as TestTreeEdits does.
func FuzzTreeEdits(f *testing.F) {
	f.Add([]byte{0, 40, 2, 0, 0, 1, 10, 5, 6, 255, 3})
	f.Add([]byte{7, 255, 5, 1, 2, 9, 1, 2, 9, 1, 2, 9, 1, 2, 9, 1, 2, 9, 1, 2, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 2 {
			return
		}
		m := newTreeModel(int(b[0])<<8&0x700 | int(b[1]))
		for b = b[2:]; len(b) >= 3; b = b[3:] {
			scale := len(m.cells) + 1
			m.edit(t, b[0]&4 != 0, int(b[0]&3), int(b[1])*scale/256, int(b[2])*scale/256)
		}
		m.checkHeld(t)
	})
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
