package yjs

import (
	"runtime"
	"testing"
	"weak"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/lib0"
)

// prepend is the update of client typing a character at the start of text t, its clock
// in the sequence: each character an item of its own (none merge), as typing at the front,
// or two people typing into each other's text, leave them.
func prepend(client, clock uint64, ch byte) []byte {
	var e lib0.Encoder
	e.VarUint(1) // one client's structs
	e.VarUint(1)
	e.VarUint(client)
	e.VarUint(clock)
	if clock == 0 {
		e.Uint8(kindString)
		e.VarUint(1) // parent: a root, by name
		e.VarString("t")
	} else {
		e.Uint8(kindString | infoRightOrigin)
		e.VarUint(client)
		e.VarUint(clock - 1)
	}
	e.VarString(string(ch))
	e.VarUint(0) // no deletes
	return e.Buf
}

// deletes is the update deleting the ranges [clock, clock+len) of client.
func deletes(client uint64, ranges ...[2]uint64) []byte {
	var e lib0.Encoder
	e.VarUint(0)
	e.VarUint(1)
	e.VarUint(client)
	e.VarUint(uint64(len(ranges)))
	for _, r := range ranges {
		e.VarUint(r[0])
		e.VarUint(r[1])
	}
	return e.Buf
}

// Text typed over many updates is decoded into shared chunks; once most of it is deleted,
// CompactText leaves no chunk alive for the few characters that remain, and the text is
// the same.
func TestCompactTextFreesDeletedText(t *testing.T) {
	const client = 7
	d := NewDoc()
	for k := range uint64(2 * arenaChunk) {
		if _, err := d.ApplyUpdate(prepend(client, k, 'a'+byte(k%26))); err != nil {
			t.Fatal(err)
		}
	}
	// One character of each chunk stays: the first each chunk holds.
	if _, err := d.ApplyUpdate(deletes(client, [2]uint64{1, arenaChunk - 1}, [2]uint64{arenaChunk + 1, arenaChunk - 1})); err != nil {
		t.Fatal(err)
	}
	want := d.Text("t").String()
	if want != string('a'+byte(arenaChunk%26))+"a" {
		t.Fatalf("text %q before compacting", want)
	}
	cs := d.clients[client]
	var chunks []weak.Pointer[byte]
	for _, clock := range []uint64{0, arenaChunk} {
		it := cs.at(cs.find(clock))
		chunks = append(chunks, weak.Make(&it.text[0]))
	}
	d.CompactText()
	runtime.GC()
	for i, c := range chunks {
		if c.Value() != nil {
			t.Fatalf("chunk %d, holding %d characters of deleted text, outlives CompactText", i, arenaChunk-1)
		}
	}
	if got := d.Text("t").String(); got != want {
		t.Fatalf("text %q after compacting, %q before", got, want)
	}
	runtime.KeepAlive(d)
}
