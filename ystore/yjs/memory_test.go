package yjs

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/yjstest"
)

// testMeter is a Meter with a limit (0: none) that counts what it was charged.
type testMeter struct{ limit, used int64 }

func (m *testMeter) Left() int64 {
	if m.limit == 0 {
		return math.MaxInt64
	}
	return m.limit - m.used
}

func (m *testMeter) Add(n int64) { m.used += n }

// heap returns the live heap after a collection.
func heap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// memoryShapes are updates whose decoded memory is far from their bytes, each a few MB.
func memoryShapes() map[string]func() [][]byte {
	nested := func() [][]byte { // chains of nested maps, as deep as a type may nest
		var us [][]byte
		for c := range uint64(60) {
			us = append(us, yjstest.Nested(c+1, "meta", fmt.Sprint("k", c), MaxDepth-1))
		}
		return us
	}
	deepAny := func() [][]byte { // an Any object of 100,000 empty objects
		o := make(map[string]any, 100_000)
		for i := range 100_000 {
			o[fmt.Sprint(i)] = map[string]any{}
		}
		return [][]byte{yjstest.MapSet(1, "meta", "k", o)}
	}
	emptyStrings := func() [][]byte {
		a := make([]any, 300_000)
		for i := range a {
			a[i] = ""
		}
		return [][]byte{yjstest.MapSet(1, "meta", "k", a)}
	}
	split := func() [][]byte { // a long text, then every other character deleted
		return [][]byte{yjstest.Text(1, "source", strings.Repeat("y", 400_000)), yjstest.Deletes(1, 0, 2, 200_000)}
	}
	nulls := func() [][]byte { // an Any array of 3,000,000 nulls: a byte each
		return [][]byte{yjstest.MapSet(1, "meta", "k", make([]any, 3_000_000))}
	}
	pending := func() [][]byte { // structs waiting for their origin, a client each
		us := make([][]byte, 20_000)
		for i := range us {
			us[i] = yjstest.Char(uint64(i+1), "source", 1)
		}
		return us
	}
	skips := func() [][]byte { // structs past a gap in their clients' clocks: a Skip each
		us := make([][]byte, 20_000)
		us[0] = yjstest.TextAt(1, 7, "source", "x")
		for i := 1; i < len(us); i++ {
			us[i] = yjstest.After(uint64(i+1), 7, uint64(i), 7, "x")
		}
		return us
	}
	pendingDeletes := func() [][]byte { // deletes of clocks the document does not hold
		return [][]byte{yjstest.Deletes(1, 0, 2, 300_000)}
	}
	return map[string]func() [][]byte{
		"pending":           pending,
		"skips":             skips,
		"pending deletes":   pendingDeletes,
		"a client a struct": func() [][]byte { return [][]byte{yjstest.Clients(1, "source", 100_000)} },
		"nulls":             nulls,
		"subdocuments":      func() [][]byte { return [][]byte{yjstest.Subdocs(1, "meta", 30_000)} },
		"nested maps":       nested,
		"flat keys":         func() [][]byte { return [][]byte{yjstest.Keys(1, "meta", 150_000)} },
		"deep any":          deepAny,
		"empty strings":     emptyStrings,

		"split text": split,
	}
}

// TestMemoryModel: whatever the shape of the updates, what a document is charged for
// (after the measure a load ends with) is no less than half of the heap it really
// holds, nor more than a few times it.
func TestMemoryModel(t *testing.T) {
	for name, shape := range memoryShapes() {
		t.Run(name, func(t *testing.T) {
			us := shape()
			var rows int64
			for _, u := range us {
				rows += int64(len(u))
			}
			m := &testMeter{}
			before := heap()
			d := NewDoc()
			d.SetMeter(m)
			for _, u := range us {
				if _, err := d.ApplyUpdate(u); err != nil {
					t.Fatal(err)
				}
			}
			us = nil
			d.CompactText()
			live := max(heap()-before, 0)
			held := d.Held()
			runtime.KeepAlive(d)
			t.Logf("rows %d B, heap %d B (%.1f× the rows), charged %d B (%.2f× the heap)",
				rows, live, float64(live)/float64(rows), held, float64(held)/float64(live))
			if m.used != held {
				t.Errorf("meter holds %d, document %d", m.used, held)
			}
			if live > 2*held+1<<20 {
				t.Errorf("charged %d B for %d B of heap: less than half", held, live)
			}
			if held > 4*live+1<<20 {
				t.Errorf("charged %d B for %d B of heap: more than 4×", held, live)
			}
			d.SetMeter(nil)
			if m.used != 0 {
				t.Errorf("meter holds %d after the document left it", m.used)
			}
		})
	}
}

// TestMemoryBudget: an update whose decoded memory passes what the meter has left is
// refused with ErrBudget while it decodes, having built little more than the limit, and
// leaves the document and the meter as they were.
func TestMemoryBudget(t *testing.T) {
	const limit = 4 << 20
	for name, shape := range memoryShapes() {
		t.Run(name, func(t *testing.T) {
			us := shape()
			m := &testMeter{limit: limit}
			d := NewDoc()
			d.SetMeter(m)
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			var err error
			applied := 0
			for _, u := range us {
				if _, err = d.ApplyUpdate(u); err != nil {
					break
				}
				applied++
			}
			runtime.ReadMemStats(&ms1)
			if !errors.Is(err, ErrBudget) {
				t.Fatalf("error %v, want ErrBudget", err)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T, want a *DecodeError", err)
			}
			if m.used != d.Held() || m.used > limit {
				t.Errorf("meter holds %d, document %d, limit %d", m.used, d.Held(), limit)
			}
			if applied == 0 && len(d.StateVector()) != 0 {
				t.Errorf("refused update changed the document: %v", d.StateVector())
			}
			if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 6*limit+uint64(applied)*1024 {
				t.Errorf("allocated %d B before refusing (limit %d)", alloc, limit)
			}
		})
	}
}

// TestMemorySettles: a long typing session is charged what the document holds, within
// a factor, not what its updates decoded to: merges are given back.
func TestMemorySettles(t *testing.T) {
	m := &testMeter{}
	d := NewDoc()
	d.SetMeter(m)
	for _, u := range yjstest.Typed(1, "source", 200_000) {
		if _, err := d.ApplyUpdate(u); err != nil {
			t.Fatal(err)
		}
	}
	if size := d.size(); d.Held() > 2*size+recountMin {
		t.Errorf("charged %d B for a document of %d B", d.Held(), size)
	}
	if m.used != d.Held() {
		t.Errorf("meter holds %d, document %d", m.used, d.Held())
	}
}

// TestMemoryBudgetHeldAtRefusal: rows applied one after another until the meter refuses
// one hold, when it does, no more than about what the meter was charged: the charge of
// an update covers what integrating it builds (a writer making a client per struct made
// each take a kilobyte charged 136 bytes: the red team's process held 1.3 GB under a
// bound of 128 MiB).
func TestMemoryBudgetHeldAtRefusal(t *testing.T) {
	const limit = 32 << 20
	for name, shape := range map[string]func(i int) []byte{
		"a client a struct": func(i int) []byte { return yjstest.Clients(uint64(1+2000*i), fmt.Sprint("t", i), 2000) },
		"nested maps":       func(i int) []byte { return yjstest.Chains(uint64(1+20*i), "meta", 20, MaxDepth-1) },
	} {
		t.Run(name, func(t *testing.T) {
			m := &testMeter{limit: limit}
			before := heap()
			d := NewDoc()
			d.SetMeter(m)
			var err error
			for i := 0; err == nil && i < 10_000; i++ {
				_, err = d.ApplyUpdate(shape(i))
			}
			if !errors.Is(err, ErrBudget) {
				t.Fatalf("error %v, want ErrBudget", err)
			}
			live := heap() - before
			runtime.KeepAlive(d)
			t.Logf("refused at %d B charged; the document holds %d B of heap", m.used, live)
			if live > 2*limit {
				t.Errorf("the document holds %d B of heap at its refusal, under a limit of %d B", live, limit)
			}
		})
	}
}

// TestMemoryTextRead: a document's text is charged as held twice, in its items and in
// what is read from it (a notebook's served source): a cell of 120 MB was charged once
// and held twice, and more while it was read (red team of issue 39, pass 7).
func TestMemoryTextRead(t *testing.T) {
	m := &testMeter{}
	before := heap()
	d := NewDoc()
	d.SetMeter(m)
	if _, err := d.ApplyUpdate(yjstest.Text(1, "source", strings.Repeat("x", 16<<20))); err != nil {
		t.Fatal(err)
	}
	read := d.Text("source").String()
	live := heap() - before
	runtime.KeepAlive(d)
	t.Logf("charged %d B; the document and its text read hold %d B", d.Held(), live)
	if live > d.Held()+1<<20 {
		t.Errorf("charged %d B, held %d B with its text read", d.Held(), live)
	}
	runtime.KeepAlive(read)
}

// TestMemoryOwnContent: an item allocated with its Type or its values' holder (newItem)
// is charged for them while it lives, its content collected or not.
func TestMemoryOwnContent(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind uint8
		own  int64
	}{
		{"type", kindType, typeBytes},
		{"any", kindAny, valsBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := newItem(tc.kind)
			it.kind, it.length = tc.kind, 1
			if tc.kind == kindAny {
				newVals(it, 1).s[0] = nil
			}
			live := itemBytes + tc.own
			if tc.kind == kindAny {
				live += 16 // its value's slot
			}
			if got := itemSize(it); got != live {
				t.Errorf("live: charged %d, want %d", got, live)
			}
			it.kind, it.val = kindDeleted, nil // Doc.gc of a deleted item
			if got := itemSize(it); got != itemBytes+tc.own {
				t.Errorf("collected: charged %d, want %d", got, itemBytes+tc.own)
			}
			it.toGC()
			if got := itemSize(it); got != itemBytes+tc.own {
				t.Errorf("GC struct: charged %d, want %d", got, itemBytes+tc.own)
			}
			if r := splitItem(&item{kind: kindAny, length: 2, val: newVals(&item{}, 2)}, 1); r.flags&flagsOwn != 0 {
				t.Errorf("a split's right part owns no content: flags %b", r.flags)
			}
		})
	}
}
