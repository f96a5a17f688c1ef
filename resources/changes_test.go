package resources

import (
	"slices"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/internal/nbview"
)

// TestFixtureChanges checks the URIs of real @jupyter/ydoc edits.
func TestFixtureChanges(t *testing.T) {
	lib := newLibrary(t, testPath)
	tests := []struct {
		edit string
		want []string
	}{
		{"source-c1", []string{"notebook://w", "notebook://w/cells/c1"}},
		{"output-c1-0", []string{"notebook://w", "notebook://w/cells/c1", "notebook://w/cells/c1/outputs/0"}},
		{"add-c5", []string{"notebook://w", "notebook://w/cells/c5"}},
		{"remove-c2", []string{"notebook://w", "notebook://w/cells/c2"}},
	}
	for _, tt := range tests {
		got := nbview.ChangedURIs("w", lib.edit(t, testPath, tt.edit))
		for _, u := range tt.want {
			if !slices.Contains(got, u) {
				t.Errorf("%s: URIs %q lack %q", tt.edit, got, u)
			}
		}
	}
}
