package ynotebook

import (
	"math"
	"strconv"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
)

// plain converts a value read from the document into the JSON value JSON.stringify
// produces from it: shared types become their JSON, undefined object members disappear,
// undefined array elements become null, byte arrays become objects keyed by index (as
// typed arrays serialize) and non-finite numbers null.
func plain(v any) any { return convert(v, false) }

// copied is plain for values YNotebook passes through @lumino's JSONExt.deepCopy first
// (metadata, outputs), which turns undefined array elements into empty objects.
func copied(v any) any { return convert(v, true) }

func convert(v any, deepCopied bool) any {
	switch x := yjs.ToJSON(v).(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if _, undef := e.(yjs.UndefinedType); !undef {
				out[k] = convert(e, deepCopied)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			_, undef := e.(yjs.UndefinedType)
			switch {
			case !undef:
				out[i] = convert(e, deepCopied)
			case deepCopied:
				out[i] = map[string]any{}
			}
		}
		return out
	case []byte:
		out := make(map[string]any, len(x))
		for i, b := range x {
			out[strconv.Itoa(i)] = float64(b)
		}
		return out
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return x
	case yjs.UndefinedType:
		return nil
	default:
		return x
	}
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

// number converts v to a JavaScript number the way a relational comparison does; ok is
// false when the comparison would be false whatever the other side (undefined, objects).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case nil:
		return 0, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case float64:
		return x, !math.IsNaN(x)
	case int64:
		return float64(x), true
	case string:
		if x == "" {
			return 0, true
		}
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	default:
		return 0, false
	}
}
