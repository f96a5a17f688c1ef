package yjs

import (
	"unsafe"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/lib0"
)

// A document's memory is charged to its Meter, if it has one, as updates decode: the
// estimate follows what the Go values take, not the bytes of the rows, because a few
// encoded bytes can become a type, a map and an item of a hundred bytes or more (a chain
// of nested maps decodes to about 60 times its rows). Decoding an update counts the
// memory of every struct, delete range and value it builds (lib0.Decoder.Spend) and
// stops, before it builds more, once that passes what the meter has left: the update is
// refused with ErrBudget and the document left unchanged. What is counted is an upper
// estimate: each inserted struct is counted with the split it may cause, each delete
// range with two. Merges and garbage collection later free most of it, so the document
// measures what it really holds (size) once its charge has doubled since it last did, and
// gives the difference back: a walk over its structs, paid for by the updates that
// doubled the charge.

// ErrBudget is wrapped by the *DecodeError of an update whose decoded structs and values
// would take more memory than the document's Meter has left.
var ErrBudget = lib0.ErrBudget

// Meter is what a document's memory is charged to: in hub mode, a user's share of the
// process, counted over all her documents.
type Meter interface {
	// Left returns the bytes that may still be taken; 0 or less: none.
	Left() int64
	// Add takes n bytes, or gives them back when n is negative.
	Add(n int64)
}

// The memory model: what the structures of a document take on a 64-bit machine.
const (
	itemBytes  = int64(unsafe.Sizeof(item{})) + 8 // and its slot in the client's list
	extBytes   = int64(unsafe.Sizeof(itemExt{}))
	typeBytes  = int64(unsafe.Sizeof(Type{}))
	valsBytes  = int64(unsafe.Sizeof(anyVals{}))
	docBytes   = int64(unsafe.Sizeof(Doc{})) + 2*48 // a subdocument's Doc and its maps
	rangeBytes = int64(unsafe.Sizeof(dsRange{}))
	keyBytes   = 40 // an entry of a type's keys
	// clientBytes is what a client takes beside its structs: its list (clientStructs,
	// its first chunk and the lists of chunks), its entry in the document's clients, and
	// while an update decodes, its entry in the update's.
	clientBytes = int64(unsafe.Sizeof(clientStructs{})) + 3*24 + 8 + 48 + int64(unsafe.Sizeof(structRefs{}))
	// jsonFactor bounds what encoding/json builds per byte of a JSON string (ContentJSON,
	// embeds, formats): "[]," becomes a slot and a slice header.
	jsonFactor = 16
	// textCopies is how many times a document's text is held: in its items, and in the
	// strings read from it (a notebook's served sources): a cell of 120 MB held both.
	textCopies = 2
	// recountMin is how much a document's charge grows past twice its last measure
	// before it is measured again.
	recountMin = 256 << 10
)

// SetMeter charges d's memory to m from now on, what d holds already included; nil
// gives it back and stops counting.
func (d *Doc) SetMeter(m Meter) {
	if d.meter != nil {
		d.meter.Add(-d.held)
	}
	d.meter, d.held, d.counted = m, 0, 0
	if m != nil {
		d.held = d.size()
		d.counted = d.held
		m.Add(d.held)
	}
}

// Held returns the memory d is charged for on its Meter: an upper estimate of what it
// holds; 0 without a meter.
func (d *Doc) Held() int64 { return d.held }

// limit returns the decoder's limit for d's next update: what its meter has left.
func (d *Doc) limit() int64 {
	if d.meter == nil {
		return 0
	}
	return max(d.meter.Left(), 1)
}

// charge counts an applied update's decoded memory, and measures d again when its
// charge doubled since it last did.
func (d *Doc) charge(n int64) {
	if d.meter == nil {
		return
	}
	d.held += n
	d.meter.Add(n)
	if d.held > 2*d.counted+recountMin {
		d.recount()
	}
}

// recount measures what d holds and settles its charge to that.
func (d *Doc) recount() {
	if d.meter == nil {
		return
	}
	n := d.size()
	d.meter.Add(n - d.held)
	d.held, d.counted = n, n
}

// size measures the memory d holds by the model decoding counts with.
func (d *Doc) size() int64 {
	var n int64
	for _, cs := range d.clients {
		n += clientBytes + 24*int64(cap(cs.chunks)) + 8*int64(cap(cs.starts)) + rangeBytes*int64(cap(cs.skipped))
		for _, ch := range cs.chunks {
			n += 8 * int64(cap(ch)-len(ch)) // the items' slots are theirs
		}
		for it := range cs.all() {
			n += itemSize(it)
		}
	}
	for _, list := range d.pending {
		for _, it := range list {
			n += itemSize(it)
		}
	}
	for _, rs := range d.pendingDS {
		n += rangeBytes * int64(cap(rs))
	}
	for _, t := range d.roots {
		n += typeBytes + int64(len(t.name)) + keyBytes*int64(len(t.keys))
	}
	return n
}

// itemSize is what a struct holds: itself, its explicit parent and key, its content.
func itemSize(it *item) int64 {
	n := itemBytes + textCopies*int64(len(it.text))
	if x := it.ext; x != nil && x.shared == nil {
		n += extBytes + int64(len(x.pref.name)+len(x.sub))
	}
	if it.flags&flagHasParentSub != 0 {
		n += keyBytes
	}
	// a Type or values' holder allocated with the item (newItem) is held as long as the
	// item is, its content collected or not
	if it.flags&flagOwnType != 0 {
		n += typeBytes
	}
	if it.flags&flagOwnVals != 0 {
		n += valsBytes
	}
	switch v := it.val.(type) {
	case nil:
	case *anyVals:
		if it.flags&flagOwnVals == 0 {
			n += valsBytes
		}
		n += lib0.SlotBytes * int64(len(v.s))
		for _, e := range v.s {
			n += lib0.Size(e)
		}
	case []byte:
		n += int64(len(v)) + 24
	case *format:
		n += int64(unsafe.Sizeof(format{})+uintptr(len(v.key))) + lib0.Size(v.val)
	case *Type:
		if it.flags&flagOwnType == 0 {
			n += typeBytes
		}
		n += int64(len(v.name)) + keyBytes*int64(len(v.keys))
	case *Doc:
		n += docBytes + int64(len(v.guid)) + lib0.Size(v.opts)
	default: // an embed's value
		n += lib0.Size(v)
	}
	return n
}
