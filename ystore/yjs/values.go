package yjs

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

func (t *Type) mapGet(key string) (any, bool) {
	it := t.keys[key]
	if it == nil || it.deleted() {
		return nil, false
	}
	return it.last(), true
}

func (t *Type) mapKeys() []string {
	keys := make([]string, 0, len(t.keys))
	for k, it := range t.keys {
		if !it.deleted() {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func (t *Type) values() []any {
	out := make([]any, 0, t.length)
	for it := t.start; it != nil; it = it.right {
		if it.visible() {
			out = append(out, it.content()...)
		}
	}
	return out
}

func (t *Type) elements(yield func(ID, any) bool) {
	for it := t.start; it != nil; it = it.right {
		if !it.visible() {
			continue
		}
		if it.kind == kindType { // one element, read with no list made for it
			if !yield(it.id, it.typ().Value()) {
				return
			}
			continue
		}
		for i, v := range it.content() {
			if !yield(ID{it.id.Client, it.id.Clock + uint64(i)}, v) {
				return
			}
		}
	}
}

func (t *Type) valueAt(i int) (any, bool) {
	if i < 0 || i >= t.length {
		return nil, false
	}
	for it := t.start; it != nil; it = it.right {
		if !it.visible() {
			continue
		}
		if i < int(it.length) {
			return it.content()[i], true
		}
		i -= int(it.length)
	}
	return nil, false
}

func (t *Type) text() string {
	var b strings.Builder
	b.Grow(t.length) // UTF-16 units: the byte length of ASCII text
	for it := t.start; it != nil; it = it.right {
		if it.kind == kindString && !it.deleted() {
			b.Write(it.text)
		}
	}
	return b.String()
}

func (t *Type) mapJSON() map[string]any {
	out := make(map[string]any, len(t.keys))
	for k, it := range t.keys {
		if !it.deleted() {
			out[k] = ToJSON(it.last())
		}
	}
	return out
}

func (t *Type) listJSON() []any {
	vals := t.values()
	for i, v := range vals {
		vals[i] = ToJSON(v)
	}
	return vals
}

// xmlString renders XML children like YXmlFragment.toString.
func (t *Type) xmlString() string {
	var b strings.Builder
	for _, v := range t.values() {
		b.WriteString(xmlChildString(v))
	}
	return b.String()
}

func xmlChildString(v any) string {
	switch x := v.(type) {
	case *XmlElement:
		return x.String()
	case *XmlFragment:
		return x.String()
	case *XmlText:
		return x.String()
	case *Text:
		return x.String()
	case *Map, *XmlHook:
		return "[object Object]"
	}
	return jsString(v)
}

// String renders the element like Y.XmlElement.toString: attributes sorted by key.
func (x *XmlElement) String() string {
	t := (*Type)(x)
	var b strings.Builder
	name := strings.ToLower(x.name)
	b.WriteString("<" + name)
	attrs := t.mapJSON()
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		b.WriteString(" " + k + `="` + jsString(attrs[k]) + `"`)
	}
	b.WriteString(">" + t.xmlString() + "</" + name + ">")
	return b.String()
}

// deltaOp is one insert of Y.Text.toDelta: a string or an embedded value, with the
// formatting attributes in effect.
type deltaOp struct {
	insert any
	attrs  map[string]any
}

// delta computes Y.Text.toDelta for the current state: strings between formatting
// changes and embeds are packed into one op each.
func (t *Type) delta() []deltaOp {
	var ops []deltaOp
	attrs := map[string]any{}
	var str []byte
	snapshot := func() map[string]any {
		if len(attrs) == 0 {
			return nil
		}
		return maps.Clone(attrs)
	}
	pack := func() {
		if len(str) > 0 {
			ops = append(ops, deltaOp{string(str), snapshot()})
			str = nil
		}
	}
	for it := t.start; it != nil; it = it.right {
		if it.deleted() {
			continue
		}
		switch it.kind {
		case kindString:
			str = append(str, it.text...)
		case kindType, kindEmbed:
			pack()
			ops = append(ops, deltaOp{it.last(), snapshot()})
		case kindFormat:
			pack()
			if f := it.val.(*format); f.val == nil {
				delete(attrs, f.key)
			} else {
				attrs[f.key] = f.val
			}
		}
	}
	pack()
	return ops
}

// xmlTextString renders t like Y.XmlText.toString.
func (t *Type) xmlTextString() string {
	var b strings.Builder
	for _, op := range t.delta() {
		names := slices.Sorted(maps.Keys(op.attrs))
		for _, name := range names {
			b.WriteString("<" + name)
			if obj, ok := op.attrs[name].(map[string]any); ok {
				for _, k := range slices.Sorted(maps.Keys(obj)) {
					b.WriteString(" " + k + `="` + jsString(obj[k]) + `"`)
				}
			}
			b.WriteString(">")
		}
		b.WriteString(xmlChildString(op.insert))
		for _, name := range slices.Backward(names) {
			b.WriteString("</" + name + ">")
		}
	}
	return b.String()
}

// String renders the fragment like Y.XmlFragment.toString.
func (x *XmlFragment) String() string { return (*Type)(x).xmlString() }

// jsString converts a plain value to a string like JavaScript's String(v).
func jsString(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case UndefinedType:
		return "undefined"
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return jsNumber(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			if e != nil && e != any(Undefined) {
				parts[i] = jsString(e)
			}
		}
		return strings.Join(parts, ",")
	case []byte:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = strconv.Itoa(int(e))
		}
		return strings.Join(parts, ",")
	}
	return "[object Object]"
}

// jsNumber formats f like JavaScript's Number.prototype.toString.
func jsNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	if a := math.Abs(f); a >= 1e21 || a < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(s, "e")
		if exp[0] == '+' {
			exp = exp[1:]
			return mant + "e+" + strings.TrimLeft(exp, "0")
		}
		return mant + "e-" + strings.TrimLeft(exp[1:], "0")
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// ToJSON converts a value like Yjs's toJSON: shared types become plain values (maps
// become map[string]any, arrays []any, texts and XML types strings, a document the JSON
// of its roots of known kind); plain values are returned unchanged.
func ToJSON(v any) any {
	switch x := v.(type) {
	case *Map:
		return (*Type)(x).mapJSON()
	case *XmlHook:
		return (*Type)(x).mapJSON()
	case *Array:
		return (*Type)(x).listJSON()
	case *Text:
		return x.String()
	case *XmlText:
		return x.String()
	case *XmlElement:
		return x.String()
	case *XmlFragment:
		return x.String()
	case *Type:
		return Undefined
	case *Doc:
		out := make(map[string]any, len(x.roots))
		for name, t := range x.roots {
			if t.kind != KindUnknown {
				out[name] = ToJSON(t.Value())
			}
		}
		return out
	}
	return v
}
