package rooms

import (
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

func TestOriginOf(t *testing.T) {
	info, _ := ystore.ParseRoom(".notebook:f1.y")
	tests := []struct {
		name string
		rows []ystore.Row
		want time.Time
	}{
		{"no rows", nil, time.Time{}},
		{"newest wins", []ystore.Row{{Timestamp: 1700000002.25}, {Timestamp: 1700000001}, {ID: 0, Timestamp: 1700000000}},
			time.Unix(1700000002, 250_000_000).UTC()},
		{"unstamped", []ystore.Row{{}}, time.Time{}},
	}
	for _, tt := range tests {
		got := originOf(info, tt.rows)
		if !got.At.Equal(tt.want) || got.Room.FileID != "f1" {
			t.Errorf("%s: originOf = %+v, want at %v", tt.name, got, tt.want)
		}
	}
}
