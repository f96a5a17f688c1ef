package ynotebook

import (
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// FuzzApply applies arbitrary bytes on top of a small notebook: Apply never panics, errors
// leave the notebook unchanged, the cell tree stays well formed and the cached snapshot
// always equals a full one.
func FuzzApply(f *testing.F) {
	cases := loadCases(f)
	var base [][]byte
	for _, tc := range cases {
		if tc.Name == "create" {
			base = tc.Updates
		}
		for _, u := range tc.Updates {
			f.Add(u)
		}
	}
	for _, depth := range []int{3, yjs.MaxDepth + 1} {
		f.Add(deepMetadata(depth))
	}
	f.Fuzz(func(t *testing.T, update []byte) {
		nb := applyAll(t, base)
		before, err := nb.Snapshot().JSON()
		if err != nil {
			t.Fatal(err)
		}
		prev := nb.Snapshot()
		ch, err := nb.Apply(update)
		if err != nil {
			after, _ := nb.Snapshot().JSON()
			if string(after) != string(before) || !ch.Empty() {
				t.Fatalf("failed Apply changed the notebook or reported %+v", ch)
			}
			return
		}
		checkTree(t, nb)
		requireSnapshotsEqual(t, 0, nb.Snapshot(), fullSnapshot(nb))
		requireChanges(t, 0, ch, prev, nb.Snapshot())
	})
}
