package ynotebook

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

// TestSpliceSameAsReadAll applies every recorded session twice, once through Apply and
// once reading the whole cells array after every update, and requires the same change
// sets, in the same order, and the same snapshots.
func TestSpliceSameAsReadAll(t *testing.T) {
	for _, s := range ysessions.All(t) {
		t.Run(s.Name, func(t *testing.T) {
			nb, ref := New(), New()
			for i, u := range s.Updates {
				got, err := nb.Apply(u.Update)
				if err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
				want := applyReadingAll(t, ref, u.Update)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("update %d: changes %+v, reading all cells %+v", i, got, want)
				}
				requireSnapshotsEqual(t, i, nb.Snapshot(), ref.Snapshot())
			}
		})
	}
}

// applyReadingAll is Apply without splice.
func applyReadingAll(t *testing.T, n *Notebook, u []byte) Changes {
	t.Helper()
	txn, err := n.doc.ApplyUpdate(u)
	if err != nil {
		t.Fatal(err)
	}
	sc := scopeOf(txn, nil, nil)
	if !sc.meta && !sc.cells && len(sc.parts) == 0 {
		return Changes{}
	}
	return n.readAll(sc)
}

// TestLoad loads the first half of each session at once and applies the rest one by one:
// the snapshots and the change sets after it are those of applying every update. Loading
// the same half in batches (Loading, a streamed load) makes the same notebook.
func TestLoad(t *testing.T) {
	for _, s := range ysessions.All(t) {
		t.Run(s.Name, func(t *testing.T) {
			half := len(s.Updates) / 2
			nb, ref := New(), New()
			var first [][]byte
			for i, u := range s.Updates[:half] {
				first = append(first, u.Update)
				if _, err := ref.Apply(u.Update); err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
			}
			if err := nb.Load(first); err != nil {
				t.Fatal(err)
			}
			requireSnapshotsEqual(t, half, nb.Snapshot(), ref.Snapshot())
			l := NewLoading(nil)
			for i, u := range first {
				if err := l.Add(u); err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
			}
			requireSnapshotsEqual(t, half, l.Done().Snapshot(), ref.Snapshot())
			for i, u := range s.Updates[half:] {
				got, err := nb.Apply(u.Update)
				if err != nil {
					t.Fatalf("update %d: %v", half+i, err)
				}
				want, _ := ref.Apply(u.Update)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("update %d: changes %+v after Load, %+v without", half+i, got, want)
				}
			}
			requireSnapshotsEqual(t, len(s.Updates), nb.Snapshot(), ref.Snapshot())
		})
	}
}

// TestLoadError: malformed updates, one after thousands of others, are skipped and named
// by their index; the others are applied.
func TestLoadError(t *testing.T) {
	s := ysessions.All(t)[0]
	ups := s.UpdateBytes()
	half := len(ups) / 2
	var updates [][]byte
	for len(updates) < 5000 {
		updates = append(updates, ups[:half]...) // known updates again: no-ops
	}
	updates = slices.Insert(updates, 3, []byte{0xff})
	bad := []int{3, len(updates)}
	updates = append(updates, []byte{0x01})
	updates = append(updates, ups[half:]...)
	nb, ref := New(), New()
	err := nb.Load(updates)
	var got []int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ue *UpdateError
		var de *yjs.DecodeError
		if !errors.As(e, &ue) || !errors.As(e, &de) {
			t.Fatalf("Load error %v: not an *UpdateError wrapping a *yjs.DecodeError", e)
		}
		got = append(got, ue.Index)
	}
	if !slices.Equal(got, bad) {
		t.Fatalf("Load skipped updates %v, want %v", got, bad)
	}
	if err := ref.Load(ups); err != nil {
		t.Fatal(err)
	}
	requireSnapshotsEqual(t, len(updates), nb.Snapshot(), ref.Snapshot())

	// Loaded one at a time, the same updates are skipped, each with its decode error.
	l := NewLoading(nil)
	got = nil
	for i, u := range updates {
		err := l.Add(u)
		var de *yjs.DecodeError
		if err != nil && !errors.As(err, &de) {
			t.Fatalf("Loading.Add of update %d: %v, want a *yjs.DecodeError", i, err)
		}
		if err != nil {
			got = append(got, i)
		}
	}
	if !slices.Equal(got, bad) {
		t.Fatalf("Loading skipped updates %v, want %v", got, bad)
	}
	requireSnapshotsEqual(t, len(updates), l.Done().Snapshot(), ref.Snapshot())
}
