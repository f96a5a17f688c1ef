// Package bench holds the engine benchmarks: bench/run.sh generates the corpus and compares
// ystore/yjs and ystore/ynotebook with yjs and ywasm in Node; memory_test.go measures one
// notebook's memory against its history (YMEM=1), inspect_test.go the memory of `inspect`
// against a store's rows and live content beside yjs and pycrdt (YINSPECT=DIR,
// bench/inspect.sh), see docs/BENCHMARKS.md.
package bench
