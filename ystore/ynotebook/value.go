package ynotebook

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// pyValue converts a value read from the document into the JSON value jupyter_ydoc's
// YNotebook.get() yields for it and the server's save writes: pycrdt's to_py (shared types
// become their content, undefined None), then cast_all(…, float, int), which turns every
// float holding a whole number into a Python int (negative zero into 0). Numbers are
// json.Number holding the text Python's json.dumps writes (pyNumber). Byte arrays, which
// json.dumps refuses, become objects keyed by index (as JSON.stringify writes a typed
// array), and NaN and infinities, on which cast_all raises, null: docs/COMPATIBILITY.md.
func pyValue(v any) any {
	switch x := yjs.ToJSON(v).(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = pyValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = pyValue(e)
		}
		return out
	case []byte:
		out := make(map[string]any, len(x))
		for i, b := range x {
			out[strconv.Itoa(i)] = json.Number(strconv.Itoa(int(b)))
		}
		return out
	case float64:
		n, ok := pyFloat(x)
		if !ok {
			return nil
		}
		return n
	case int64:
		return json.Number(strconv.FormatInt(x, 10))
	case yjs.UndefinedType:
		return nil
	default:
		return x
	}
}

// pyFloat is the JSON text get() yields for a float: the exact integer when it is whole
// (int(x)), Python's repr otherwise; ok is false for NaN and infinities.
func pyFloat(x float64) (json.Number, bool) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "", false
	}
	if x == math.Trunc(x) {
		i, _ := big.NewFloat(x).Int(nil)
		return json.Number(i.String()), true
	}
	return json.Number(pyRepr(x)), true
}

// pyRepr is Python's repr of a finite float that is not whole: the shortest digits that
// read back as x, in scientific notation below 1e-4 (exponent of at least two digits)
// and fixed notation otherwise (a float that is not whole is below 2^52).
func pyRepr(x float64) string {
	e := strconv.FormatFloat(x, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	n, _ := strconv.Atoi(exp)
	if n >= -4 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	sign := "-"
	n = -n
	digits := strconv.Itoa(n)
	if n < 10 {
		digits = "0" + digits
	}
	return mant + "e" + sign + digits
}

// get reads a map key the way Y.Map.get does: a key holding undefined is absent.
func get(m *yjs.Map, key string) (any, bool) {
	v, ok := m.Get(key)
	if _, undef := v.(yjs.UndefinedType); undef {
		return nil, false
	}
	return v, ok
}

// truthy reports whether JavaScript treats v as true.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil, yjs.UndefinedType:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && !math.IsNaN(x)
	case int64:
		return x != 0
	case string:
		return x != ""
	default:
		return true
	}
}
