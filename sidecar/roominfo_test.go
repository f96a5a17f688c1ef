package sidecar

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
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
		if p := got.publishOrigin("ada"); p.Room != ".notebook:f1.y" || p.FileID != "f1" || !p.Time.Equal(tt.want) || p.User != "ada" {
			t.Errorf("%s: publishOrigin = %+v", tt.name, p)
		}
	}
}

func TestMergeChangeKeepsNewestRow(t *testing.T) {
	a, _ := ystore.ParseRoom(".notebook:a.y")
	b, _ := ystore.ParseRoom(".notebook:b.y")
	t1, t2 := time.Unix(10, 0), time.Unix(20, 0)
	got := mergeChange(
		change{ynotebook.Changes{Added: []string{"x"}}, Origin{Room: a, At: t2}},
		change{ynotebook.Changes{Added: []string{"y"}}, Origin{Room: b, At: t1}})
	if !slices.Equal(got.ch.Added, []string{"x", "y"}) || !got.origin.At.Equal(t2) || got.origin.Room.Key != b.Key {
		t.Fatalf("merged = %+v", got)
	}
}

func TestRoomsOrigin(t *testing.T) {
	r := NewRooms(slog.New(slog.DiscardHandler), nil, NewMetrics(nil, nil), Notify{})
	if _, ok := r.Origin("nowhere.ipynb"); ok {
		t.Fatal("origin of a path no room has")
	}
	key := "work/.notebook:nb.ipynb.y"
	if err := r.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventUpdates, Room: key}}); err != nil {
		t.Fatal(err)
	}
	if o, ok := r.Origin("work/nb.ipynb"); !ok || o.Room.Key != key {
		t.Fatalf("origin = %+v, %v", o, ok)
	}
}
