// Package reloads keeps the rooms a tailer was asked to deliver again (ystore.Reloader)
// until its Run takes them, and wakes Run when one is asked for: the bookkeeping every
// store backend that reloads shares.
package reloads

import "sync"

// Requests are the rooms asked for again. The zero value is not ready: use New.
type Requests struct {
	mu    sync.Mutex
	rooms map[string]bool
	wake  chan struct{}
}

// New returns no requests.
func New() *Requests { return &Requests{wake: make(chan struct{}, 1)} }

// Ask asks for room again and wakes the reader of Wake; it does not wait.
func (r *Requests) Ask(room string) {
	r.mu.Lock()
	if r.rooms == nil {
		r.rooms = make(map[string]bool)
	}
	r.rooms[room] = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Asked reports whether a room is asked for.
func (r *Requests) Asked() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.rooms) > 0
}

// Take returns the rooms asked for (nil: none) and forgets them.
func (r *Requests) Take() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rooms := r.rooms
	r.rooms = nil
	return rooms
}

// Wake receives after a room was asked for.
func (r *Requests) Wake() <-chan struct{} { return r.wake }
