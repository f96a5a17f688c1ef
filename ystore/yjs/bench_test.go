package yjs

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"reflect"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/lib0"
)

// loadCorpus reads testdata/bench/notebook.bin.gz (written by
// testdata/yjs-golden/bench-corpus.mjs): 100k updates of a notebook editing history.
func loadCorpus(tb testing.TB) [][]byte {
	tb.Helper()
	f, err := os.Open("testdata/bench/notebook.bin.gz")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	var ups [][]byte
	d := lib0.NewDecoder(raw)
	for d.Remaining() > 0 {
		ups = append(ups, d.VarStringBytes("update"))
	}
	if err := d.Err(); err != nil {
		tb.Fatal(err)
	}
	return ups
}

func corpusJSON(d *Doc) any {
	return stringifyLike(map[string]any{"cells": ToJSON(d.Array("cells")), "meta": ToJSON(d.Map("meta"))})
}

func TestBenchCorpus(t *testing.T) {
	ups := loadCorpus(t)
	d := NewDoc()
	for _, u := range ups {
		mustApply(t, d, u)
	}
	b, err := os.ReadFile("testdata/bench/notebook.json")
	if err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if got := corpusJSON(d); !reflect.DeepEqual(got, want) {
		t.Fatal("corpus JSON differs from Yjs")
	}
	state, err := d.EncodeStateAsUpdate(nil)
	if err != nil {
		t.Fatal(err)
	}
	d2 := NewDoc()
	mustApply(t, d2, state)
	if got := corpusJSON(d2); !reflect.DeepEqual(got, want) {
		t.Fatal("re-encoded corpus JSON differs from Yjs")
	}
}

// BenchmarkApplyUpdateHistory applies the 100k-update notebook history to a fresh
// document per iteration; ns/op and allocs/op are per whole history.
func BenchmarkApplyUpdateHistory(b *testing.B) {
	ups := loadCorpus(b)
	size := 0
	for _, u := range ups {
		size += len(u)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		d := NewDoc()
		for _, u := range ups {
			if _, err := d.ApplyUpdate(u); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// bigUpdate returns one update of at least minSize bytes: the corpus state copied under
// disjoint client ids, as if many groups had edited the same notebook concurrently.
func bigUpdate(tb testing.TB, minSize int) []byte {
	tb.Helper()
	d := NewDoc()
	for _, u := range loadCorpus(tb) {
		mustApply(tb, d, u)
	}
	state, err := d.EncodeStateAsUpdate(nil)
	if err != nil {
		tb.Fatal(err)
	}
	var parts [][]byte
	for n, shift := 0, uint64(0); n < minSize; shift += 1 << 32 {
		p := remapClients(tb, state, shift)
		parts = append(parts, p)
		n += len(p)
	}
	return concatUpdates(tb, parts)
}

// remapClients re-encodes update with every client id increased by shift.
func remapClients(tb testing.TB, update []byte, shift uint64) []byte {
	tb.Helper()
	u, err := decodeUpdate(update)
	if err != nil {
		tb.Fatal(err)
	}
	mv := func(id *ID) { id.Client += shift }
	var e lib0.Encoder
	e.VarUint(uint64(len(u.refs)))
	for c, r := range u.refs {
		e.VarUint(uint64(len(r.refs)))
		e.VarUint(c + shift)
		e.VarUint(r.refs[0].id.Clock)
		for _, it := range r.refs {
			mv(&it.origin)
			mv(&it.rightOrigin)
			if it.pref != nil {
				mv(&it.pref.id)
			}
			writeStruct(&e, it, 0)
		}
	}
	ds := map[uint64][]dsRange{}
	for c, rs := range u.ds {
		ds[c+shift] = rs
	}
	writeDeleteSet(&e, ds)
	return e.Buf
}

// concatUpdates joins updates with disjoint clients into one.
func concatUpdates(tb testing.TB, parts [][]byte) []byte {
	tb.Helper()
	var structs, dels bytes.Buffer
	nStructs, nDels := uint64(0), uint64(0)
	for _, p := range parts {
		d := lib0.NewDecoder(p)
		n := d.VarUint("clients")
		nStructs += n
		_ = n
		u, err := decodeUpdate(p)
		if err != nil {
			tb.Fatal(err)
		}
		var e lib0.Encoder
		for c, r := range u.refs {
			e.VarUint(uint64(len(r.refs)))
			e.VarUint(c)
			e.VarUint(r.refs[0].id.Clock)
			for _, it := range r.refs {
				writeStruct(&e, it, 0)
			}
		}
		structs.Write(e.Buf)
		e.Buf = nil
		for c, rs := range u.ds {
			nDels++
			e.VarUint(c)
			e.VarUint(uint64(len(rs)))
			for _, r := range rs {
				e.VarUint(r.clock)
				e.VarUint(r.length)
			}
		}
		dels.Write(e.Buf)
	}
	var e lib0.Encoder
	e.VarUint(nStructs)
	e.Buf = append(e.Buf, structs.Bytes()...)
	e.VarUint(nDels)
	e.Buf = append(e.Buf, dels.Bytes()...)
	return e.Buf
}

// BenchmarkApplyUpdate10MB applies one update of about 10 MB to a fresh document.
func BenchmarkApplyUpdate10MB(b *testing.B) {
	big := bigUpdate(b, 10<<20)
	b.SetBytes(int64(len(big)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewDoc().ApplyUpdate(big); err != nil {
			b.Fatal(err)
		}
	}
}
