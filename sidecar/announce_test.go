package sidecar

import (
	"slices"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/rooms"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

func TestPublishOrigin(t *testing.T) {
	info, _ := ystore.ParseRoom(".notebook:f1.y")
	at := time.Unix(1700000002, 250_000_000).UTC()
	if p := publishOrigin(rooms.Origin{Room: info, At: at}, "ada"); p.Room != ".notebook:f1.y" || p.FileID != "f1" || !p.Time.Equal(at) || p.User != "ada" || p.Source != "" {
		t.Errorf("publishOrigin = %+v", p)
	}
	if p := publishOrigin(rooms.Origin{Room: info, At: at, File: true}, ""); p.Source != "file" || p.User != "" {
		t.Errorf("publishOrigin of a file = %+v", p)
	}
}

func TestMergeChangeKeepsNewestRow(t *testing.T) {
	a, _ := ystore.ParseRoom(".notebook:a.y")
	b, _ := ystore.ParseRoom(".notebook:b.y")
	t1, t2 := time.Unix(10, 0), time.Unix(20, 0)
	got := mergeChange(
		change{ynotebook.Changes{Added: []string{"x"}}, rooms.Origin{Room: a, At: t2}},
		change{ynotebook.Changes{Added: []string{"y"}}, rooms.Origin{Room: b, At: t1}})
	if !slices.Equal(got.ch.Added, []string{"x", "y"}) || !got.origin.At.Equal(t2) || got.origin.Room.Key != b.Key {
		t.Fatalf("merged = %+v", got)
	}
}
