// Package yjstest builds Yjs v1 updates for the tests of any package: shapes no real
// client writes, such as shared types nested far deeper than a notebook ever does.
package yjstest

import "github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/lib0"

// Yjs struct info: a ContentType item, and its flag for a parent map key.
const (
	infoType      = 7
	infoParentSub = 0x20
	refArray      = 0
	refMap        = 1
)

// Nested returns one update in which client inserts depth shared types, each inside the
// one before, from clock 0: the first in the root named root, under key (a root map's
// entry) or as the first element (a root array's) when key is empty; each next one
// likewise under key of the map before, or as the first element of the array before.
func Nested(client uint64, root, key string, depth int) []byte {
	info, ref := uint8(infoType), uint64(refArray)
	if key != "" {
		info, ref = infoType|infoParentSub, refMap
	}
	var e lib0.Encoder
	e.Buf = make([]byte, 0, 16+depth*(6+len(key)))
	e.VarUint(1) // one client with structs
	e.VarUint(uint64(depth))
	e.VarUint(client)
	e.VarUint(0) // first clock
	for clock := range uint64(depth) {
		e.Uint8(info)
		if clock == 0 {
			e.VarUint(1) // parent: a root, by name
			e.VarString(root)
		} else {
			e.VarUint(0) // parent: the type held by the struct before
			e.VarUint(client)
			e.VarUint(clock - 1)
		}
		if key != "" {
			e.VarString(key)
		}
		e.VarUint(ref)
	}
	e.VarUint(0) // no deletes
	return e.Buf
}

// infoAny is the Yjs struct info of a ContentAny item.
const infoAny = 8

// MapSet returns one update in which client, at clock 0, sets key of the root map named
// root to value (a lib0 Any: nil, bool, float64, string, []any, map[string]any), with
// no origin: among concurrent sets of the key, the highest client's wins. It is how a
// test makes a change no store row holds, or writes a state-only row (state.dirty).
func MapSet(client uint64, root, key string, value any) []byte {
	var e lib0.Encoder
	e.VarUint(1) // one client with structs
	e.VarUint(1) // one struct
	e.VarUint(client)
	e.VarUint(0) // clock
	e.Uint8(infoAny | infoParentSub)
	e.VarUint(1) // parent: a root, by name
	e.VarString(root)
	e.VarString(key)
	e.VarUint(1) // one value
	e.Any(value)
	e.VarUint(0) // no deletes
	return e.Buf
}
