package ystore

import (
	"strings"
	"testing"
)

func TestParseRoom(t *testing.T) {
	const id = "0f3c3a4e-6c0f-4a8e-9f3e-2b7d3c1a9e11"
	tests := []struct {
		key  string
		want Room
		ok   bool
	}{
		{".notebook:" + id + ".y", Room{Kind: KindNotebook, Type: "notebook", FileID: id}, true},
		{".file:" + id + ".y", Room{Kind: KindFile, Type: "file", FileID: id}, true},
		{".unicode:" + id + ".y", Room{Kind: KindOther, Type: "unicode", FileID: id}, true},
		{"json:notebook:" + id, Room{Kind: KindNotebook, Type: "notebook", Format: "json", FileID: id}, true},
		{"text:file:" + id, Room{Kind: KindFile, Type: "file", Format: "text", FileID: id}, true},
		{"work/sub/.notebook:Untitled.ipynb.y", Room{Kind: KindNotebook, Type: "notebook", Path: "work/sub/Untitled.ipynb"}, true},
		{"./.notebook:a.ipynb.y", Room{Kind: KindNotebook, Type: "notebook", Path: "a.ipynb"}, true},
		{"/home/u/.notebook:a b.ipynb.y", Room{Kind: KindNotebook, Type: "notebook", Path: "/home/u/a b.ipynb"}, true},
		{"/.notebook:a.ipynb.y", Room{Kind: KindNotebook, Type: "notebook", Path: "/a.ipynb"}, true},
		{".notebook:a.ipynb.y", Room{Kind: KindNotebook, Type: "notebook", Path: "a.ipynb"}, true},
		{".notebook:a:b.ipynb.y", Room{Kind: KindNotebook, Type: "notebook", Path: "a:b.ipynb"}, true},
		{"dir/.file:notes.txt.y", Room{Kind: KindFile, Type: "file", Path: "dir/notes.txt"}, true},
		{"", Room{}, false},
		{"awareness", Room{}, false},
		{"a:b", Room{}, false},
		{".notebook:.y", Room{}, false},
		{".:" + id + ".y", Room{}, false},
		{".notebook" + id + ".y", Room{}, false},
		{".notebook:" + id, Room{}, false},
		{"json:notebook:work/a.ipynb", Room{Kind: KindNotebook, Type: "notebook", Format: "json", Path: "work/a.ipynb"}, true},
		{"dir/json:notebook:" + id, Room{}, false},
		{"json::" + id, Room{}, false},
		{"js.on:notebook:" + id, Room{}, false},
		{"json:notebook:", Room{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, ok := ParseRoom(tt.key)
			if ok != tt.ok {
				t.Fatalf("ParseRoom(%q) ok = %v, want %v", tt.key, ok, tt.ok)
			}
			if ok {
				tt.want.Key = tt.key
			}
			if got != tt.want {
				t.Fatalf("ParseRoom(%q) = %+v, want %+v", tt.key, got, tt.want)
			}
		})
	}
}

func FuzzParseRoom(f *testing.F) {
	for _, s := range []string{
		".notebook:0f3c3a4e-6c0f-4a8e-9f3e-2b7d3c1a9e11.y", "json:notebook:x", "a/.file:b.txt.y",
		"", ":", "::", ".:.y", "/.x:y.y", ".notebook:a/b.y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		r, ok := ParseRoom(key)
		if !ok {
			if r != (Room{}) {
				t.Fatalf("ParseRoom(%q) = %+v with ok false", key, r)
			}
			return
		}
		if r.Key != key {
			t.Fatalf("Key = %q, want %q", r.Key, key)
		}
		if (r.FileID == "") == (r.Path == "") {
			t.Fatalf("ParseRoom(%q) = %+v: want exactly one of FileID and Path", key, r)
		}
		if r.Type == "" || r.Kind != kindOf(r.Type) {
			t.Fatalf("ParseRoom(%q) = %+v: inconsistent type and kind", key, r)
		}
		if r.FileID != "" && strings.ContainsAny(r.FileID, "/.") {
			t.Fatalf("ParseRoom(%q) = %+v: file id looks like a path", key, r)
		}
	})
}
