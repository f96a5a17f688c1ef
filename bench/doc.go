// Package bench holds the engine benchmarks: bench/run.sh generates the corpus and compares
// ystore/yjs and ystore/ynotebook with yjs and ywasm in Node, see docs/BENCHMARKS.md.
package bench
