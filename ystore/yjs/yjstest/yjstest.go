// Package yjstest builds Yjs v1 updates for the tests of any package: shapes no real
// client writes, such as shared types nested far deeper than a notebook ever does.
package yjstest

import (
	"strconv"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/lib0"
)

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
	var e lib0.Encoder
	e.Buf = make([]byte, 0, 16+depth*(6+len(key)))
	e.VarUint(1) // one client with structs
	nested(&e, client, root, key, key, depth)
	e.VarUint(0) // no deletes
	return e.Buf
}

// Chains returns one update in which each of n clients, from client first on, makes a
// Nested chain of maps depth deep under a key of its own of the root map root: a
// store's worth of memory in few bytes.
func Chains(first uint64, root string, n, depth int) []byte {
	var e lib0.Encoder
	e.VarUint(uint64(n))
	for i := range n {
		c := first + uint64(i)
		nested(&e, c, root, "c"+strconv.FormatUint(c, 10), "k", depth)
	}
	e.VarUint(0)
	return e.Buf
}

// nested writes the structs of one client's chain: its first type under top in the
// root, each next one under key of the one before.
func nested(e *lib0.Encoder, client uint64, root, top, key string, depth int) {
	info, ref := uint8(infoType), uint64(refArray)
	if key != "" {
		info, ref = infoType|infoParentSub, refMap
	}
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
		switch {
		case key == "":
		case clock == 0:
			e.VarString(top)
		default:
			e.VarString(key)
		}
		e.VarUint(ref)
	}
}

// infoAny is the Yjs struct info of a ContentAny item.
const infoAny = 8

// MapSet returns one update in which client, at clock 0, sets key of the root map named
// root to value (a lib0 Any: nil, bool, float64, string, []any, map[string]any), with
// no origin: among concurrent sets of the key, the highest client's wins. It is how a
// test makes a change no store row holds, or writes a state-only row (state.dirty).
func MapSet(client uint64, root, key string, value any) []byte {
	return MapSetAt(client, 0, root, key, value)
}

// MapSetAt is MapSet at clock: what client's clocks before it hold is not in the update.
func MapSetAt(client, clock uint64, root, key string, value any) []byte {
	var e lib0.Encoder
	e.VarUint(1) // one client with structs
	e.VarUint(1) // one struct
	e.VarUint(client)
	e.VarUint(clock)
	e.Uint8(infoAny | infoParentSub)
	e.VarUint(1) // parent: a root, by name
	e.VarString(root)
	e.VarString(key)
	e.VarUint(1) // one value
	e.Any(value)
	e.VarUint(0) // no deletes
	return e.Buf
}

// String content and Yjs struct info flags for an origin.
const (
	infoString      = 4
	infoOrigin      = 0x80
	infoRightOrigin = 0x40
)

// Keys returns one update in which client, from clock 0, sets n keys of the root map
// named root ("k0", "k1", …) to null: a flat map as wide as the update is long.
func Keys(client uint64, root string, n int) []byte {
	return keyed(client, root, "k", n, infoAny, func(e *lib0.Encoder, _ int) {
		e.VarUint(1) // one value
		e.Any(nil)
	})
}

// keyed returns one update in which client, from clock 0, sets n keys of the root map
// named root (prefix and 0, 1, …) to items of kind info whose content each writes.
func keyed(client uint64, root, prefix string, n int, info uint8, content func(e *lib0.Encoder, i int)) []byte {
	var e lib0.Encoder
	e.VarUint(1)
	e.VarUint(uint64(n))
	e.VarUint(client)
	e.VarUint(0)
	for i := range n {
		e.Uint8(info | infoParentSub)
		e.VarUint(1)
		e.VarString(root)
		e.VarString(prefix + strconv.Itoa(i))
		content(&e, i)
	}
	e.VarUint(0)
	return e.Buf
}

// Typed returns n updates in which client types "x" n times at the end of the root text
// named root, one character an update, from clock 0.
func Typed(client uint64, root string, n int) [][]byte {
	out := make([][]byte, n)
	for clock := range uint64(n) {
		out[clock] = Char(client, root, clock)
	}
	return out
}

// Char returns the update in which client types "x" at clock into the root text named
// root: after its character at clock-1, or first.
func Char(client uint64, root string, clock uint64) []byte {
	var e lib0.Encoder
	e.VarUint(1)
	e.VarUint(1)
	e.VarUint(client)
	e.VarUint(clock)
	if clock == 0 {
		e.Uint8(infoString)
		e.VarUint(1)
		e.VarString(root)
	} else {
		e.Uint8(infoString | infoOrigin)
		e.VarUint(client)
		e.VarUint(clock - 1)
	}
	e.VarString("x")
	e.VarUint(0)
	return e.Buf
}

// Deletes returns an update of deletes alone: n ranges of one clock of client, every
// step clocks from clock from.
func Deletes(client uint64, from, step uint64, n int) []byte {
	var e lib0.Encoder
	e.VarUint(0) // no structs
	e.VarUint(1)
	e.VarUint(client)
	e.VarUint(uint64(n))
	for i := range uint64(n) {
		e.VarUint(from + i*step)
		e.VarUint(1)
	}
	return e.Buf
}

// Text returns one update in which client inserts s into the root text named root, from
// clock 0, as one struct.
func Text(client uint64, root, s string) []byte { return TextAt(client, 0, root, s) }

// TextAt returns one update in which client inserts s at the start of the root text
// named root, as one struct at clock: past a gap in its clocks when clock is above 0.
func TextAt(client, clock uint64, root, s string) []byte {
	var e lib0.Encoder
	e.VarUint(1)
	e.VarUint(1)
	e.VarUint(client)
	e.VarUint(clock)
	e.Uint8(infoString)
	e.VarUint(1)
	e.VarString(root)
	e.VarString(s)
	e.VarUint(0)
	return e.Buf
}

// After returns one update in which client inserts s as one struct at clock, after the
// struct of client origin at clock originClock (of a text or array).
func After(client, clock, origin, originClock uint64, s string) []byte {
	return beside(client, clock, infoOrigin, origin, originClock, s)
}

// Before returns one update in which client inserts s as one struct at clock, before the
// struct of client right at clock rightClock (of a text or array) and after none: a line
// put first in front of the one first before.
func Before(client, clock, right, rightClock uint64, s string) []byte {
	return beside(client, clock, infoRightOrigin, right, rightClock, s)
}

// beside returns one update of one string struct with one origin, left or right (side).
func beside(client, clock uint64, side uint8, ref, refClock uint64, s string) []byte {
	var e lib0.Encoder
	e.VarUint(1)
	e.VarUint(1)
	e.VarUint(client)
	e.VarUint(clock)
	e.Uint8(infoString | side)
	e.VarUint(ref)
	e.VarUint(refClock)
	e.VarString(s)
	e.VarUint(0)
	return e.Buf
}

// Waiting returns one update in which n clients, from client first on, each insert one
// character after the struct of client on at clock from+i·step (the i-th client): with
// those clocks ahead of on's, each struct waits for them.
func Waiting(first uint64, n int, on, from, step uint64) []byte {
	return perClient(first, n, func(e *lib0.Encoder, i uint64) {
		e.Uint8(infoString | infoOrigin)
		e.VarUint(on)
		e.VarUint(from + i*step)
		e.VarString("w")
	})
}

// Clients returns one update in which n clients, from client first on, each type one
// character into the root text named root, after the character of the client before:
// a client for every struct.
func Clients(first uint64, root string, n int) []byte {
	return perClient(first, n, func(e *lib0.Encoder, i uint64) {
		if i == 0 {
			e.Uint8(infoString)
			e.VarUint(1)
			e.VarString(root)
		} else {
			e.Uint8(infoString | infoOrigin)
			e.VarUint(first + i - 1)
			e.VarUint(0)
		}
		e.VarString("x")
	})
}

// perClient returns one update of n clients from first on, each one struct at clock 0
// whose info, origins and content write writes (i counts the clients).
func perClient(first uint64, n int, write func(e *lib0.Encoder, i uint64)) []byte {
	var e lib0.Encoder
	e.VarUint(uint64(n))
	for i := range uint64(n) {
		e.VarUint(1) // one struct
		e.VarUint(first + i)
		e.VarUint(0) // clock
		write(&e, i)
	}
	e.VarUint(0)
	return e.Buf
}

// infoDoc is the Yjs struct info of a ContentDoc item.
const infoDoc = 9

// Subdocs returns one update in which client, from clock 0, sets n keys of the root map
// named root ("d0", "d1", …) to subdocuments with empty options.
func Subdocs(client uint64, root string, n int) []byte {
	return keyed(client, root, "d", n, infoDoc, func(e *lib0.Encoder, i int) {
		e.VarString(strconv.Itoa(i)) // guid
		e.Any(map[string]any{})
	})
}
