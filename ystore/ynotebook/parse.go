package ynotebook

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// Errors of Parse; each is wrapped with what was refused.
var (
	// ErrTooLarge: the file is longer than Limits.MaxBytes.
	ErrTooLarge = errors.New("notebook too large")
	// ErrTooManyCells: the notebook has more than Limits.MaxCells cells.
	ErrTooManyCells = errors.New("notebook has too many cells")
	// ErrTooDeep: JSON nested deeper than Limits.MaxDepth.
	ErrTooDeep = errors.New("notebook nested too deep")
	// ErrInvalid: a file the server does not load into a room (nbformat.reads refuses
	// it), or one of the few the sidecar does not read as the server would
	// (docs/COMPATIBILITY.md): nbformat before 4, NaN or infinite numbers.
	ErrInvalid = errors.New("not an nbformat 4 notebook")
)

// Limits bound what Parse reads; a zero field takes its default.
type Limits struct {
	MaxBytes int // longest input, DefaultMaxBytes
	MaxCells int // most cells, DefaultMaxCells
	MaxDepth int // deepest JSON nesting, DefaultMaxDepth
}

// Defaults of Limits.
const (
	DefaultMaxBytes = 64 << 20
	DefaultMaxCells = 100_000
	DefaultMaxDepth = 128
)

// The nbformat version jupyter_ydoc's YNotebook.set assumes when a notebook lacks one.
const (
	defaultNBFormat      = 4
	defaultNBFormatMinor = 5
)

// withDefaults is l with each field that is not positive set to its default.
func (l Limits) withDefaults() Limits {
	l.MaxBytes = cmp.Or(max(l.MaxBytes, 0), DefaultMaxBytes)
	l.MaxCells = cmp.Or(max(l.MaxCells, 0), DefaultMaxCells)
	l.MaxDepth = cmp.Or(max(l.MaxDepth, 0), DefaultMaxDepth)
	return l
}

// Parse converts an nbformat 4 .ipynb file into the snapshot a room holds once the
// Jupyter server has loaded that file into it: YNotebook.get() after YNotebook.set() of
// nbformat.reads(file) on a fresh document. So multi-line strings are joined where
// nbformat's rejoin_lines joins them, cell metadata trusted and the transient notebook
// metadata are stripped, nbformat 4.5 cells without an id or with a repeated one get a
// new id (nbformat makes a random one, Parse a stand-in: docs/COMPATIBILITY.md), notebook
// metadata gains language_info and kernelspec, a notebook without cells gets one empty
// code cell, and where pycrdt panics on an integer beyond int64 the notebook stops where
// the server's set() stopped, in the middle of a cell; duplicate ids nbformat left
// (before 4.5) are settled as get() settles them. Parse never panics; its errors
// wrap ErrTooLarge, ErrTooManyCells, ErrTooDeep or ErrInvalid.
func Parse(data []byte, lim Limits) (*Snapshot, error) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), lim.MaxBytes)
	}
	d, cells := shape(data)
	if d > lim.MaxDepth {
		return nil, fmt.Errorf("%w: depth over %d", ErrTooDeep, lim.MaxDepth)
	}
	if cells > lim.MaxCells {
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooManyCells, cells, lim.MaxCells)
	}
	v, err := decodeOrdered(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	nb, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalid)
	}
	if err := readNotebook(nb); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return setNotebook(nb), nil
}

// readNotebook is nbformat.reads(…, as_version=4) of nb, in place: the errors are its
// refusals.
func readNotebook(nb *object) error {
	major, ok := nb.get("nbformat")
	if !ok {
		major = jsonNum{text: "1"}
	}
	if n, isNum := major.(jsonNum); !isNum || n.float64() != 4 {
		return fmt.Errorf("nbformat %v: only nbformat 4 is read", major)
	}
	cellsV, _ := nb.get("cells")
	cells, ok := cellsV.([]any)
	if !ok {
		return errors.New("cells is not a list")
	}
	for i, cv := range cells {
		c, ok := cv.(*object)
		if !ok {
			return fmt.Errorf("cell %d is not an object", i)
		}
		if err := rejoinCell(c); err != nil {
			return fmt.Errorf("cell %d: %w", i, err)
		}
	}
	md, ok := nb.get("metadata")
	mdObj, isObj := md.(*object)
	if !ok || !isObj {
		return errors.New("metadata missing or not an object")
	}
	for _, k := range []string{"orig_nbformat", "orig_nbformat_minor", "signature"} {
		mdObj.del(k) // strip_transient
	}
	for i, cv := range cells {
		cmd, _ := cv.(*object).get("metadata")
		o, ok := cmd.(*object)
		if !ok {
			return fmt.Errorf("cell %d: metadata missing or not an object", i)
		}
		o.del("trusted")
	}
	minor := jsonNum{text: "0"}
	if m, ok := nb.get("nbformat_minor"); ok {
		if n, isNum := m.(jsonNum); isNum {
			minor = n
		}
	}
	if minor.float64() >= 5 {
		return normalizeIDs(cells)
	}
	return nil
}

// rejoinCell is nbformat's rejoin_lines of one cell.
func rejoinCell(c *object) error {
	if src, ok := c.get("source"); ok {
		if list, isList := src.([]any); isList {
			s, ok := joinStrings(list)
			if !ok {
				return errors.New("source holds a value that is not a string")
			}
			c.set("source", s)
		}
	}
	if att, ok := c.get("attachments"); ok {
		a, isObj := att.(*object)
		if !isObj {
			return errors.New("attachments is not an object")
		}
		for _, k := range a.keys {
			b, isObj := a.m[k].(*object)
			if !isObj {
				return errors.New("an attachment is not an object")
			}
			rejoinBundle(b)
		}
	}
	if ct, _ := c.get("cell_type"); ct != CellCode {
		return nil
	}
	outs, ok := c.get("outputs")
	if !ok {
		return nil
	}
	list, isList := outs.([]any)
	if !isList {
		return errors.New("outputs is not a list")
	}
	for _, ov := range list {
		o, isObj := ov.(*object)
		if !isObj {
			return errors.New("an output is not an object")
		}
		ot, _ := o.get("output_type")
		switch ot {
		case "execute_result", "display_data":
			data, ok := o.get("data")
			if !ok {
				continue
			}
			d, isObj := data.(*object)
			if !isObj {
				return errors.New("an output's data is not an object")
			}
			rejoinBundle(d)
		case nil, "", false:
		default:
			if t, ok := o.get("text"); ok {
				if tl, isList := t.([]any); isList {
					s, ok := joinStrings(tl)
					if !ok {
						return errors.New("an output's text holds a value that is not a string")
					}
					o.set("text", s)
				}
			}
		}
	}
	return nil
}

// rejoinBundle is nbformat's _rejoin_mimebundle: a list of strings under a type that is
// not JSON is joined.
func rejoinBundle(d *object) {
	for _, k := range d.keys {
		if list, ok := d.m[k].([]any); ok && !isJSONMIME(k) {
			if s, ok := joinStrings(list); ok {
				d.m[k] = s
			}
		}
	}
}

func joinStrings(list []any) (string, bool) {
	var b strings.Builder
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return "", false
		}
		b.WriteString(s)
	}
	return b.String(), true
}

// normalizeIDs is nbformat's _normalize for 4.5: a cell without an id, and a cell whose
// id an earlier cell holds, get a new one (a stand-in here, madeID). An id Python cannot
// hash (a list, an object) makes it raise.
func normalizeIDs(cells []any) error {
	for i, cv := range cells {
		c := cv.(*object)
		if _, ok := c.get("id"); !ok {
			c.set("id", madeID(i))
		}
	}
	seen := map[any]bool{}
	for i, cv := range cells {
		c := cv.(*object)
		id, _ := c.get("id")
		key := id
		switch x := id.(type) {
		case *object, []any:
			return fmt.Errorf("cell %d: an id that is not hashable", i)
		case jsonNum:
			key = x.float64()
		case bool: // True == 1 in Python
			key = 0.0
			if x {
				key = 1.0
			}
		}
		if seen[key] {
			c.set("id", madeID(i))
		} else {
			seen[key] = true
		}
	}
	return nil
}

// madeID is the id served for the cell at index i of a file, which the server makes up
// at random (nbformat for a cell without an id or with a repeated one, jupyter_ydoc for
// a cell without one): a deterministic stand-in, as standInID.
func madeID(i int) string { return standInID("\x00file cell", i) }

// errPanic is pycrdt panicking on an integer beyond int64: YNotebook.set stops there.
var errPanic = errors.New("integer beyond int64")

// setNotebook is get() of a fresh document after YNotebook.set(nb).
func setNotebook(nb *object) *Snapshot {
	s := &Snapshot{}
	// cast_all(nb, int, float) of everything but the cells: OverflowError on an
	// integer beyond a float's range, before anything is written
	for _, k := range nb.keys {
		if k != "cells" && tooLargeForFloat(nb.m[k]) {
			s.cells = buildTree(nil, 0)
			return s
		}
	}
	var nbformat, minor any = json.Number(strconv.Itoa(defaultNBFormat)), json.Number(strconv.Itoa(defaultNBFormatMinor))
	var err error
	if v, ok := nb.get("nbformat"); ok {
		if nbformat, err = storedValue(v, true); err != nil {
			s.cells = buildTree(nil, 0)
			return s
		}
	}
	if v, ok := nb.get("nbformat_minor"); ok {
		if minor, err = storedValue(v, true); err != nil {
			s.setLevel(nbformat, nil, nil)
			s.cells = buildTree(nil, 0)
			return s
		}
	}
	mdV, _ := nb.get("metadata")
	md := mdV.(*object).clone()
	if _, ok := md.get("language_info"); !ok {
		md.set("language_info", newObject("name", ""))
	}
	if _, ok := md.get("kernelspec"); !ok {
		md.set("kernelspec", newObject("name", "", "display_name", ""))
	}
	mdOut, err := storeMap(md, true)
	s.setLevel(nbformat, minor, mdOut)
	if err != nil {
		s.cells = buildTree(nil, 0)
		return s
	}
	cellsV, _ := nb.get("cells")
	cells, _ := cellsV.([]any)
	if len(cells) == 0 {
		cells = []any{newObject("cell_type", CellCode, "execution_count", nil,
			"metadata", newObject("trusted", true), "outputs", []any{}, "source", "", "id", madeID(0))}
	}
	read := make([]readCell, 0, len(cells))
	for i, cv := range cells {
		obj, complete := createCell(cv.(*object), i)
		if obj != nil {
			dropFalsyAttachments(obj)
			c := &Cell{}
			c.setObject(obj)
			read = append(read, readCell{cell: c})
		}
		if !complete {
			break
		}
	}
	visible, _ := dedup(read, dedupOn(s))
	s.cells = buildTree(visible, 0)
	return s
}

// createCell is the cell map jupyter_ydoc's create_ycell makes of c and pycrdt inserts,
// read back by get() (execution_state left out): nil when create_ycell raises (no
// cell_type or no source), and complete false when the set stops there, obj then holding
// what pycrdt wrote before it panicked.
func createCell(c *object, i int) (obj map[string]any, complete bool) {
	c = c.clone()
	if _, ok := c.get("id"); !ok {
		c.set("id", madeID(i))
	}
	ct, ok := c.get("cell_type")
	if !ok {
		return nil, false
	}
	src, ok := c.get("source")
	if !ok {
		return nil, false
	}
	if list, isList := src.([]any); isList {
		s, ok := joinStrings(list)
		if !ok {
			return nil, false // "".join raises
		}
		src = s
	}
	c.set("source", textValue{src})
	md, _ := c.get("metadata")
	if md == nil {
		md = newObject()
	}
	c.set("metadata", sharedMap{md})
	switch ct {
	case CellRaw, CellMarkdown:
		if att, ok := c.get("attachments"); ok && !pyTruthyPy(att) {
			c.del("attachments")
		}
	case CellCode:
		outs, ok := c.get("outputs")
		if !ok {
			outs = []any{}
		}
		c.set("outputs", sharedOutputs{outs})
		c.set("execution_state", "idle")
	}
	obj = make(map[string]any, len(c.keys))
	for _, k := range c.keys {
		v, err := storedValue(c.m[k], false)
		if k != "execution_state" && (err == nil || v != nil) {
			obj[k] = v
		}
		if err != nil {
			return obj, false
		}
	}
	return obj, true
}

// textValue, sharedMap and sharedOutputs are the shared types create_ycell makes of a
// cell's source, metadata and outputs: pycrdt integrates them key by key, so that a
// panic keeps what came before it.
type (
	textValue     struct{ v any }
	sharedMap     struct{ v any }
	sharedOutputs struct{ v any }
)

// storedValue is what get() reads back of v once pycrdt has stored it: the value, and
// errPanic where pycrdt panicked on an integer beyond int64 (a shared type then holds
// what was integrated before, or nil when nothing was). castFirst is YNotebook.set's
// cast_all(…, int, float) of the notebook-level values: an integer a float holds
// exactly is stored as that float.
func storedValue(v any, castFirst bool) (any, error) {
	switch x := v.(type) {
	case textValue:
		s, _ := x.v.(string)
		return s, nil
	case sharedMap:
		o, ok := x.v.(*object)
		if !ok {
			// Map(value) of anything but a dict: pycrdt raises; the cell stops here
			return nil, errPanic
		}
		return storeMap(o, castFirst)
	case sharedOutputs:
		list, ok := x.v.([]any)
		if !ok {
			return nil, errPanic
		}
		out := make([]any, 0, len(list))
		for _, ov := range list {
			o, ok := ov.(*object)
			if !ok {
				return out, errPanic
			}
			o = o.clone()
			if ot, _ := o.get("output_type"); ot == "stream" {
				t, ok := o.get("text")
				if !ok {
					t = ""
				}
				if tl, isList := t.([]any); isList {
					s, _ := joinStrings(tl)
					t = s
				}
				o.set("text", textValue{t})
			}
			m, err := storeMap(o, castFirst)
			if m != nil {
				out = append(out, m)
			}
			if err != nil {
				return out, err
			}
		}
		return out, nil
	}
	if !storable(v, castFirst) {
		return nil, errPanic
	}
	return served(v, castFirst), nil
}

// storeMap stores the entries of o in order into a shared map, as pycrdt's Map does.
func storeMap(o *object, castFirst bool) (map[string]any, error) {
	out := make(map[string]any, len(o.keys))
	for _, k := range o.keys {
		v, err := storedValue(o.m[k], castFirst)
		if err != nil {
			if v != nil {
				out[k] = v
			}
			return out, err
		}
		out[k] = v
	}
	return out, nil
}

// storable reports whether pycrdt converts v without panicking: every integer in it
// within int64 (or, castFirst, held exactly by a float).
func storable(v any, castFirst bool) bool {
	switch x := v.(type) {
	case *object:
		for _, k := range x.keys {
			if !storable(x.m[k], castFirst) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !storable(e, castFirst) {
				return false
			}
		}
	case jsonNum:
		if x.isInt() {
			i := x.bigInt()
			return i.IsInt64() || castFirst && exactFloat(i)
		}
	}
	return true
}

// served is get()'s value of v, stored by pycrdt (every integer storable): Python ints
// below 2^53 are stored as floats, larger ones as int64, which yrs encodes as a float
// when the float converts back to it (saturating: 2^63-1 becomes 2^63); get() turns
// every whole float back into an int.
func served(v any, castFirst bool) any {
	switch x := v.(type) {
	case *object:
		out := make(map[string]any, len(x.keys))
		for _, k := range x.keys {
			out[k] = served(x.m[k], castFirst)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = served(e, castFirst)
		}
		return out
	case jsonNum:
		if !x.isInt() {
			n, _ := pyFloat(x.float64())
			return n
		}
		i := x.bigInt()
		if castFirst && exactFloat(i) || !i.IsInt64() {
			return json.Number(i.String())
		}
		if i.Int64() == math.MaxInt64 { // 2^63 saturates back to it: written as that float
			n, _ := pyFloat(float64(math.MaxInt64))
			return n
		}
		return json.Number(i.String())
	}
	return v
}

// exactFloat reports whether a float64 holds i exactly (Python's float(i) == i).
func exactFloat(i *big.Int) bool {
	f, acc := new(big.Float).SetInt(i).Float64()
	return acc == big.Exact && !math.IsInf(f, 0)
}

// tooLargeForFloat reports whether v holds an integer float() overflows on.
func tooLargeForFloat(v any) bool {
	switch x := v.(type) {
	case *object:
		for _, k := range x.keys {
			if tooLargeForFloat(x.m[k]) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if tooLargeForFloat(e) {
				return true
			}
		}
	case jsonNum:
		if x.isInt() {
			f, _ := new(big.Float).SetInt(x.bigInt()).Float64()
			return math.IsInf(f, 0)
		}
	}
	return false
}

// pyTruthyPy is Python's bool() of a decoded JSON value.
func pyTruthyPy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case jsonNum:
		return x.float64() != 0
	case []any:
		return len(x) > 0
	case *object:
		return len(x.keys) > 0
	}
	return true
}

// isJSONMIME is nbformat's _is_json_mime: application/json and application/*+json.
func isJSONMIME(mime string) bool {
	return mime == "application/json" || strings.HasPrefix(mime, "application/") && strings.HasSuffix(mime, "+json")
}

// Multiline joins one of nbformat's multi-line strings: a string, or a list of strings
// concatenated ("" for anything else).
func Multiline(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var b bytes.Buffer
		for _, e := range x {
			if s, ok := e.(string); ok {
				b.WriteString(s)
			}
		}
		return b.String()
	}
	return ""
}

// object is a JSON object as Python's json.loads makes it: its keys in the order they
// first appear, a repeated key's last value.
type object struct {
	keys []string
	m    map[string]any
}

// newObject returns an object of the given key, value pairs.
func newObject(kv ...any) *object {
	o := &object{m: map[string]any{}}
	for i := 0; i+1 < len(kv); i += 2 {
		o.set(kv[i].(string), kv[i+1])
	}
	return o
}

func (o *object) get(k string) (any, bool) { v, ok := o.m[k]; return v, ok }

func (o *object) set(k string, v any) {
	if _, ok := o.m[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.m[k] = v
}

func (o *object) del(k string) {
	if _, ok := o.m[k]; !ok {
		return
	}
	delete(o.m, k)
	for i, x := range o.keys {
		if x == k {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
}

// clone copies o, its values shared.
func (o *object) clone() *object {
	c := &object{keys: append([]string(nil), o.keys...), m: make(map[string]any, len(o.m))}
	for k, v := range o.m {
		c.m[k] = v
	}
	return c
}

// jsonNum is a JSON number as Python reads it: an int when written without a fraction
// or an exponent, a float otherwise.
type jsonNum struct{ text string }

func (n jsonNum) isInt() bool { return !strings.ContainsAny(n.text, ".eE") }

func (n jsonNum) bigInt() *big.Int {
	i, _ := new(big.Int).SetString(n.text, 10)
	return i
}

func (n jsonNum) float64() float64 {
	if n.isInt() {
		f, _ := new(big.Float).SetInt(n.bigInt()).Float64()
		return f
	}
	f, _ := strconv.ParseFloat(n.text, 64) // ±Inf beyond a float's range
	return f
}

// decodeOrdered decodes JSON text into objects, lists, strings, jsonNums, bools and nil.
// Floats beyond a float's range (infinite in Python, on which get() raises) are refused.
// The order of an object's keys matters only where pycrdt panics, on an integer beyond
// int64: a file without one is decoded the fast way, its keys sorted.
func decodeOrdered(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the notebook")
	}
	out, huge, err := fromDecoded(v)
	if err != nil || !huge {
		return out, err
	}
	d = json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return decodeValue(d)
}

// fromDecoded converts a value encoding/json decoded into decodeOrdered's, each object's
// keys sorted; huge reports an integer beyond int64 in it.
func fromDecoded(v any) (out any, huge bool, err error) {
	switch x := v.(type) {
	case map[string]any:
		o := &object{keys: make([]string, 0, len(x)), m: make(map[string]any, len(x))}
		for k := range x {
			o.keys = append(o.keys, k)
		}
		slices.Sort(o.keys)
		for _, k := range o.keys {
			e, h, err := fromDecoded(x[k])
			if err != nil {
				return nil, false, err
			}
			o.m[k], huge = e, huge || h
		}
		return o, huge, nil
	case []any:
		for i, e := range x {
			c, h, err := fromDecoded(e)
			if err != nil {
				return nil, false, err
			}
			x[i], huge = c, huge || h
		}
		return x, huge, nil
	case json.Number:
		n, err := number(x)
		return n, err == nil && n.isInt() && !n.bigInt().IsInt64(), err
	}
	return v, false, nil
}

// number is a JSON number read as Python reads it; a float beyond a float's range is
// refused.
func number(x json.Number) (jsonNum, error) {
	n := jsonNum{text: string(x)}
	if !n.isInt() && math.IsInf(n.float64(), 0) {
		return jsonNum{}, fmt.Errorf("number %s is beyond a float's range", x)
	}
	return n, nil
}

func decodeValue(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '{':
			o := &object{m: map[string]any{}}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(d)
				if err != nil {
					return nil, err
				}
				o.set(kt.(string), v)
			}
			_, err := d.Token()
			return o, err
		case '[':
			list := []any{}
			for d.More() {
				v, err := decodeValue(d)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := d.Token()
			return list, err
		}
		return nil, fmt.Errorf("unexpected %v", x)
	case json.Number:
		return number(x)
	}
	return t, nil
}

// shape is what Parse reads of JSON text before decoding it, in one pass: the deepest
// nesting of arrays and objects (strings skipped), and how many elements the value of
// the top-level object's key "cells" has when it is a list (its last such key, as
// decoding keeps; 0 when there is none), so that a file past the limits is refused
// before anything is built of it.
func shape(data []byte) (deepest, cells int) {
	d := 0
	inString, escaped := false, false
	strStart := 0                  // where the string being read, or the last one read, starts
	var lastStr []byte             // the last string read at depth 1, quoted: a key once ':' follows
	cellsKey := false              // the top-level key whose value is being read is "cells"
	counting, seen := false, false // in the cells list; an element of it begun
	for i, b := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
				if d == 1 {
					lastStr = data[strStart : i+1]
				}
			}
			continue
		case b == ' ' || b == '\t' || b == '\n' || b == '\r':
			continue
		}
		if counting && d == 2 && b != ']' && b != ',' {
			seen = true
		}
		switch b {
		case '"':
			inString, strStart = true, i
		case ':':
			if d == 1 {
				cellsKey = isCellsKey(lastStr)
				if cellsKey {
					cells = 0
				}
			}
		case '[', '{':
			if d == 1 && b == '[' && cellsKey {
				counting, seen = true, false
			}
			d++
			deepest = max(deepest, d)
		case ']', '}':
			if counting && d == 2 {
				if seen {
					cells++
				}
				counting = false
			}
			d--
		case ',':
			if counting && d == 2 {
				cells++
			}
		}
	}
	return deepest, cells
}

// isCellsKey reports whether the quoted JSON string key is "cells".
func isCellsKey(key []byte) bool {
	if !bytes.ContainsRune(key, '\\') {
		return string(key) == `"cells"`
	}
	var k string
	return json.Unmarshal(key, &k) == nil && k == "cells"
}
