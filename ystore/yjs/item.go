package yjs

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Struct and content kinds as encoded in the low five info bits.
const (
	kindGC      = 0
	kindDeleted = 1
	kindJSON    = 2
	kindBinary  = 3
	kindString  = 4
	kindEmbed   = 5
	kindFormat  = 6
	kindType    = 7
	kindAny     = 8
	kindDoc     = 9
	kindSkip    = 10
)

// Info bits of an encoded item.
const (
	infoOrigin      = 0x80
	infoRightOrigin = 0x40
	infoParentSub   = 0x20
)

// item flags.
const (
	flagDeleted = 1 << iota
	flagCountable
	flagHasOrigin
	flagHasRightOrigin
	flagHasParentSub
	flagHasPref // a decoded item with an explicit parent (ext.pref), not integrated yet
	// flagOwnType and flagOwnVals mark an item allocated with its Type (typeItem) or its
	// values' holder (anyItem), which it holds as long as it lives (memory.go).
	flagOwnType
	flagOwnVals
	flagsOwn = flagOwnType | flagOwnVals
)

// maxLength bounds the length of a struct: lengths are 32 bits wide here (Yjs allows
// 2^53; four billion clock ticks in one struct are not a notebook). Decoding refuses
// longer structs and structs whose lengths add up to more do not merge.
const maxLength = 1<<32 - 1

// parentRef is the explicit parent of a decoded item that has neither origin: a root
// name or the ID of the item holding the parent type.
type parentRef struct {
	name string
	id   ID
	isID bool
}

// itemExt holds what only some items need: the explicit parent of a decoded item (once
// integrated, the parent is resolved and this is dropped) and the map key of an item
// held under one. Integrated items share one itemExt per key (Doc.keyExt); a decoded
// item finds it in shared when the key is known.
type itemExt struct {
	pref   parentRef
	sub    string
	shared *itemExt
}

// format is the content of a ContentFormat.
type format struct {
	key string
	val any
}

// item is a Yjs struct: an Item, or a GC / Skip range (kind kindGC / kindSkip). Fields are
// ordered to leave no padding: items are most of a document's memory.
type item struct {
	id          ID
	origin      ID
	rightOrigin ID
	left, right *item
	parent      *Type
	ext         *itemExt
	// content: text holds String content (UTF-8, appended to when items merge); val
	// holds the rest: *anyVals for Any and JSON, []byte for Binary, the Embed value, *format,
	// *Type for ContentType and *Doc.
	text   []byte
	val    any
	length uint32
	kind   uint8
	flags  uint8
}

func (it *item) deleted() bool { return it.kind == kindGC || it.flags&flagDeleted != 0 }

func (it *item) countable() bool { return it.flags&flagCountable != 0 }

// visible reports whether it contributes to its parent's sequence.
func (it *item) visible() bool { return it.flags&(flagDeleted|flagCountable) == flagCountable }

func (it *item) lastID() ID { return ID{it.id.Client, it.end() - 1} }

// end returns the clock after it.
func (it *item) end() uint64 { return it.id.Clock + uint64(it.length) }

// sub returns the map key of an item held under one.
func (it *item) sub() string {
	if it.flags&flagHasParentSub == 0 {
		return ""
	}
	return it.ext.sub
}

// anyVals holds the values of Any and JSON content (item.val): a single value, the most
// common, in the same allocation.
type anyVals struct {
	s   []any
	one [1]any
}

// typeItem and anyItem are an item of ContentType and its Type, an item of Any content
// and its values' holder, in one allocation: a decoded update's structs are mostly
// these (a cell is a map of types; its outputs and metadata are Any).
type typeItem struct {
	it item
	t  Type
}

type anyItem struct {
	it item
	v  anyVals
}

// newItem returns a new item for a struct of kind, with the storage of its content in
// the same allocation for ContentType (it.val holds the *Type) and Any (the *anyVals).
func newItem(kind uint8) *item {
	switch kind {
	case kindType:
		x := new(typeItem)
		x.it.val, x.it.flags = &x.t, flagOwnType
		return &x.it
	case kindAny:
		x := new(anyItem)
		x.it.val, x.it.flags = &x.v, flagOwnVals
		return &x.it
	}
	return new(item)
}

// newVals returns room for n values: it.val's holder when newItem made one, else a
// new one.
func newVals(it *item, n int) *anyVals {
	v, _ := it.val.(*anyVals)
	if v == nil {
		v = new(anyVals)
	}
	if n == 1 {
		v.s = v.one[:]
	} else {
		v.s = make([]any, n)
	}
	return v
}

// vals returns the values of Any and JSON content.
func (it *item) vals() []any {
	if v, ok := it.val.(*anyVals); ok {
		return v.s
	}
	return nil
}

// typ returns the type of ContentType.
func (it *item) typ() *Type {
	t, _ := it.val.(*Type)
	return t
}

func (it *item) hasOrigin() bool { return it.flags&flagHasOrigin != 0 }

func (it *item) hasRightOrigin() bool { return it.flags&flagHasRightOrigin != 0 }

func isCountableKind(k uint8) bool {
	return k != kindDeleted && k != kindFormat
}

// content returns the values of a countable item as Y.Array exposes them.
func (it *item) content() []any {
	switch it.kind {
	case kindAny, kindJSON:
		return it.vals()
	case kindString:
		out := make([]any, 0, it.length)
		for _, u := range utf16.Encode([]rune(string(it.text))) {
			out = append(out, string(utf16.Decode([]uint16{u})))
		}
		return out
	case kindType:
		return []any{it.typ().Value()}
	case kindBinary, kindEmbed, kindDoc:
		return []any{it.val}
	}
	return nil
}

// last returns the last value of it, the value a map entry holds.
func (it *item) last() any {
	switch it.kind {
	case kindAny, kindJSON:
		vals := it.vals()
		return vals[len(vals)-1]
	case kindString:
		return lastUnit(it.text)
	case kindType:
		return it.typ().Value()
	case kindBinary, kindEmbed, kindDoc:
		return it.val
	}
	return Undefined
}

// lastUnit returns the last UTF-16 code unit of s as a string (a lone surrogate becomes
// U+FFFD, as it would after a round trip through UTF-8).
func lastUnit(s []byte) string {
	r, _ := utf8.DecodeLastRune(s)
	if r >= 0x10000 {
		return "\uFFFD"
	}
	return string(r)
}

// utf16Len returns the length of s in UTF-16 code units.
func utf16Len(s []byte) uint64 {
	n := uint64(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x80 {
			continue
		}
		switch {
		case c >= 0xF0:
			n -= 2 // 4 bytes, 2 units
		case c >= 0xE0:
			n -= 2 // 3 bytes, 1 unit
		case c >= 0xC0:
			n-- // 2 bytes, 1 unit
		}
	}
	return n
}

// splitText splits the content s of a string item after off clock units, as yrs does
// (split_str with UTF-16 offsets): the cut goes to the first character boundary at or
// after off UTF-16 units, so a surrogate pair cut in half stays whole in the left part
// (Yjs writes U+FFFD on both sides instead), and an item's content may then hold more or
// fewer UTF-16 units than its clock length. s is valid UTF-8 (decoding checks it). The
// left part has no spare capacity, so appending to it never overwrites the right part.
func splitText(s []byte, off uint64) ([]byte, []byte) {
	i, units := 0, uint64(0)
	for i < len(s) && units < off {
		switch c := s[i]; {
		case c < 0x80:
			i, units = i+1, units+1
		case c >= 0xF0:
			i, units = i+4, units+2
		case c >= 0xE0:
			i, units = i+3, units+1
		default:
			i, units = i+2, units+1
		}
	}
	return s[:i:i], s[i:]
}

// mergeWith appends right to it when Yjs would (Item.mergeWith / GC.mergeWith).
func (it *item) mergeWith(right *item) bool {
	if uint64(it.length)+uint64(right.length) > maxLength {
		return false
	}
	if it.kind == kindGC {
		it.length += right.length
		return true
	}
	if it.kind != right.kind || it.right != right || !right.hasOrigin() || right.origin != it.lastID() ||
		!sameOrigin(it.hasRightOrigin(), it.rightOrigin, right.hasRightOrigin(), right.rightOrigin) ||
		it.id.Client != right.id.Client || it.end() != right.id.Clock {
		return false
	}
	switch it.kind {
	case kindString:
		it.text = append(it.text, right.text...)
	case kindAny, kindJSON:
		v := it.val.(*anyVals)
		v.s = append(v.s, right.vals()...)
	case kindDeleted:
	default:
		return false
	}
	it.right = right.right
	if it.right != nil {
		it.right.left = it
	}
	it.length += right.length
	return true
}

// splitItem cuts it after diff clock units and returns the right part as a new item
// linked to the right of it, like Yjs's splitItem.
func splitItem(it *item, diff uint64) *item {
	r := new(item)
	r.id = ID{it.id.Client, it.id.Clock + diff}
	r.length = it.length - uint32(diff)
	r.left = it
	r.origin = ID{it.id.Client, it.id.Clock + diff - 1}
	r.right = it.right
	r.rightOrigin = it.rightOrigin
	r.parent = it.parent
	r.ext = it.ext
	r.kind = it.kind
	r.flags = it.flags&^flagsOwn | flagHasOrigin
	switch it.kind {
	case kindString:
		it.text, r.text = splitText(it.text, diff)
	case kindAny, kindJSON:
		v := it.val.(*anyVals)
		r.val = &anyVals{s: v.s[diff:len(v.s):len(v.s)]}
		v.s = v.s[:diff:diff]
	}
	it.right = r
	if r.right != nil {
		r.right.left = r
	}
	it.length = uint32(diff)
	return r
}

// adopt readies a decoded struct for integration: one lent by the document (Doc.one)
// is copied, its explicit parent is resolved by then and its itemExt, lent by the
// update's extBuf, is dropped; an item held under a map key takes the itemExt shared by
// the key.
func (d *Doc) adopt(it *item) *item {
	if it == &d.one {
		// lent for the update: the document keeps a copy
		c := new(item)
		*c = *it
		it = c
	}
	if it.flags&flagHasPref != 0 {
		dec := it.ext
		it.flags &^= flagHasPref
		it.ext = nil
		if it.flags&flagHasParentSub != 0 {
			it.ext = dec.shared
			if it.ext == nil {
				it.ext = d.keyExt(dec.sub)
			}
		}
	}
	return it
}

// keyExt returns the itemExt shared by the integrated items held under key.
func (d *Doc) keyExt(key string) *itemExt {
	keys := &d.texts.keys
	x := (*keys)[key]
	if x == nil {
		if *keys == nil {
			*keys = make(map[string]*itemExt)
		}
		x = &itemExt{sub: key}
		(*keys)[key] = x
	}
	return x
}
