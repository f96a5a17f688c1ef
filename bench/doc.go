// Package bench holds the engine benchmarks: bench/ratios.sh measures in one run the
// ratios the engine and the notebook layer are held to (against pycrdt, ywasm, yjs and
// @jupyter/ydoc) and fails when one is short of its guard; bench/run.sh and
// bench/notebook.sh compare ystore/yjs and ystore/ynotebook with yjs and ywasm in Node
// in detail (bench_test.go applies the corpus's updates, notebook_test.go times the
// notebook layer's workloads); memory_test.go measures one notebook's memory against its history (YMEM=1),
// inspect_test.go the memory of `inspect` against a store's rows and live content beside
// yjs and pycrdt (YINSPECT=DIR, bench/inspect.sh), crafted_test.go what rows crafted to
// cost more than linear time cost the engine and pycrdt (YCRAFTED=N), follow_test.go what
// following rows that grow one cell costs a room (YFOLLOW=N). See docs/BENCHMARKS.md.
package bench
