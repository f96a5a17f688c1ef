package yjs

import (
	"errors"
	"fmt"
	"iter"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/lib0"
)

// Sentinel errors wrapped by *DecodeError.
var (
	// ErrUnexpectedEOF reports an update that ends in the middle of a value.
	ErrUnexpectedEOF = lib0.ErrUnexpectedEOF
	// ErrOverflow reports a number beyond 2^53-1, a clock range past it, or too deep nesting.
	ErrOverflow = lib0.ErrOverflow
	// ErrInvalid reports a well framed but impossible value (unknown struct or content
	// kind, unknown type ref or Any tag, bad UTF-8 or JSON, a struct referring to a later
	// struct of its own client).
	ErrInvalid = lib0.ErrInvalid
)

// MaxDepth bounds the nesting of shared types inside each other, as lib0.MaxDepth bounds
// Any values: a type held by a root has depth 1, and an update that would put a type
// deeper than MaxDepth is refused. Notebooks nest a handful of levels (cells, a cell, its
// outputs, an output, its text).
const MaxDepth = lib0.MaxDepth

// ErrTooDeep reports an update that would nest shared types deeper than MaxDepth.
var ErrTooDeep = errors.New("shared types nested too deep")

// DepthError names the item of a type that an update would nest deeper than MaxDepth;
// it wraps ErrTooDeep.
type DepthError struct {
	ID ID
}

// Error implements error.
func (e *DepthError) Error() string {
	return fmt.Sprintf("type %d:%d nested more than %d deep: %v", e.ID.Client, e.ID.Clock, MaxDepth, ErrTooDeep)
}

// Unwrap returns ErrTooDeep.
func (e *DepthError) Unwrap() error { return ErrTooDeep }

// ErrWork reports a document whose updates made its integration pass the work bound
// (Doc's workBase and workPerStruct): the YATA conflict scan, pending deletes or
// pending structs tried again.
var ErrWork = errors.New("past the work bound")

// WorkError names the item (or delete range, or pending struct) whose work passed the
// work bound, and which work it was; it wraps ErrWork.
type WorkError struct {
	ID   ID
	What string // "conflict scan", "pending deletes" or "pending structs"
}

// Error implements error.
func (e *WorkError) Error() string {
	return fmt.Sprintf("item %d:%d: %s %v", e.ID.Client, e.ID.Clock, e.What, ErrWork)
}

// Unwrap returns ErrWork.
func (e *WorkError) Unwrap() error { return ErrWork }

// ErrBadParent reports an item whose parent is an item of content other than a type
// and not deleted: an update that does not belong to the document's history.
var ErrBadParent = errors.New("item parent is not a shared type")

// ParentError names an item whose parent is not a type, and that parent; it wraps
// ErrBadParent.
type ParentError struct {
	ID     ID
	Parent ID
}

// Error implements error.
func (e *ParentError) Error() string {
	return fmt.Sprintf("item %d:%d has parent %d:%d, neither deleted nor a type: %v",
		e.ID.Client, e.ID.Clock, e.Parent.Client, e.Parent.Clock, ErrBadParent)
}

// Unwrap returns ErrBadParent.
func (e *ParentError) Unwrap() error { return ErrBadParent }

// DecodeError names the byte offset at which an update failed to decode and what was
// expected there; it wraps one of the sentinel errors.
type DecodeError = lib0.DecodeError

// UndefinedType is the type of Undefined.
type UndefinedType = lib0.UndefinedType

// Undefined is JavaScript's undefined (Any tag 127, or a ContentJSON "undefined").
var Undefined = lib0.Undefined

// ID identifies a struct: the client that created it and its logical clock.
type ID struct {
	Client uint64
	Clock  uint64
}

// Kind is the kind of a shared type.
type Kind uint8

// Type kinds. KindUnknown is a root that updates referred to but nobody asked for yet.
const (
	KindUnknown Kind = iota
	KindArray
	KindMap
	KindText
	KindXmlElement
	KindXmlFragment
	KindXmlHook
	KindXmlText
)

// typeRefKinds maps Yjs type refs (ContentType) to kinds.
var typeRefKinds = [...]Kind{KindArray, KindMap, KindText, KindXmlElement, KindXmlFragment, KindXmlHook, KindXmlText}

// typeRef returns the Yjs type ref of a kind.
func typeRef(k Kind) uint64 { return uint64(k - KindArray) }

// Type is a shared type of any kind: the common handle behind *Map, *Array, *Text and the
// XML types. Pointers are stable for the lifetime of the document.
type Type struct {
	doc    *Doc
	kind   Kind
	depth  int32  // nesting below the root: 0 for roots, at most MaxDepth
	name   string // root name, or XML node / hook name
	item   *item  // the item holding this type; nil for roots
	start  *item  // first item of the sequence
	keys   map[string]*item
	length int // countable, visible sequence length
}

// Map is a Y.Map (or the attribute side of an XML element).
type Map Type

// Array is a Y.Array.
type Array Type

// Text is a Y.Text.
type Text Type

// XmlElement is a Y.XmlElement.
type XmlElement Type

// XmlFragment is a Y.XmlFragment.
type XmlFragment Type

// XmlHook is a Y.XmlHook.
type XmlHook Type

// XmlText is a Y.XmlText.
type XmlText Type

// Kind returns the kind of t.
func (t *Type) Kind() Kind { return t.kind }

// Name returns the root name for roots, the node name of an XmlElement, the hook name of
// an XmlHook, and "" otherwise.
func (t *Type) Name() string { return t.name }

// Root reports whether t is a root type of its document.
func (t *Type) Root() bool { return t.item == nil }

// Deleted reports whether t has been deleted from its parent.
func (t *Type) Deleted() bool { return t.item != nil && t.item.deleted() }

// Parent returns the type containing t and, when that parent holds t under a map key,
// the key (hasKey true). It returns nil for roots.
func (t *Type) Parent() (parent *Type, key string, hasKey bool) {
	if t.item == nil {
		return nil, "", false
	}
	return t.item.parent, t.item.sub(), t.item.flags&flagHasParentSub != 0
}

// Index returns the position of t in its parent's sequence, or -1 when t is held under a
// map key, is a root, or is deleted.
func (t *Type) Index() int {
	it := t.item
	if it == nil || it.flags&flagHasParentSub != 0 || it.deleted() {
		return -1
	}
	n := 0
	for l := it.left; l != nil; l = l.left {
		if l.visible() {
			n += int(l.length)
		}
	}
	return n
}

// Left returns the nearest type before t in its parent's sequence that is not deleted,
// passing over deleted items and other content; nil when there is none or t is held
// under a map key, is a root, or is deleted.
func (t *Type) Left() *Type {
	it := t.item
	if it == nil || it.flags&flagHasParentSub != 0 || it.deleted() {
		return nil
	}
	for l := it.left; l != nil; l = l.left {
		if l.kind == kindType && !l.deleted() {
			return l.typ()
		}
	}
	return nil
}

// Value returns t as its concrete kind: *Map, *Array, *Text, *XmlElement, *XmlFragment,
// *XmlHook or *XmlText; a type of unknown kind is returned as *Type.
func (t *Type) Value() any {
	switch t.kind {
	case KindArray:
		return (*Array)(t)
	case KindMap:
		return (*Map)(t)
	case KindText:
		return (*Text)(t)
	case KindXmlElement:
		return (*XmlElement)(t)
	case KindXmlFragment:
		return (*XmlFragment)(t)
	case KindXmlHook:
		return (*XmlHook)(t)
	case KindXmlText:
		return (*XmlText)(t)
	}
	return t
}

// Type returns the common handle of m.
func (m *Map) Type() *Type { return (*Type)(m) }

// Type returns the common handle of a.
func (a *Array) Type() *Type { return (*Type)(a) }

// Type returns the common handle of t.
func (t *Text) Type() *Type { return (*Type)(t) }

// Type returns the common handle of x.
func (x *XmlElement) Type() *Type { return (*Type)(x) }

// Type returns the common handle of x.
func (x *XmlFragment) Type() *Type { return (*Type)(x) }

// Type returns the common handle of x.
func (x *XmlHook) Type() *Type { return (*Type)(x) }

// Type returns the common handle of x.
func (x *XmlText) Type() *Type { return (*Type)(x) }

// Get returns the current value under key, like Y.Map.get.
func (m *Map) Get(key string) (any, bool) { return (*Type)(m).mapGet(key) }

// Keys returns the keys that currently hold a value, sorted.
func (m *Map) Keys() []string { return (*Type)(m).mapKeys() }

// Len returns the number of keys that currently hold a value.
func (m *Map) Len() int { return len((*Type)(m).mapKeys()) }

// Len returns the number of elements, like Y.Array.length.
func (a *Array) Len() int { return a.length }

// Values returns the elements, like Y.Array.toArray.
func (a *Array) Values() []any { return (*Type)(a).values() }

// Get returns the element at index i.
func (a *Array) Get(i int) (any, bool) { return (*Type)(a).valueAt(i) }

// All yields the elements in order, each with the ID of the clock holding it. An ID names
// its element for good: the value at a clock never changes (a shared type's own content
// may).
func (a *Array) All() iter.Seq2[ID, any] { return (*Type)(a).elements }

// String returns the text content, ignoring embeds and formatting like Y.Text.toString.
func (t *Text) String() string { return (*Type)(t).text() }

// Len returns the length of the text in UTF-16 code units, like Y.Text.length.
func (t *Text) Len() int { return t.length }

// Children returns the element's children.
func (x *XmlElement) Children() []any { return (*Type)(x).values() }

// Children returns the fragment's children.
func (x *XmlFragment) Children() []any { return (*Type)(x).values() }

// HookName returns the hook name.
func (x *XmlHook) HookName() string { return x.name }

// Get returns the value under key.
func (x *XmlHook) Get(key string) (any, bool) { return (*Type)(x).mapGet(key) }

// String renders the text like Y.XmlText.toString: formatting attributes become
// enclosing tags (sorted by name, their attributes sorted by key).
func (x *XmlText) String() string { return (*Type)(x).xmlTextString() }
