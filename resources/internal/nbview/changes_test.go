package nbview

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// TestFixtureChanges checks the URIs of real @jupyter/ydoc edits
// (resources/testdata/notebooks.json, made by testdata/mcpclient/gen-notebooks.mjs).
func TestFixtureChanges(t *testing.T) {
	data, err := os.ReadFile("../../testdata/notebooks.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Initial string `json:"initial"`
		Edits   []struct {
			Name   string `json:"name"`
			Update string `json:"update"`
		} `json:"edits"`
	}
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	apply := func(nb *ynotebook.Notebook, b64 string) ynotebook.Changes {
		t.Helper()
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := nb.Apply(b)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	nb := ynotebook.New()
	apply(nb, fx.Initial)
	edit := func(name string) ynotebook.Changes {
		t.Helper()
		for _, e := range fx.Edits {
			if e.Name == name {
				return apply(nb, e.Update)
			}
		}
		t.Fatalf("no edit %q", name)
		return ynotebook.Changes{}
	}
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
		got := ChangedURIs("w", edit(tt.edit))
		for _, u := range tt.want {
			if !slices.Contains(got, u) {
				t.Errorf("%s: URIs %q lack %q", tt.edit, got, u)
			}
		}
	}
}
