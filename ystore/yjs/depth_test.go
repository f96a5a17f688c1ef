package yjs

import (
	"bytes"
	"errors"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/yjstest"
)

// part returns the structs from clock from to clock to of u (one client's update) as an
// update of their own.
func part(t testing.TB, u []byte, from, to int) []byte {
	t.Helper()
	dec, err := decodeUpdate(u, 0, &arena{}, nil, &update{})
	if err != nil {
		t.Fatal(err)
	}
	dec.refs[0].refs = dec.refs[0].refs[from:to]
	return encodeUpdates([]*update{dec})
}

// checkDepths fails unless every type d holds is one deeper than its parent and at most
// MaxDepth deep.
func checkDepths(t testing.TB, d *Doc) {
	t.Helper()
	for _, r := range d.roots {
		if r.depth != 0 {
			t.Fatalf("root %q at depth %d", r.name, r.depth)
		}
	}
	for _, cs := range d.clients {
		for it := range cs.all() {
			if it.kind != kindType {
				continue
			}
			if typ := it.typ(); typ.depth != it.parent.depth+1 || typ.depth > MaxDepth {
				t.Fatalf("type %v at depth %d in a parent at depth %d", it.id, typ.depth, it.parent.depth)
			}
		}
	}
}

// jsonDepth returns how many maps or arrays nest inside the JSON map or array v, under
// key "k" or as the first element.
func jsonDepth(v any) int {
	for n := 0; ; n++ {
		switch x := v.(type) {
		case map[string]any:
			v = x["k"]
		case []any:
			v = nil
			if len(x) > 0 {
				v = x[0]
			}
		default:
			return n - 1
		}
	}
}

// TestDepthBound applies types nested up to and beyond MaxDepth, in one update or
// several, in order or not: a type deeper than MaxDepth is refused before anything is
// applied, and everything up to the bound applies and converts.
func TestDepthBound(t *testing.T) {
	maps := func(n int) []byte { return yjstest.Nested(7, "m", "k", n) }
	arrays := func(n int) []byte { return yjstest.Nested(7, "a", "", n) }
	const none = -1
	tests := []struct {
		name    string
		updates func(t testing.TB) [][]byte
		root    string
		depth   int // how deep the root's JSON nests in the end
		refused int // the index of the refused update, or none
		clock   uint64
	}{
		{"maps at the bound", func(testing.TB) [][]byte { return [][]byte{maps(MaxDepth)} }, "m", MaxDepth, none, 0},
		{"arrays at the bound", func(testing.TB) [][]byte { return [][]byte{arrays(MaxDepth)} }, "a", MaxDepth, none, 0},
		{"maps beyond the bound", func(testing.TB) [][]byte { return [][]byte{maps(MaxDepth + 1)} }, "m", 0, 0, MaxDepth},
		{"arrays beyond the bound", func(testing.TB) [][]byte { return [][]byte{arrays(MaxDepth + 1)} }, "a", 0, 0, MaxDepth},
		{"200k maps", func(testing.TB) [][]byte { return [][]byte{maps(200000)} }, "m", 0, 0, MaxDepth},
		{"one level more on top of the bound", func(t testing.TB) [][]byte {
			u := maps(MaxDepth + 1)
			return [][]byte{part(t, u, 0, MaxDepth), part(t, u, MaxDepth, MaxDepth+1)}
		}, "m", MaxDepth, 1, MaxDepth},
		{"the outer levels last, at the bound", func(t testing.TB) [][]byte {
			u := maps(MaxDepth)
			return [][]byte{part(t, u, 500, MaxDepth), part(t, u, 1, 500), part(t, u, 0, 1)}
		}, "m", MaxDepth, none, 0},
		{"the outer levels last, beyond the bound", func(t testing.TB) [][]byte {
			u := maps(MaxDepth + 1)
			return [][]byte{part(t, u, 500, MaxDepth+1), part(t, u, 1, 500), part(t, u, 0, 1)}
		}, "m", 0, 2, MaxDepth},
		{"beyond the bound below a missing type", func(t testing.TB) [][]byte {
			return [][]byte{part(t, maps(MaxDepth+2), 1, MaxDepth+2)}
		}, "m", 0, 0, MaxDepth + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDoc()
			for i, u := range tt.updates(t) {
				before, _ := d.EncodeStateAsUpdate(nil)
				pending := d.HasPending()
				var err error
				if n := allocated(func() { _, err = d.ApplyUpdate(u) }); n > allocLimit(len(u)) {
					t.Fatalf("update %d: applying %d bytes allocated %d", i, len(u), n)
				}
				if i != tt.refused {
					if err != nil {
						t.Fatalf("update %d: %v", i, err)
					}
					continue
				}
				var de *DepthError
				if !errors.As(err, &de) || !errors.Is(err, ErrTooDeep) || de.ID != (ID{7, tt.clock}) {
					t.Fatalf("update %d: error %v, want the *DepthError of 7:%d", i, err, tt.clock)
				}
				after, _ := d.EncodeStateAsUpdate(nil)
				if !bytes.Equal(before, after) || d.HasPending() != pending {
					t.Fatalf("update %d: refused, but it changed the document", i)
				}
			}
			checkDepths(t, d)
			var root any = d.Map(tt.root)
			if tt.root == "a" {
				root = d.Array(tt.root)
			}
			if got := jsonDepth(ToJSON(root)); got != tt.depth {
				t.Fatalf("JSON nests %d deep, want %d", got, tt.depth)
			}
			if _, err := d.EncodeStateAsUpdate(nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDepthRefusedCheaply: refusing a nest of 200k maps costs little more than decoding
// it; the nest is never built.
func TestDepthRefusedCheaply(t *testing.T) {
	u := yjstest.Nested(1, "m", "k", 200000)
	decoding := allocated(func() {
		if _, err := decodeUpdate(u, 0, &arena{}, nil, &update{}); err != nil {
			t.Fatal(err)
		}
	})
	var err error
	applying := allocated(func() { _, err = NewDoc().ApplyUpdate(u) })
	if !errors.Is(err, ErrTooDeep) {
		t.Fatalf("err = %v, want ErrTooDeep", err)
	}
	if applying > decoding+1<<20 {
		t.Fatalf("refusing allocated %d bytes, decoding %d", applying, decoding)
	}
}

// TestDepthDeleted deletes a nest at the bound: deleting and collecting it walk MaxDepth
// types deep.
func TestDepthDeleted(t *testing.T) {
	d := NewDoc()
	mustApply(t, d, yjstest.Nested(1, "m", "k", MaxDepth))
	// No structs; deleted: client 1, one range, from clock 0, MaxDepth long.
	mustApply(t, d, []byte{0, 1, 1, 1, 0, MaxDepth&0x7f | 0x80, MaxDepth >> 7})
	if m := d.Map("m"); m.Len() != 0 {
		t.Fatalf("map keys %v after the delete", m.Keys())
	}
	checkDepths(t, d)
}

// TestDepthFailed: a too deep type that integration meets (depthCheck bypassed here) is
// dropped, and the document refuses every later update.
func TestDepthFailed(t *testing.T) {
	d := NewDoc()
	u := yjstest.Nested(1, "m", "k", MaxDepth+1)
	mustApply(t, d, part(t, u, 0, MaxDepth))
	dec, err := decodeUpdate(part(t, u, MaxDepth, MaxDepth+1), 0, &d.texts, nil, &update{})
	if err != nil {
		t.Fatal(err)
	}
	d.txn = &Txn{}
	d.readUpdate(d.txn, dec, false)
	d.cleanup(d.txn)
	d.txn = nil
	checkDepths(t, d)
	if got := jsonDepth(ToJSON(d.Map("m"))); got != MaxDepth {
		t.Fatalf("JSON nests %d deep, want %d", got, MaxDepth)
	}
	var de *DepthError
	if _, err := d.ApplyUpdate(yjstest.Char(2, "t", 0)); !errors.As(err, &de) || de.ID != (ID{1, MaxDepth}) {
		t.Fatalf("after the failure: %v, want the *DepthError of 1:%d", err, MaxDepth)
	}
}
