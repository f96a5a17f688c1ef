package yjs

import (
	"cmp"
	"maps"
	"slices"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/lib0"
)

// EncodeStateVector encodes the state vector like Y.encodeStateVector (clients in
// descending order).
func (d *Doc) EncodeStateVector() []byte {
	sv := d.StateVector()
	var e lib0.Encoder
	e.VarUint(uint64(len(sv)))
	for _, c := range slices.Backward(slices.Sorted(maps.Keys(sv))) {
		e.VarUint(c)
		e.VarUint(sv[c])
	}
	return e.Buf
}

// DecodeStateVector decodes an encoded state vector.
func DecodeStateVector(b []byte) (map[uint64]uint64, error) {
	d := lib0.NewDecoder(b)
	n := d.CountAtMost(2, "number of state vector entries")
	sv := make(map[uint64]uint64, n)
	for range n {
		c := d.VarUint("state vector client")
		sv[c] = d.VarUint("state vector clock")
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return sv, nil
}

// EncodeStateAsUpdate encodes everything the document holds beyond stateVector (an
// encoded state vector; nil means everything) as a v1 update, like
// Y.encodeStateAsUpdate: structs of each client in descending client order, then the
// delete set of the whole store. Pending structs beyond the state vector and pending
// deletes are included the way Yjs merges them in, with Skip structs over gaps.
func (d *Doc) EncodeStateAsUpdate(stateVector []byte) ([]byte, error) {
	sv := map[uint64]uint64{}
	if len(stateVector) > 0 {
		var err error
		if sv, err = DecodeStateVector(stateVector); err != nil {
			return nil, err
		}
	}
	clients := make(map[uint64]struct{}, len(d.clients)+len(d.pending))
	for c := range d.clients {
		clients[c] = struct{}{}
	}
	for c := range d.pending {
		clients[c] = struct{}{}
	}
	var e lib0.Encoder
	// structs are the structs to write from clock on; nil stands for a Skip over the gap
	// between its neighbours (a gap may be longer than an item can be).
	type section struct {
		client, clock uint64
		structs       []*item
	}
	var sections []section
	for _, c := range slices.Backward(slices.Sorted(maps.Keys(clients))) {
		from := sv[c]
		var list []*item
		if cs := d.clients[c]; cs != nil && cs.len() > 0 {
			from = max(from, cs.at(0).id.Clock)
			if i := cs.find(from); i >= 0 {
				list = cs.from(i)
			}
		}
		state := d.state(c)
		end := max(state, from)
		pend := d.pending[c]
		for _, p := range pend {
			if p.end() <= end {
				continue
			}
			if len(list) == 0 {
				from = max(from, p.id.Clock)
				end = from
			}
			if p.id.Clock > end {
				list = append(slices.Clip(list), nil)
			}
			list = append(slices.Clip(list), p)
			end = p.end()
		}
		if len(list) > 0 {
			sections = append(sections, section{c, from, list})
		}
	}
	e.VarUint(uint64(len(sections)))
	for _, s := range sections {
		e.VarUint(uint64(len(s.structs)))
		e.VarUint(s.client)
		e.VarUint(s.clock)
		for i, it := range s.structs {
			if it == nil {
				e.Uint8(kindSkip)
				e.VarUint(s.structs[i+1].id.Clock - s.structs[i-1].end())
				continue
			}
			off := uint64(0)
			if i == 0 {
				off = s.clock - it.id.Clock
			}
			writeStruct(&e, it, off)
		}
	}
	writeDeleteSet(&e, mergeDeleteSets(d.storeDeleteSet(), clonePendingDS(d.pendingDS)))
	return e.Buf, nil
}

func clonePendingDS(ds map[uint64][]dsRange) map[uint64][]dsRange {
	out := make(map[uint64][]dsRange, len(ds))
	for c, rs := range ds {
		out[c] = slices.Clone(rs)
	}
	return out
}

// storeDeleteSet collects the deleted ranges of the store like createDeleteSetFromStructStore.
func (d *Doc) storeDeleteSet() map[uint64][]dsRange {
	ds := make(map[uint64][]dsRange)
	for c, cs := range d.clients {
		var rs []dsRange
		for it := range cs.all() {
			if !it.deleted() {
				continue
			}
			if n := len(rs); n > 0 && rs[n-1].clock+rs[n-1].length == it.id.Clock {
				rs[n-1].length += uint64(it.length)
				continue
			}
			rs = append(rs, dsRange{it.id.Clock, uint64(it.length)})
		}
		if len(rs) > 0 {
			ds[c] = rs
		}
	}
	return ds
}

func writeDeleteSet(e *lib0.Encoder, ds map[uint64][]dsRange) {
	clients := slices.SortedFunc(maps.Keys(ds), func(a, b uint64) int { return cmp.Compare(b, a) })
	e.VarUint(uint64(len(clients)))
	for _, c := range clients {
		e.VarUint(c)
		e.VarUint(uint64(len(ds[c])))
		for _, r := range ds[c] {
			e.VarUint(r.clock)
			e.VarUint(r.length)
		}
	}
}

// writeStruct writes one struct, skipping its first offset clock units, like Item.write.
func writeStruct(e *lib0.Encoder, it *item, offset uint64) {
	switch it.kind {
	case kindGC, kindSkip:
		e.Uint8(it.kind)
		e.VarUint(uint64(it.length) - offset)
		return
	}
	hasOrigin := it.hasOrigin() || offset > 0
	origin := it.origin
	if offset > 0 {
		origin = ID{it.id.Client, it.id.Clock + offset - 1}
	}
	info := it.kind
	if hasOrigin {
		info |= infoOrigin
	}
	if it.hasRightOrigin() {
		info |= infoRightOrigin
	}
	hasSub := it.flags&flagHasParentSub != 0
	if hasSub {
		info |= infoParentSub
	}
	e.Uint8(info)
	if hasOrigin {
		e.VarUint(origin.Client)
		e.VarUint(origin.Clock)
	}
	if it.hasRightOrigin() {
		e.VarUint(it.rightOrigin.Client)
		e.VarUint(it.rightOrigin.Clock)
	}
	if !hasOrigin && !it.hasRightOrigin() {
		writeParent(e, it)
		if hasSub {
			e.VarString(it.ext.sub)
		}
	}
	writeContent(e, it, offset)
}

func writeParent(e *lib0.Encoder, it *item) {
	switch {
	case it.parent != nil && it.parent.item == nil:
		e.VarUint(1)
		e.VarString(it.parent.name)
	case it.parent != nil:
		e.VarUint(0)
		e.VarUint(it.parent.item.id.Client)
		e.VarUint(it.parent.item.id.Clock)
	case it.flags&flagHasPref != 0 && !it.ext.pref.isID:
		e.VarUint(1)
		e.VarString(it.ext.pref.name)
	case it.flags&flagHasPref != 0:
		e.VarUint(0)
		e.VarUint(it.ext.pref.id.Client)
		e.VarUint(it.ext.pref.id.Clock)
	}
}

func writeContent(e *lib0.Encoder, it *item, offset uint64) {
	switch it.kind {
	case kindDeleted:
		e.VarUint(uint64(it.length) - offset)
	case kindJSON:
		e.VarUint(uint64(len(it.vals())) - offset)
		for _, v := range it.vals()[offset:] {
			if v == any(Undefined) {
				e.VarString("undefined")
			} else {
				e.VarString(jsonString(v))
			}
		}
	case kindBinary:
		e.VarUint8Array(it.val.([]byte))
	case kindString:
		s := it.text
		if offset > 0 {
			_, s = splitText(s, offset)
		}
		e.VarUint8Array(unitsExactly(s, uint64(it.length)-offset))
	case kindEmbed:
		e.VarString(jsonString(it.val))
	case kindFormat:
		f := it.val.(*format)
		e.VarString(f.key)
		e.VarString(jsonString(f.val))
	case kindType:
		t := it.typ()
		e.VarUint(typeRef(t.kind))
		if t.kind == KindXmlElement || t.kind == KindXmlHook {
			e.VarString(t.name)
		}
	case kindAny:
		e.VarUint(uint64(len(it.vals())) - offset)
		for _, v := range it.vals()[offset:] {
			e.Any(v)
		}
	case kindDoc:
		sub := it.val.(*Doc)
		e.VarString(sub.guid)
		e.Any(sub.opts)
	}
}

// CutPairs reports whether some text item holds another number of UTF-16 units than its
// clock length, as a split inside a surrogate pair leaves it (splitText): the encoded
// state then writes U+FFFD where the document reads a whole character (unitsExactly), so
// it is not the document's whole content.
func (d *Doc) CutPairs() bool {
	for _, cs := range d.clients {
		for it := range cs.all() {
			if it.kind == kindString && utf16Len(it.text) != uint64(it.length) {
				return true
			}
		}
	}
	return false
}

// unitsExactly returns s when it holds n UTF-16 units, else the text that does, as Yjs
// writes it: a surrogate pair that does not fit whole becomes U+FFFD, and missing units
// are U+FFFD. A readers' length of a string struct is its UTF-16 length, so an item
// whose content and clock length differ (a split inside a surrogate pair, splitText)
// would otherwise shift the clocks of every struct after it; yrs writes it so.
func unitsExactly(s []byte, n uint64) []byte {
	if utf16Len(s) == n {
		return s
	}
	out := make([]byte, 0, len(s)+3)
	units := uint64(0)
	for _, r := range string(s) {
		w := uint64(utf16.RuneLen(r))
		if units+w > n {
			break
		}
		out = utf8.AppendRune(out, r)
		units += w
	}
	for ; units < n; units++ {
		out = append(out, "\uFFFD"...)
	}
	return out
}
