package extensions

import "github.com/mark3labs/mcp-go/mcp"

// Hints are the four behaviour hints a tool announces (mcp.NewTool's defaults: destructive, open world).
type Hints struct {
	ReadOnly    bool // the tool changes nothing
	Destructive bool // it may remove or overwrite what is there (ignored by clients when ReadOnly)
	Idempotent  bool // calling it again with the same arguments changes nothing more
	OpenWorld   bool // it reaches beyond the sidecar's notebooks and bindings
}

// Option returns the tool option that states all four hints, keeping the annotations' title.
func (h Hints) Option() mcp.ToolOption {
	return func(t *mcp.Tool) {
		t.Annotations.ReadOnlyHint = mcp.ToBoolPtr(h.ReadOnly)
		t.Annotations.DestructiveHint = mcp.ToBoolPtr(h.Destructive)
		t.Annotations.IdempotentHint = mcp.ToBoolPtr(h.Idempotent)
		t.Annotations.OpenWorldHint = mcp.ToBoolPtr(h.OpenWorld)
	}
}

// ReadOnlyTool states the hints of a tool that only reads the notebooks: read-only, idempotent, closed world.
func ReadOnlyTool() mcp.ToolOption { return Hints{ReadOnly: true, Idempotent: true}.Option() }
