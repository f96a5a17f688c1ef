// Package heap returns to the system, at a bounded rate, the garbage a large piece of work
// left: the rows a load read and the copies it made, what a refused room built before it
// stopped, a large read's answer once written. Left to the runtime, that garbage stays in
// the heap until it grows again, and in the process's memory until the scavenger returns
// it (a notebook of 120 MB held 1.1 GB after its load: red team of issue 39, passes 6-8).
// The runtime's heap is the process's, so the rate is too.
package heap

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Every is how often, at most, the process collects (Release); Large is the size of the
// work (bytes read, built or refused) past which it is worth it.
const (
	Every       = 10 * time.Second
	Large int64 = 16 << 20
)

// last is when Release last collected, in Unix nanoseconds.
var last atomic.Int64

// Release collects the garbage and returns it to the system, at most once every Every:
// call it once a large piece of work is done and what it built is garbage. It collects
// twice: what a sync.Pool holds (encoding/json keeps the buffer it encoded a large answer
// in, grown to up to twice its size) outlives one collection.
func Release() {
	now, prev := time.Now().UnixNano(), last.Load()
	if now-prev < int64(Every) || !last.CompareAndSwap(prev, now) {
		return
	}
	runtime.GC()
	debug.FreeOSMemory()
}
