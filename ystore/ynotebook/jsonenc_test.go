package ynotebook

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// marshalCases are values Marshal must encode as encoding/json does: every ASCII byte,
// HTML characters, the separators JSONP cannot hold, invalid and surrogate UTF-8, nil and
// empty containers, numbers as the notebook holds them.
func marshalCases() []any {
	var ascii strings.Builder
	for b := range 0x80 {
		ascii.WriteByte(byte(b))
	}
	return []any{
		"", "plain", ascii.String(), "<&>", "\u2028x\u2029", "\xff\xfe", "\xed\xa0\x80", "é漢😀", "a\x00b",
		"\xe2\x80", "\xe2\x80\xa8\xe2", strings.Repeat("\\\"", 10),
		nil, true, false, json.Number("12"), json.Number("-1.5e+300"), 3.25, int64(7),
		map[string]any(nil), map[string]any{}, []any(nil), []any{}, []map[string]any(nil), []map[string]any{{}},
		map[string]any{"b": 1.0, "a": []any{"x", nil, map[string]any{"<": "\x01"}}, "\xff": "k", "": ""},
		[]any{[]any{[]any{}}, map[string]any{"z": map[string]any{"y": "\u2029"}}},
		[]byte("binary"), map[string]string{"typed": "map"},
	}
}

// TestMarshalIsEncodingJSONs: Marshal writes what encoding/json.Marshal writes, byte for
// byte, JSONSize is its length, and the buffer is not grown past it.
func TestMarshalIsEncodingJSONs(t *testing.T) {
	for _, v := range marshalCases() {
		sameAsEncodingJSON(t, v)
	}
}

func sameAsEncodingJSON(t *testing.T, v any) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := Marshal(v)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%#v: error %v, encoding/json's %v", v, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%#v:\n got %q\nwant %q", v, got, want)
	}
	if n, _ := JSONSize(v); n != int64(len(want)) {
		t.Fatalf("%#v: size %d, encodes to %d", v, n, len(want))
	}
	if err == nil && cap(got) != len(got) {
		t.Fatalf("%#v: %d bytes in a buffer of %d", v, len(got), cap(got))
	}
}

// FuzzMarshal: on arbitrary strings, as values and as keys, at any nesting, Marshal is
// encoding/json.Marshal.
func FuzzMarshal(f *testing.F) {
	for _, v := range marshalCases() {
		if s, ok := v.(string); ok {
			f.Add(s, s, uint8(2))
		}
	}
	f.Fuzz(func(t *testing.T, key, value string, depth uint8) {
		var v any = value
		for i := range depth % 8 {
			if i%2 == 0 {
				v = map[string]any{key: v, value: i, "": nil}
			} else {
				v = []any{v, key, json.Number("1")}
			}
		}
		sameAsEncodingJSON(t, v)
	})
}

// TestMarshalHoldsItsSizeOnce: a notebook of 32 MB of source is encoded into one buffer of
// its size; encoding/json allocated about 3 times that (a buffer grown by doubling, then
// copied out), for each read and twice for each comparison with the file (red team of
// issue 39, pass 9). Comparing two such notebooks builds neither's JSON.
func TestMarshalHoldsItsSizeOnce(t *testing.T) {
	const size = 32 << 20
	a := NewSnapshot(Cell{ID: "c1", CellType: CellCode, Source: strings.Repeat("x", size)})
	b := NewSnapshot(Cell{ID: "c1", CellType: CellCode, Source: strings.Repeat("x", size)})
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	var body []byte
	if n := allocated(func() {
		var err error
		if body, err = a.JSON(); err != nil {
			t.Error(err)
		}
	}); n > size+size/8 {
		t.Errorf("the JSON of %d MB allocated %d MB", size>>20, n>>20)
	}
	if len(body) < size {
		t.Fatalf("JSON of %d bytes", len(body))
	}
	equal := true
	if n := allocated(func() { equal = Equivalent(a, b) }); n > 1<<20 {
		t.Errorf("comparing two notebooks of %d MB allocated %d MB", size>>20, n>>20)
	}
	if !equal {
		t.Error("two notebooks of the same cell are not equivalent")
	}
}
