package yjs

import (
	"cmp"
	"encoding/json"
	"slices"
	"unicode/utf8"
	"unsafe"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/lib0"
)

// structRefs are one client's decoded structs and the integration cursor; gone marks a
// client whose structs were set aside as pending.
type structRefs struct {
	client uint64
	refs   []*item
	i      int
	gone   bool
}

// update is a decoded v1 update.
type update struct {
	one   *item          // storage for an update of one struct, lent by its document; nil: none
	refs  []structRefs   // sorted by client
	used  int            // how many entries of refs were written (sorting drops repeats)
	ds    []clientRanges // sorted by client, each once
	spent int64          // the memory its structs and values take (memory.go)
}

// clientRanges are the deleted ranges of one client, in the order of the update.
type clientRanges struct {
	client uint64
	rs     []dsRange
}

// clear empties u for decoding another update into it, keeping the storage of its lists
// (a document decodes each update it applies alone into the same one).
func (u *update) clear() {
	for i := range u.refs[:u.used] {
		clear(u.refs[:u.used][i].refs)
	}
	u.refs, u.used, u.spent = u.refs[:0], 0, 0
	u.ds = u.ds[:0]
}

// spareRanges returns an empty list for the delete ranges of the next client, from
// u's storage when it holds one.
func (u *update) spareRanges() []dsRange {
	if k := len(u.ds); k < cap(u.ds) {
		return u.ds[:k+1][k].rs[:0]
	}
	return nil
}

// sortRanges sorts ds by client; the ranges of a client listed twice are joined in
// order, as Yjs reads them into one list.
func sortRanges(ds []clientRanges) []clientRanges {
	slices.SortStableFunc(ds, func(a, b clientRanges) int { return cmp.Compare(a.client, b.client) })
	out := ds[:0]
	for _, r := range ds {
		if n := len(out); n > 0 && out[n-1].client == r.client {
			out[n-1].rs = append(out[n-1].rs, r.rs...)
			continue
		}
		out = append(out, r)
	}
	clear(ds[len(out):]) // a slot left holds a list out holds: spareRanges must not lend it
	return out
}

// spare returns an empty list for the structs of the next client, from u's storage when
// it holds one of capacity n.
func (u *update) spare(n int) []*item {
	if k := len(u.refs); k < cap(u.refs) {
		if r := u.refs[:k+1][k].refs; cap(r) >= n {
			return r[:0]
		}
	}
	return make([]*item, 0, n)
}

// sortRefs sorts refs by client; of a client listed twice, the last list counts, as in
// Yjs's map of struct refs.
func sortRefs(refs []structRefs) []structRefs {
	slices.SortStableFunc(refs, func(a, b structRefs) int { return cmp.Compare(a.client, b.client) })
	out := refs[:0]
	for _, r := range refs {
		if n := len(out); n > 0 && out[n-1].client == r.client {
			out[n-1] = r
			continue
		}
		out = append(out, r)
	}
	clear(refs[len(out):]) // a slot left holds a list out holds: spare must not lend it
	return out
}

// findRefs returns the structs of client that are not gone, or nil.
func findRefs(refs []structRefs, client uint64) *structRefs {
	i, ok := slices.BinarySearchFunc(refs, client, func(r structRefs, c uint64) int { return cmp.Compare(r.client, c) })
	if !ok || refs[i].gone {
		return nil
	}
	return &refs[i]
}

// Update is a decoded Yjs v1 update, for inspection and tests.
type Update struct {
	// Structs lists each client's structs in clock order.
	Structs map[uint64][]Struct
	// Deletes lists each client's deleted ranges.
	Deletes map[uint64][]Range
}

// Range is a clock range.
type Range struct {
	Clock, Len uint64
}

// Struct is one decoded struct.
type Struct struct {
	ID   ID
	Len  uint64
	Kind string // "GC", "Skip", "Deleted", "JSON", "Binary", "String", "Embed", "Format", "Type", "Any", "Doc"
	// Origin is the ID of the item to the left at insertion time.
	Origin *ID `json:",omitempty"`
	// RightOrigin is the ID of the item to the right at insertion time.
	RightOrigin *ID `json:",omitempty"`
	// ParentName is the root name of an item with explicit root parent.
	ParentName string `json:",omitempty"`
	// ParentID is the ID of the item holding the parent type, when explicit.
	ParentID *ID `json:",omitempty"`
	// ParentSub is the map key of an item with explicit parent, if any.
	ParentSub *string `json:",omitempty"`
	// Content holds the values: the string for String, the values for JSON and Any,
	// the []byte for Binary, the value for Embed, {key: value} for Format, the kind and
	// name for Type ([]any{Yjs type ref, name}), []any{guid, opts} for Doc.
	Content any `json:",omitempty"`
}

var kindNames = [...]string{"GC", "Deleted", "JSON", "Binary", "String", "Embed", "Format", "Type", "Any", "Doc", "Skip"}

// DecodeUpdate decodes a v1 update without applying it.
func DecodeUpdate(b []byte) (*Update, error) {
	u, err := decodeUpdate(b, 0, &arena{}, nil, &update{})
	if err != nil {
		return nil, err
	}
	out := &Update{Structs: map[uint64][]Struct{}, Deletes: map[uint64][]Range{}}
	for _, r := range u.refs {
		for _, it := range r.refs {
			out.Structs[r.client] = append(out.Structs[r.client], it.export())
		}
	}
	for _, cr := range u.ds {
		for _, r := range cr.rs {
			out.Deletes[cr.client] = append(out.Deletes[cr.client], Range{r.clock, r.length})
		}
	}
	return out, nil
}

func (it *item) export() Struct {
	s := Struct{ID: it.id, Len: uint64(it.length), Kind: kindNames[it.kind]}
	if it.hasOrigin() {
		o := it.origin
		s.Origin = &o
	}
	if it.hasRightOrigin() {
		o := it.rightOrigin
		s.RightOrigin = &o
	}
	if it.flags&flagHasPref != 0 {
		p := &it.ext.pref
		if p.isID {
			id := p.id
			s.ParentID = &id
		} else {
			s.ParentName = p.name
		}
	}
	if it.flags&flagHasParentSub != 0 {
		k := it.ext.sub
		s.ParentSub = &k
	}
	switch it.kind {
	case kindString:
		s.Content = string(it.text)
	case kindJSON, kindAny:
		s.Content = it.vals()
	case kindBinary, kindEmbed:
		s.Content = it.val
	case kindFormat:
		f := it.val.(*format)
		s.Content = map[string]any{f.key: f.val}
	case kindType:
		s.Content = []any{float64(typeRef(it.typ().kind)), it.typ().name}
	case kindDoc:
		sub := it.val.(*Doc)
		s.Content = []any{sub.guid, sub.opts}
	}
	return s
}

// arena is a document's storage for decoding. It hands out copies of small strings from
// shared chunks, so that a text typed one character per update costs no allocation per
// item; copies have no spare capacity: appending to one reallocates instead of
// overwriting its neighbour. keys holds the itemExt shared by the integrated items held
// under each map key (Doc.keyExt adds to it): decoding a known key costs no allocation.
type arena struct {
	buf  []byte
	keys map[string]*itemExt
}

const (
	arenaChunk = 4 << 10
	arenaMax   = 256
)

func (a *arena) copy(b []byte) []byte {
	if len(b) > arenaMax {
		return append([]byte(nil), b...)
	}
	if cap(a.buf)-len(a.buf) < len(b) {
		a.buf = make([]byte, 0, arenaChunk)
	}
	n := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[n:len(a.buf):len(a.buf)]
}

// extBuf lends a document's updates the itemExt of their decoded structs that have an
// explicit parent: integration drops it (Doc.adopt) and pending structs get copies of
// theirs (mergePending), so the same few serve every update. reset makes them
// available again.
type extBuf struct {
	buf, free []itemExt
}

const extBufLen = 16

// take returns at most n zeroed itemExt, at least one: those left to lend, else n new
// ones. A client's structs take them for all that remain of it, most of which have no
// explicit parent: lending what is left serves them without an allocation.
func (b *extBuf) take(n int) []itemExt {
	if b == nil {
		return make([]itemExt, n)
	}
	if b.buf == nil {
		b.buf = make([]itemExt, extBufLen)
		b.free = b.buf
	}
	if len(b.free) == 0 {
		return make([]itemExt, n)
	}
	n = min(n, len(b.free))
	s := b.free[:n:n]
	b.free = b.free[n:]
	return s
}

// reset takes back the itemExt lent since the last reset.
func (b *extBuf) reset() {
	clear(b.buf[:len(b.buf)-len(b.free)])
	b.free = b.buf
}

// decodeUpdate decodes a complete v1 update into u, which is empty; nothing is
// integrated. Each struct is allocated on its own, as the document keeps it, but the
// only struct of an update goes to u.one when set; the itemExt of explicit parents come
// from exts when not nil. The memory the update takes is counted in u.spent; past limit
// (0: none) decoding stops with ErrBudget (memory.go).
func decodeUpdate(b []byte, limit int64, texts *arena, exts *extBuf, u *update) (*update, error) {
	d := lib0.NewDecoder(b)
	d.SetLimit(limit)
	nClients := d.CountAtMost(3, "number of clients with structs")
	if nClients > cap(u.refs) {
		u.refs = slices.Grow(u.refs, nClients)
	}
	for range nClients {
		start := d.Pos()
		n := d.CountAtMost(2, "number of structs")
		client := d.VarUint("client id")
		clock := d.VarUint("first clock")
		if !d.Spend(start, clientBytes, "client") {
			break
		}
		refs := u.spare(n)
		var lent []itemExt
		stuck := false // a struct of this client that can never integrate was read
		for i := range n {
			var it *item
			if u.one != nil && nClients == 1 && n == 1 {
				*u.one = item{id: ID{client, clock}}
				it = u.one
			} else {
				it = newItem(d.PeekUint8() & 0x1f)
				it.id = ID{client, clock}
			}
			length, never := decodeStruct(d, it, texts, exts, &lent, n-i)
			if d.Err() != nil {
				return nil, d.Err()
			}
			if length > lib0.MaxSafeInteger-clock {
				d.Fail(d.Pos(), "clock range within 2^53", lib0.ErrOverflow)
				return nil, d.Err()
			}
			if length > maxLength {
				d.Fail(d.Pos(), "struct length within 2^32", lib0.ErrOverflow)
				return nil, d.Err()
			}
			clock += length
			stuck = stuck || never
			if length == 0 || stuck {
				// an empty item (yrs writes them) holds nothing and no clock; a struct
				// after one that can never integrate could not either
				continue
			}
			it.length = uint32(length)
			refs = append(refs, it)
		}
		u.refs = append(u.refs, structRefs{client: client, refs: refs})
		u.used = len(u.refs)
	}
	if len(u.refs) > 1 {
		u.refs = sortRefs(u.refs)
	}
	nDS := d.CountAtMost(2, "number of clients with deletes")
	for range nDS {
		client := d.VarUint("delete set client")
		n := d.CountAtMost(2, "number of delete ranges")
		rs := u.spareRanges()
		for range n {
			start := d.Pos()
			// a range kept, and the two structs it may split
			if !d.Spend(start, rangeBytes+2*itemBytes, "delete range") {
				break
			}
			clock := d.VarUint("delete clock")
			length := d.VarUint("delete length")
			if length > lib0.MaxSafeInteger-clock {
				d.Fail(start, "delete range within 2^53", lib0.ErrOverflow)
			}
			rs = append(rs, dsRange{clock, length})
		}
		if d.Err() != nil {
			break
		}
		u.ds = append(u.ds, clientRanges{client, rs})
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	if len(u.ds) > 1 {
		u.ds = sortRanges(u.ds)
	}
	u.spent = d.Spent()
	return u, nil
}

// decodeStruct decodes one struct whose id is set and returns its length, and never when
// the struct refers to itself or to a later struct of its client (see earlier). An
// explicit parent goes to an itemExt taken from lent, which is taken from exts for the
// remaining structs of the client when empty.
func decodeStruct(d *lib0.Decoder, it *item, texts *arena, exts *extBuf, lent *[]itemExt, remaining int) (length uint64, never bool) {
	start := d.Pos()
	info := d.Uint8("struct info")
	kind := info & 0x1f
	switch {
	case kind == kindGC || kind == kindSkip:
		it.kind = kind
		if kind == kindGC {
			d.Spend(start, itemBytes, "struct")
		}
		length := d.VarUint("struct length")
		if length == 0 && d.Err() == nil {
			d.Fail(start, "non-empty struct", lib0.ErrInvalid)
		}
		return length, false
	case kind > kindSkip:
		d.Fail(start, "struct kind 0-10", lib0.ErrInvalid)
		return 0, false
	}
	it.kind = kind
	// the item, and one more for each neighbour it may split
	splits := int64(info>>7) + int64(info>>6&1)
	if !d.Spend(start, itemBytes*(1+splits), "struct") {
		return 0, false
	}
	if info&infoOrigin != 0 {
		it.origin = readID(d, "origin client", "origin clock")
		it.flags |= flagHasOrigin
		never = !earlier(it, it.origin)
	}
	if info&infoRightOrigin != 0 {
		it.rightOrigin = readID(d, "right origin client", "right origin clock")
		it.flags |= flagHasRightOrigin
		never = never || !earlier(it, it.rightOrigin)
	}
	if info&(infoOrigin|infoRightOrigin) == 0 {
		if len(*lent) == 0 {
			*lent = exts.take(remaining)
		}
		x := &(*lent)[0]
		*lent = (*lent)[1:]
		p := &x.pref
		d.Spend(start, extBytes+keyBytes, "struct")
		if d.VarUint("parent info") == 1 {
			p.name = d.VarString("parent root name")
			d.Spend(start, int64(len(p.name)), "parent root name")
		} else {
			p.isID = true
			p.id = readID(d, "parent id client", "parent id clock")
			never = never || !earlier(it, p.id)
		}
		it.ext = x
		it.flags |= flagHasPref
		if info&infoParentSub != 0 {
			readKey(d, x, texts)
			it.flags |= flagHasParentSub
		}
	}
	// yrs writes items of no length (an empty string where it split a block at its end,
	// e.g. after a deletion by UTF-8 offsets inside a character); pycrdt reads them as
	// nothing, and so does decodeUpdate.
	length = decodeContent(d, it, texts)
	if isCountableKind(kind) {
		it.flags |= flagCountable
	}
	return length, never
}

// readKey reads the map key of x, a known one as its shared itemExt (x.shared).
func readKey(d *lib0.Decoder, x *itemExt, texts *arena) {
	start := d.Pos()
	b := d.VarStringBytes("parent sub")
	switch shared := texts.keys[string(b)]; {
	case d.Err() != nil:
	case shared != nil:
		x.sub, x.shared = shared.sub, shared
	case !utf8.Valid(b):
		d.Fail(start, "parent sub", lib0.ErrInvalid)
	case d.Spend(start, int64(len(b)), "parent sub"):
		x.sub = string(b)
	}
}

func readID(d *lib0.Decoder, client, clock string) ID {
	c := d.VarUint(client)
	return ID{c, d.VarUint(clock)}
}

// earlier reports whether ref, a struct it refers to, can be integrated before it: a
// struct of another client, or an earlier one of its own. A struct referring to itself or
// to a later struct of its client waits for itself: yrs writes one (an insert next to an
// empty item names it, by the id the insert takes, as its right origin) and keeps it
// pending forever, with every later struct of its client; decodeUpdate drops them, so
// that reads equal pycrdt's and the client's later updates stay pending as there.
func earlier(it *item, ref ID) bool {
	return ref.Client != it.id.Client || ref.Clock < it.id.Clock
}

// decodeContent decodes the content of an item whose kind is set and returns its length.
func decodeContent(d *lib0.Decoder, it *item, texts *arena) uint64 {
	start := d.Pos()
	switch it.kind {
	case kindDeleted:
		return d.VarUint("deleted length")
	case kindJSON:
		n := d.CountAtMost(1, "JSON value count")
		if !d.Spend(start, valsBytes+lib0.SlotBytes*int64(n), "JSON values") {
			return 0
		}
		v := newVals(it, n)
		for i := range v.s {
			v.s[i] = readJSON(d, true)
		}
		it.val = v
		return uint64(n)
	case kindBinary:
		b := d.VarUint8Array("binary content")
		d.Spend(start, int64(len(b))+24, "binary content")
		it.val = b
	case kindString:
		start := d.Pos()
		b := d.VarStringBytes("string content")
		if !utf8.Valid(b) {
			d.Fail(start, "string content", lib0.ErrInvalid)
			return 0
		}
		if !d.Spend(start, textCopies*int64(len(b)), "string content") {
			return 0
		}
		it.text = texts.copy(b)
		return utf16Len(it.text)
	case kindEmbed:
		it.val = readJSON(d, false)
	case kindFormat:
		key := d.VarString("format key")
		d.Spend(start, int64(unsafe.Sizeof(format{}))+int64(len(key)), "format key")
		it.val = &format{key, readJSON(d, false)}
	case kindType:
		ref := d.VarUint("type ref")
		if ref >= uint64(len(typeRefKinds)) {
			d.Fail(start, "type ref 0-6", lib0.ErrInvalid)
			return 0
		}
		t, _ := it.val.(*Type) // newItem's
		if t == nil {
			t = new(Type)
		}
		t.kind = typeRefKinds[ref]
		if t.kind == KindXmlElement || t.kind == KindXmlHook {
			t.name = d.VarString("xml node name")
		}
		d.Spend(start, typeBytes+int64(len(t.name)), "type")
		it.val = t
	case kindAny:
		n := d.CountAtMost(1, "any value count")
		if !d.Spend(start, valsBytes+lib0.SlotBytes*int64(n), "any values") {
			return 0
		}
		v := newVals(it, n)
		for i := range v.s {
			v.s[i] = d.Any("any value")
		}
		it.val = v
		return uint64(n)
	case kindDoc:
		if !d.Spend(start, docBytes, "subdocument") {
			return 0
		}
		sub := NewDoc()
		sub.guid = d.VarString("subdocument guid")
		sub.opts = d.Any("subdocument options")
		it.val = sub
	}
	return 1
}

// readJSON reads a varstring holding JSON, like JSON.parse; with undef, the string
// "undefined" decodes to Undefined (ContentJSON).
func readJSON(d *lib0.Decoder, undef bool) any {
	start := d.Pos()
	s := d.VarString("JSON string")
	if d.Err() != nil {
		return nil
	}
	switch s {
	case "undefined":
		if undef {
			return Undefined
		}
	case "null": // formats are mostly these: no decoder, no garbage
		return nil
	case "true":
		return true
	case "false":
		return false
	}
	if !d.Spend(start, jsonFactor*int64(len(s)), "JSON string") {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		d.Fail(start, "JSON string", lib0.ErrInvalid)
		return nil
	}
	return v
}

// CompactText moves the text of the document's items out of the chunks it was decoded
// into (an arena chunk holds the text of many updates, and stays while any of it is
// live, deleted text around it included) into chunks of its own, so that the memory text
// takes follows the live text, not the history that typed it. A load calls it once at
// the end; it changes no content.
func (d *Doc) CompactText() {
	defer d.recount() // the load is done: what it holds is measured
	fresh := arena{keys: d.texts.keys}
	for _, cs := range d.clients {
		for it := range cs.all() {
			if n := len(it.text); n > 0 && n <= arenaMax {
				it.text = fresh.copy(it.text)
			}
		}
	}
	d.texts = fresh
}
