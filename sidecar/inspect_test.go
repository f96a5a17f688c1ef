package sidecar

import (
	"context"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/fileid"
)

// mapResolver answers file ids from a map.
type mapResolver map[string]string

func (m mapResolver) Path(_ context.Context, id string) (string, error) {
	if p, ok := m[id]; ok {
		return p, nil
	}
	return "", fileid.ErrNotFound
}

// inspect NOTEBOOK picks the one room to decode from its key or the file id database.
func TestRoomOf(t *testing.T) {
	events := []ystore.Event{
		{Room: "json:notebook:0b5e2f5c-6a57-4d55-9d4c-1f6f0c3b8a11"},
		{Room: "work/.notebook:other.ipynb.y"},
		{Room: "text:file:aaaa"},
	}
	res := mapResolver{"0b5e2f5c-6a57-4d55-9d4c-1f6f0c3b8a11": "work/analysis.ipynb"}
	for _, tt := range []struct{ target, want string }{
		{"work/analysis.ipynb", events[0].Room},
		{"0b5e2f5c-6a57-4d55-9d4c-1f6f0c3b8a11", events[0].Room},
		{"work/other.ipynb", events[1].Room},
		{"aaaa", ""},
		{"nowhere.ipynb", ""},
	} {
		got := roomOf(context.Background(), events, tt.target, res)
		switch {
		case tt.want == "" && got != nil:
			t.Errorf("%s: picked %v, want none", tt.target, got)
		case tt.want != "" && (len(got) != 1 || got[0].Room != tt.want):
			t.Errorf("%s: picked %v, want %s", tt.target, got, tt.want)
		}
	}
}
