package ynotebook

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

// peek copies the current snapshot without handing it out, so that the next Apply may edit
// the notebook's own in place.
func peek(n *Notebook) *Snapshot {
	c := *n.snap
	c.cells = buildTree(n.snap.cells.root.entries(), 0)
	return &c
}

// cellList returns the cells of s in order.
func cellList(s *Snapshot) []Cell {
	out := make([]Cell, 0, s.Len())
	for _, c := range s.All() {
		c := *c
		c.outShared = 0 // what it shares with the cell it was read again from is its history's
		out = append(out, c)
	}
	return out
}

// fullSnapshot materializes the document of n from scratch, without the cell cache.
func fullSnapshot(n *Notebook) *Snapshot {
	s, _ := n.rebuild(&Snapshot{}, scope{meta: true, cells: true})
	return s
}

// TestSessionsInOrder applies every session's updates in order and compares the document
// and the snapshot with pycrdt and jupyter_ydoc (the Jupyter server) at every checkpoint,
// and with Yjs where Yjs reads the same (ysessions.Checkpoint.YjsSame); the cached
// snapshot with a full one after every update, every change set with an independent
// diff, and the change set of the whole step between two checkpoints, applied as one
// update, with the diff of the two checkpoints.
func TestSessionsInOrder(t *testing.T) {
	for _, s := range ysessions.All(t) {
		t.Run(s.Name, func(t *testing.T) {
			nb, lag := New(), New()
			var lagSV []byte
			lagExact := true
			next := 0
			var held *Snapshot // handed out at the previous checkpoint: must not change
			for i, u := range s.Updates {
				before := peek(nb)
				ch, err := nb.Apply(u.Update)
				if err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
				checkTree(t, nb)
				after := peek(nb)
				requireSnapshotsEqual(t, i, after, fullSnapshot(nb))
				requireChanges(t, i, ch, before, after)
				for next < len(s.Checkpoints) && s.Checkpoints[next].After == i+1 {
					cp := s.Checkpoints[next]
					what := "checkpoint after update " + strconv.Itoa(i)
					if next > 0 {
						prev := s.Checkpoints[next-1].Pycrdt
						requireGet(t, "snapshot held since the previous checkpoint", held, prev.Get, prev.Reid)
					}
					held = nb.Snapshot()
					requirePycrdtReading(t, what, nb, cp.Pycrdt)
					if cp.YjsSame {
						requireJSON(t, what, held, cp.Notebook)
						requireState(t, what, nb.State(), cp.State)
					}
					step, err := nb.Doc().EncodeStateAsUpdate(lagSV)
					if err != nil {
						t.Fatal(err)
					}
					prev := lag.Snapshot()
					lch, err := lag.Apply(step)
					if err != nil {
						t.Fatalf("checkpoint step: %v", err)
					}
					// An encoded state writes a surrogate pair that a yjs client cut as
					// Yjs does (yjs.Doc.CutPairs): the lagging notebook reads as Yjs
					// while no step it applied held one.
					lagExact = lagExact && !nb.Doc().CutPairs()
					if cp.YjsSame && lagExact {
						requireJSON(t, "lagging notebook", lag.Snapshot(), cp.Notebook)
					}
					requireChanges(t, i, lch, prev, lag.Snapshot())
					lagSV = lag.Doc().EncodeStateVector()
					next++
				}
			}
			if next != len(s.Checkpoints) {
				t.Fatalf("checked %d of %d checkpoints", next, len(s.Checkpoints))
			}
		})
	}
}

// TestSessionsShuffled applies every session's updates in a random order, then all of them
// again in order, and reads what pycrdt reads after the same (differential.py orders): yrs
// integrates a struct past a gap in its client's clocks and retries pending ones late, so
// that the document after such a delivery can differ from the session's, in pycrdt too.
func TestSessionsShuffled(t *testing.T) {
	python := pinnedPython(t)
	if python == "" {
		return
	}
	cmd := exec.Command(python, filepath.Join("..", "..", "testdata", "pycrdt-golden", "differential.py"), "orders")
	ref := testenv.StartChild(t, cmd, testenv.CleanExit)
	out := bufio.NewScanner(ref.Out)
	out.Buffer(nil, 64<<20)
	for _, s := range ysessions.All(t) {
		r := rand.New(rand.NewPCG(uint64(s.Seed), 1))
		ups := s.UpdateBytes()
		r.Shuffle(len(ups), func(i, j int) { ups[i], ups[j] = ups[j], ups[i] })
		ups = append(ups, s.UpdateBytes()...)
		req, err := json.Marshal(map[string]any{"name": s.Name, "updates": ups})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ref.In.Write(append(req, '\n')); err != nil {
			t.Fatal(err)
		}
		if !out.Scan() {
			t.Fatalf("differential.py orders: %v", out.Err())
		}
		var want pyReading
		if err := json.Unmarshal(out.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		nb := applyAll(t, ups)
		if shuffledApart[s.Name] {
			got, err := nb.Snapshot().JSON()
			if err != nil {
				t.Fatal(err)
			}
			if reflect.DeepEqual(decodeExact(t, got), decodeExact(t, want.Get)) {
				t.Errorf("%s shuffled now reads as pycrdt does: drop it from shuffledApart", s.Name)
			}
			continue
		}
		requirePyDoc(t, s.Name+" shuffled", nb.Doc(), want.Doc)
		requireGet(t, s.Name+" shuffled", nb.Snapshot(), want.Get, want.Reid)
	}
}

// shuffledApart are the sessions whose shuffled delivery the engine reads otherwise than
// pycrdt: in s0043 a delete splits a surrogate pair that the text typed after it depends
// on, and a later character lands elsewhere (s0122 is not examined yet). The engine
// before yrs's Skips differed in both too, and in four sessions more.
var shuffledApart = map[string]bool{"s0043.json.gz": true, "s0122.json.gz": true}

// TestSessionsDuplicated applies every update twice and replays earlier ones at random;
// re-applied updates must report nothing.
func TestSessionsDuplicated(t *testing.T) {
	for _, s := range ysessions.All(t) {
		t.Run(s.Name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(s.Seed), 2))
			nb := New()
			next := 0
			for i, u := range s.Updates {
				if _, err := nb.Apply(u.Update); err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
				for _, again := range [][]byte{u.Update, s.Updates[r.IntN(i+1)].Update} {
					ch, err := nb.Apply(again)
					if err != nil {
						t.Fatalf("update %d again: %v", i, err)
					}
					if !ch.Empty() {
						t.Fatalf("update %d: re-applied update reports %+v", i, ch)
					}
				}
				for next < len(s.Checkpoints) && s.Checkpoints[next].After == i+1 {
					cp := s.Checkpoints[next]
					requirePycrdtReading(t, "duplicated", nb, cp.Pycrdt)
					if cp.YjsSame {
						requireJSON(t, "duplicated", nb.Snapshot(), cp.Notebook)
					}
					next++
				}
			}
		})
	}
}

// TestSessionsMerged applies the single update Y.mergeUpdates made of each session.
func TestSessionsMerged(t *testing.T) {
	for _, s := range ysessions.All(t) {
		t.Run(s.Name, func(t *testing.T) {
			nb := applyAll(t, [][]byte{s.Merged})
			requirePycrdtReading(t, "merged", nb, s.PycrdtMerged)
			if s.YjsRight() {
				last := s.Final()
				requireJSON(t, "merged", nb.Snapshot(), last.Notebook)
				requireState(t, "merged", nb.State(), last.State)
			}
		})
	}
}

// requirePycrdtReading compares nb's document with pycrdt's to_py and its snapshot with
// jupyter_ydoc's YNotebook.get() (the Jupyter server's reading).
func requirePycrdtReading(t *testing.T, what string, nb *Notebook, r ysessions.Reading) {
	t.Helper()
	requirePyDoc(t, what, nb.Doc(), r.Doc)
	requireGet(t, what, nb.Snapshot(), r.Get, r.Reid)
}

func applyAll(t testing.TB, ups [][]byte) *Notebook {
	t.Helper()
	nb := New()
	for i, u := range ups {
		if _, err := nb.Apply(u); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	return nb
}

func requireSnapshotsEqual(t testing.TB, i int, got, want *Snapshot) {
	t.Helper()
	if !reflect.DeepEqual(cellList(got), cellList(want)) || !reflect.DeepEqual(notebookLevel(t, got), notebookLevel(t, want)) {
		g, _ := got.JSON()
		w, _ := want.JSON()
		t.Fatalf("update %d: cached snapshot differs from a full one at %s", i, firstDiff("$", parsed(t, g), parsed(t, w)))
	}
}

// requireChanges checks ch against a diff of the JSON of the two snapshots made here,
// independently of the package's own diff.
func requireChanges(t testing.TB, i int, ch Changes, a, b *Snapshot) {
	t.Helper()
	nbA, nbB := notebookLevel(t, a), notebookLevel(t, b)
	if want := !reflect.DeepEqual(nbA, nbB); ch.Metadata != want {
		t.Fatalf("update %d: Metadata %v, want %v", i, ch.Metadata, want)
	}
	ka, kb := keyed(a), keyed(b)
	cellsA, cellsB := cellList(a), cellList(b)
	var added, removed []string
	for k, j := range kb.pos {
		if _, ok := ka.pos[k]; !ok {
			added = append(added, cellsB[j].ID)
		}
	}
	for k, j := range ka.pos {
		if _, ok := kb.pos[k]; !ok {
			removed = append(removed, cellsA[j].ID)
		}
	}
	requireSameSet(t, i, "Added", ch.Added, added)
	requireSameSet(t, i, "Removed", ch.Removed, removed)

	want := map[string]CellChange{}
	var common []string // keys present on both sides, in new order
	for _, k := range kb.keys {
		ia, ok := ka.pos[k]
		if !ok {
			continue
		}
		common = append(common, k)
		if reflect.DeepEqual(cellsA[ia], cellsB[kb.pos[k]]) {
			continue
		}
		if cc, changed := cellDiff(t, cellsA[ia], cellsB[kb.pos[k]]); changed {
			// cells sharing an id (concurrent moves clone cells) report together
			id := cellsB[kb.pos[k]].ID
			prev := want[id]
			want[id] = CellChange{
				Source: prev.Source || cc.Source, Metadata: prev.Metadata || cc.Metadata, Outputs: prev.Outputs || cc.Outputs,
				ExecutionCount: prev.ExecutionCount || cc.ExecutionCount, Attachments: prev.Attachments || cc.Attachments,
				CellType: prev.CellType || cc.CellType, Other: prev.Other || cc.Other, OutputIndexes: unionInts(prev.OutputIndexes, cc.OutputIndexes),
			}
		}
	}
	if len(want) == 0 {
		want = nil
	}
	if !reflect.DeepEqual(ch.Cells, want) {
		t.Fatalf("update %d: Cells %+v, want %+v", i, ch.Cells, want)
	}
	// Moved: the cells not reported as moved keep their relative order, and no more cells
	// are reported than a longest common subsequence leaves over.
	var oldOrder []int
	for _, k := range common {
		if !slices.Contains(ch.Moved, cellsB[kb.pos[k]].ID) {
			oldOrder = append(oldOrder, ka.pos[k])
		}
	}
	if !slices.IsSorted(oldOrder) {
		t.Fatalf("update %d: Moved %v leaves cells out of order", i, ch.Moved)
	}
	var commonOld []int
	for _, k := range common {
		commonOld = append(commonOld, ka.pos[k])
	}
	if limit := len(common) - lcsSorted(commonOld); len(ch.Moved) > limit {
		t.Fatalf("update %d: Moved %v, at most %d cells moved", i, ch.Moved, limit)
	}
}

// unionInts returns the sorted union of two sorted lists.
func unionInts(a, b []int) []int {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// lcsSorted is the length of a longest increasing subsequence, by dynamic programming.
func lcsSorted(xs []int) int {
	best := make([]int, len(xs))
	n := 0
	for i := range xs {
		best[i] = 1
		for j := range i {
			if xs[j] < xs[i] && best[j]+1 > best[i] {
				best[i] = best[j] + 1
			}
		}
		n = max(n, best[i])
	}
	return n
}

func requireSameSet(t testing.TB, i int, what string, got, want []string) {
	t.Helper()
	g := slices.Compact(slices.Sorted(slices.Values(got)))
	w := slices.Compact(slices.Sorted(slices.Values(want)))
	if !slices.Equal(g, w) {
		t.Fatalf("update %d: %s %q, want %q", i, what, got, want)
	}
}

// notebookLevel is the JSON of the snapshot without its cells.
func notebookLevel(t testing.TB, s *Snapshot) map[string]any {
	t.Helper()
	bare := *s
	bare.cells = tree{}
	b, err := bare.JSON()
	if err != nil {
		t.Fatal(err)
	}
	m := parsed(t, b).(map[string]any)
	delete(m, "cells")
	return m
}

type keyedCells struct {
	keys []string
	pos  map[string]int
}

// keyed names each cell by id and occurrence of that id.
func keyed(s *Snapshot) keyedCells {
	k := keyedCells{pos: map[string]int{}}
	seen := map[string]int{}
	for i, c := range s.All() {
		id := fmt.Sprintf("%t/%s", c.hasID, c.ID)
		key := fmt.Sprintf("%s/%d", id, seen[id])
		seen[id]++
		k.keys = append(k.keys, key)
		k.pos[key] = i
	}
	return k
}

// cellDiff compares the JSON of two cells.
func cellDiff(t testing.TB, a, b Cell) (CellChange, bool) {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	ma, mb := parsed(t, ja).(map[string]any), parsed(t, jb).(map[string]any)
	differs := func(k string) bool {
		va, oka := ma[k]
		vb, okb := mb[k]
		return oka != okb || !reflect.DeepEqual(va, vb)
	}
	cc := CellChange{
		Source:         differs("source"),
		Metadata:       differs("metadata"),
		ExecutionCount: differs("execution_count"),
		Attachments:    differs("attachments"),
		CellType:       differs("cell_type"),
	}
	// A key outside nbformat, which get() serves as it is (issue 40): Other.
	for _, m := range []map[string]any{ma, mb} {
		for k := range m {
			switch k {
			case "id", "source", "metadata", "execution_count", "attachments", "cell_type", "outputs":
			default:
				cc.Other = cc.Other || differs(k)
			}
		}
	}
	oa, _ := ma["outputs"].([]any)
	ob, _ := mb["outputs"].([]any)
	for i := range max(len(oa), len(ob)) {
		if i >= len(oa) || i >= len(ob) || !reflect.DeepEqual(oa[i], ob[i]) {
			cc.OutputIndexes = append(cc.OutputIndexes, i)
		}
	}
	// The key itself is content too: get() serves a cell without "outputs" as it is, so
	// "outputs": [] becoming absent (or appearing) is a change of its outputs.
	cc.Outputs = len(cc.OutputIndexes) > 0 || differs("outputs")
	return cc, !reflect.DeepEqual(cc, CellChange{})
}
