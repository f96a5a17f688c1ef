package ynotebook

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// FirstDifference says where a and b first differ in the JSON Equivalent compares (the
// fields a room adds to a file left out): a JSON Pointer (RFC 6901) into the notebook,
// and each side's JSON there (nil where that side has nothing). ok is false when they
// are equivalent. Members are visited in key order, arrays by index.
func FirstDifference(a, b *Snapshot) (path string, va, vb []byte, ok bool) {
	ja, errA := withoutTransient(orEmpty(a)).JSON()
	jb, errB := withoutTransient(orEmpty(b)).JSON()
	if errA != nil || errB != nil {
		return "", nil, nil, true // as Equivalent: not equivalent
	}
	if bytes.Equal(ja, jb) {
		return "", nil, nil, false
	}
	var x, y any
	if decode(ja, &x) != nil || decode(jb, &y) != nil {
		return "", ja, jb, true
	}
	p, dx, dy, found := walkDiff(x, y, "")
	if !found { // the same values written differently: the documents as a whole
		return "", ja, jb, true
	}
	return p, marshal(dx), marshal(dy), true
}

// missing stands for a member or element one side lacks.
type missing struct{}

func decode(b []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

func marshal(v any) []byte {
	if _, ok := v.(missing); ok {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

// walkDiff walks x and y, decoded JSON at path p, to their first difference.
func walkDiff(x, y any, p string) (string, any, any, bool) {
	switch xv := x.(type) {
	case map[string]any:
		yv, ok := y.(map[string]any)
		if !ok {
			return p, x, y, true
		}
		keys := make([]string, 0, len(xv)+len(yv))
		for k := range xv {
			keys = append(keys, k)
		}
		for k := range yv {
			if _, ok := xv[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			var a, b any = missing{}, missing{}
			if v, ok := xv[k]; ok {
				a = v
			}
			if v, ok := yv[k]; ok {
				b = v
			}
			if q, da, db, found := walkDiff(a, b, p+"/"+escapePointer(k)); found {
				return q, da, db, true
			}
		}
		return "", nil, nil, false
	case []any:
		yv, ok := y.([]any)
		if !ok {
			return p, x, y, true
		}
		for i := range max(len(xv), len(yv)) {
			var a, b any = missing{}, missing{}
			if i < len(xv) {
				a = xv[i]
			}
			if i < len(yv) {
				b = yv[i]
			}
			if q, da, db, found := walkDiff(a, b, p+"/"+strconv.Itoa(i)); found {
				return q, da, db, true
			}
		}
		return "", nil, nil, false
	default:
		switch y.(type) {
		case map[string]any, []any:
			return p, x, y, true
		}
		if x != y {
			return p, x, y, true
		}
		return "", nil, nil, false
	}
}

// escapePointer escapes a member name as a JSON Pointer reference token.
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
