package nbview

import (
	"slices"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

func TestOutputMIME(t *testing.T) {
	tests := []struct {
		name string
		out  map[string]any
		want string
	}{
		{"stream", map[string]any{"output_type": "stream", "text": "x"}, MIMEText},
		{"error", map[string]any{"output_type": "error", "ename": "E"}, MIMEError},
		{"figure", map[string]any{"output_type": "display_data", "data": map[string]any{"text/plain": "<Figure>", "image/png": "AAAA"}}, "image/png"},
		{"png beats svg", map[string]any{"output_type": "display_data", "data": map[string]any{"image/svg+xml": "<svg/>", "image/png": "AAAA"}}, "image/png"},
		{"html", map[string]any{"output_type": "execute_result", "data": map[string]any{"text/plain": "x", "text/html": "<b>x</b>"}}, "text/html"},
		{"json", map[string]any{"output_type": "execute_result", "data": map[string]any{"text/plain": "x", "application/json": map[string]any{}}}, "application/json"},
		{"unlisted rich type", map[string]any{"output_type": "display_data", "data": map[string]any{"text/plain": "x", "application/x-custom": "y", "application/a": "z"}}, "application/a"},
		{"plain only", map[string]any{"output_type": "execute_result", "data": map[string]any{"text/plain": "x"}}, MIMEText},
		{"no data", map[string]any{"output_type": "display_data"}, MIMEText},
	}
	for _, tt := range tests {
		if got := OutputMIME(tt.out); got != tt.want {
			t.Errorf("%s: OutputMIME = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestRenderOutput(t *testing.T) {
	tests := []struct {
		name string
		out  map[string]any
		want OutputBody
	}{
		{"stream list", map[string]any{"output_type": "stream", "text": []any{"a\n", "b"}}, OutputBody{MIME: MIMEText, Text: "a\nb"}},
		{"png with newlines", map[string]any{"output_type": "display_data", "data": map[string]any{"image/png": "iVBO\nRw0K\n"}}, OutputBody{MIME: "image/png", Blob: "iVBORw0K"}},
		{"html list", map[string]any{"output_type": "display_data", "data": map[string]any{"text/html": []any{"<b>", "x</b>"}}}, OutputBody{MIME: "text/html", Text: "<b>x</b>"}},
		{"json object", map[string]any{"output_type": "execute_result", "data": map[string]any{"application/json": map[string]any{"a": 1.0}}}, OutputBody{MIME: "application/json", Text: `{"a":1}`}},
		{"error", map[string]any{"output_type": "error", "ename": "E", "evalue": "v", "traceback": []any{"t"}}, OutputBody{MIME: MIMEError, Text: `{"ename":"E","evalue":"v","traceback":["t"]}`}},
	}
	for _, tt := range tests {
		got, err := RenderOutput(tt.out)
		if err != nil || got != tt.want {
			t.Errorf("%s: RenderOutput = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

func TestChangedURIs(t *testing.T) {
	ch := ynotebook.Changes{
		Added: []string{"n1"}, Removed: []string{"gone"}, Moved: []string{"m1"},
		Cells: map[string]ynotebook.CellChange{
			"c1": {Outputs: true, OutputIndexes: []int{0, 2}},
			"c2": {Source: true},
		},
	}
	want := []string{
		"notebook://w",
		"notebook://w/cells/c1", "notebook://w/cells/c1/outputs/0", "notebook://w/cells/c1/outputs/2",
		"notebook://w/cells/c2", "notebook://w/cells/gone", "notebook://w/cells/m1", "notebook://w/cells/n1",
	}
	if got := ChangedURIs("w", ch); !slices.Equal(got, want) {
		t.Fatalf("ChangedURIs =\n%q\nwant\n%q", got, want)
	}
	if got := ChangedURIs("w", ynotebook.Changes{Metadata: true}); !slices.Equal(got, []string{"notebook://w"}) {
		t.Fatalf("metadata change: %q", got)
	}
}
