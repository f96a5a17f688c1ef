package jsonenc

import (
	"bytes"
	"encoding/json"
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
	if n, _ := Measure(v); n.JSON != int64(len(want)) {
		t.Fatalf("%#v: size %d, encodes to %d", v, n.JSON, len(want))
	} else if err == nil {
		again, _ := json.Marshal(string(want))
		if n.AsString != int64(len(again)) {
			t.Fatalf("%#v: size as a string %d, encodes to %d", v, n.AsString, len(again))
		}
		var w bytes.Buffer
		WriteString(&w, string(want))
		if !bytes.Equal(w.Bytes(), again) {
			t.Fatalf("%#v: written as a string\n got %q\nwant %q", v, w.Bytes(), again)
		}
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
