package yjs

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/lib0"
)

// The benchmarks can run on another corpus, so that bench/ can compare engines on the
// same input: YJS_BENCH_HISTORY names a file of varuint-length-prefixed v1 updates
// (gzipped when it ends in .gz), YJS_BENCH_UPDATE a file holding one v1 update.
const (
	envHistory = "YJS_BENCH_HISTORY"
	envUpdate  = "YJS_BENCH_UPDATE"
)

// loadCorpus reads testdata/bench/notebook.bin.gz (written by
// testdata/yjs-golden/bench-corpus.mjs): 100k updates of a notebook editing history.
func loadCorpus(tb testing.TB) [][]byte {
	tb.Helper()
	return readHistory(tb, "testdata/bench/notebook.bin.gz")
}

// readHistory reads length-prefixed updates from path, gunzipping a .gz file.
func readHistory(tb testing.TB, path string) [][]byte {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			tb.Fatal(err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			tb.Fatal(err)
		}
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

// TestBenchCorpus checks the engine on the benchmark corpus (written by yjs clients that
// cut surrogate pairs) against pycrdt's reading (testdata/bench/notebook-pycrdt.json,
// testdata/pycrdt-golden/differential.py corpus), and that its encoded state decodes to
// the same structs and state vector.
func TestBenchCorpus(t *testing.T) {
	d := applyAll(t, loadCorpus(t))
	b, err := os.ReadFile("testdata/bench/notebook-pycrdt.json")
	if err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	got := asJSON(map[string]any{"cells": ToJSON(d.Array("cells")), "meta": ToJSON(d.Map("meta"))})
	if !reflect.DeepEqual(got, want) {
		t.Fatal("corpus JSON differs from pycrdt's")
	}
	state, err := d.EncodeStateAsUpdate(nil)
	if err != nil {
		t.Fatal(err)
	}
	d2 := NewDoc()
	mustApply(t, d2, state)
	if !reflect.DeepEqual(d2.StateVector(), d.StateVector()) {
		t.Fatal("re-encoded corpus state vector differs")
	}
	again, err := d2.EncodeStateAsUpdate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gcMerged(t, again), gcMerged(t, state)) {
		t.Fatal("re-encoding the re-encoded corpus state changed it")
	}
}

// BenchmarkApplyUpdateHistory applies the 100k-update notebook history (or the one named
// by YJS_BENCH_HISTORY) to a fresh document per iteration; ns/op and allocs/op are per
// whole history.
func BenchmarkApplyUpdateHistory(b *testing.B) {
	ups := loadCorpus(b)
	if path := os.Getenv(envHistory); path != "" {
		ups = readHistory(b, path)
	}
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
	state, err := applyAll(tb, loadCorpus(tb)).EncodeStateAsUpdate(nil)
	if err != nil {
		tb.Fatal(err)
	}
	var parts []*update
	for n, shift := 0, uint64(0); n < minSize; shift += 1 << 32 {
		u, err := decodeUpdate(state, 0, &arena{}, nil, &update{})
		if err != nil {
			tb.Fatal(err)
		}
		parts = append(parts, shiftClients(u, shift))
		n += len(state)
	}
	return encodeUpdates(parts)
}

// shiftClients moves every client id of u up by shift.
func shiftClients(u *update, shift uint64) *update {
	out := &update{}
	for _, r := range u.refs {
		for _, it := range r.refs {
			it.id.Client += shift
			it.origin.Client += shift
			it.rightOrigin.Client += shift
			if it.flags&flagHasPref != 0 {
				it.ext.pref.id.Client += shift
			}
		}
		r.client += shift
		out.refs = append(out.refs, r)
	}
	for _, cr := range u.ds {
		out.ds = append(out.ds, clientRanges{cr.client + shift, cr.rs})
	}
	return out
}

// encodeUpdates writes decoded updates with disjoint clients as one v1 update.
func encodeUpdates(parts []*update) []byte {
	var e lib0.Encoder
	ds := map[uint64][]dsRange{}
	n := 0
	for _, u := range parts {
		n += len(u.refs)
		for _, cr := range u.ds {
			ds[cr.client] = cr.rs
		}
	}
	e.VarUint(uint64(n))
	for _, u := range parts {
		for _, r := range u.refs {
			e.VarUint(uint64(len(r.refs)))
			e.VarUint(r.client)
			e.VarUint(r.refs[0].id.Clock)
			for _, it := range r.refs {
				writeStruct(&e, it, 0)
			}
		}
	}
	writeDeleteSet(&e, ds)
	return e.Buf
}

// BenchmarkApplyUpdate10MB applies one update of about 10 MB (or the one named by
// YJS_BENCH_UPDATE) to a fresh document.
func BenchmarkApplyUpdate10MB(b *testing.B) {
	var big []byte
	if path := os.Getenv(envUpdate); path != "" {
		var err error
		if big, err = os.ReadFile(path); err != nil {
			b.Fatal(err)
		}
	} else {
		big = bigUpdate(b, 10<<20)
	}
	b.SetBytes(int64(len(big)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewDoc().ApplyUpdate(big); err != nil {
			b.Fatal(err)
		}
	}
}
