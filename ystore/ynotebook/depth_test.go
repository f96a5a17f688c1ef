package ynotebook

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/yjstest"
)

// deepMetadata is an update setting the notebook metadata to maps nested depth deep.
func deepMetadata(depth int) []byte { return yjstest.Nested(99, rootMeta, "metadata", depth) }

// TestDeepMetadata: notebook metadata nesting maps beyond yjs.MaxDepth is refused by
// Apply and skipped by Load, with a *yjs.DepthError, and the notebook stays served; at the
// bound it is read like any metadata.
func TestDeepMetadata(t *testing.T) {
	var nbCase tableCase
	for _, tc := range loadCases(t) {
		if tc.Name == "notebook-metadata" {
			nbCase = tc
		}
	}
	deep := deepMetadata(200000)
	isDepthError := func(err error) bool {
		var de *yjs.DepthError
		return errors.As(err, &de) && errors.Is(err, yjs.ErrTooDeep)
	}

	t.Run("apply", func(t *testing.T) {
		nb := applyAll(t, nbCase.Updates)
		before := mustSnapshotJSON(t, nb)
		if ch, err := nb.Apply(deep); !isDepthError(err) || !ch.Empty() {
			t.Fatalf("Apply: changes %+v, error %v; want a *yjs.DepthError", ch, err)
		}
		if after := mustSnapshotJSON(t, nb); !bytes.Equal(before, after) {
			t.Fatal("a refused update changed the notebook")
		}
	})

	t.Run("load", func(t *testing.T) {
		// In the middle of a batch: the updates before it apply, it is skipped, the rest apply.
		updates := slices.Concat(nbCase.Updates[:2], [][]byte{deep}, nbCase.Updates[2:])
		nb := New()
		err := nb.Load(updates)
		var ue *UpdateError
		if !errors.As(err, &ue) || ue.Index != 2 || !isDepthError(err) || strings.Count(err.Error(), "\n") != 0 {
			t.Fatalf("Load: %v; want update 2 alone skipped with a *yjs.DepthError", err)
		}
		requireSnapshotsEqual(t, len(updates), nb.Snapshot(), applyAll(t, nbCase.Updates).Snapshot())
	})

	t.Run("at the bound", func(t *testing.T) {
		nb := New()
		if _, err := nb.Apply(deepMetadata(yjs.MaxDepth)); err != nil {
			t.Fatal(err)
		}
		md := nb.Snapshot().Metadata
		n := 0
		for ; md != nil; n++ {
			md, _ = md["metadata"].(map[string]any)
		}
		if n != yjs.MaxDepth {
			t.Fatalf("metadata is %d maps nested, want %d", n, yjs.MaxDepth)
		}
		mustSnapshotJSON(t, nb)
	})
}

func mustSnapshotJSON(t *testing.T, nb *Notebook) []byte {
	t.Helper()
	b, err := nb.Snapshot().JSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
