package rooms

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/heap"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/library"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/versions"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// What one store may make a Set hold (Config.MaxRooms, Config.MaxBytes, Config.MaxMemory). In hub mode a
// user's store is input that user alone writes, and the process is everyone's: without a
// bound, her 20,000 tiny rooms held the process at 0.9 GB and a core for a minute and a
// half. A Set takes rooms as the store delivers them (at a load, in room key order; then
// as they appear) while it holds fewer than MaxRooms rooms, notebooks and others, and
// while the rows' bytes of its documents stay within MaxBytes. A room past a bound is
// refused: its rows are neither read nor decoded and its notebook is not served; a loaded
// room whose rows grow past MaxBytes is dropped and refused. A refused room is tried again
// when the store delivers it whole (a Reset: a re-read of the store). So a Set's load
// keeps the first rooms by key that fit, the same whatever the batches the rows come in,
// and rooms that appear later are taken while there is room: whatever a user writes, she
// only decides which of her own notebooks are served. The first refusal is logged, every one
// counted (Metrics.Refused), and a read of a notebook not held while rooms are refused
// says so (ErrOverBound).
//
// Rows' bytes are not what they cost: a few encoded bytes decode to a type, a map and an
// item of a hundred bytes or more (22 MB of nested maps held 1.34 GB). So each document
// is charged, as its updates decode, the memory it takes (yjs.Meter: an estimate within
// about 2x of the heap), against MaxMemory over all the Set's documents; an update that
// would pass it stops decoding there, and its room is refused (a load) or dropped (a
// room growing) like one past MaxBytes, with BoundMemory. The notebook served from a
// document takes up to about as much again.

// The bounds hub mode gives each user's store unless configured
// (hub.max_rooms_per_user, hub.max_store_bytes_per_user): a few times what a heavy user's
// store loads (a notebook room is loaded from its checkpoint, about its content's size),
// and one user's worst case a small part of a machine: 2,000 tiny rooms hold about
// 70 MB of heap and load in 2 s of a core.
const (
	DefaultMaxRooms        = 2000
	DefaultMaxBytes  int64 = 128 << 20
	DefaultMaxMemory int64 = 128 << 20
)

// The bounds a room is refused by, as logs and Metrics.Refused name them.
const (
	BoundRooms  = "rooms"
	BoundBytes  = "bytes"
	BoundMemory = "memory"
)

// ErrOverBound is wrapped, with library.ErrNotFound, by a read of a notebook that is not
// held while the Set has refused rooms past its bounds: it may be one of them.
var ErrOverBound = errors.New("the store is over its bound: rooms past it are not loaded")

// errOverBytes stops a load whose rows pass the bytes left under MaxBytes.
var errOverBytes = errors.New("rows past the bytes bound")

// refusedKept bounds the refused rooms a Set remembers (so that their rows are dropped
// until the store delivers them whole); past it, a refused room is forgotten, and its
// later rows are taken as a new room's when there is room again (the updates it waits
// for missing, it is served from its file until its next Reset: oracle.go).
const refusedKept = 4096

// bounds is what a Set holds against its bounds; Set.mu guards it.
type bounds struct {
	maxRooms  int   // 0: none
	maxBytes  int64 // 0: none
	maxMemory int64 // 0: none
	bytes     int64 // the rows' bytes of the rooms' documents (room.bytes summed)
	// memory is what the documents are charged (roomMeter) and what the rooms' files
	// hold (room.filesMemory); versionsHeld is what the versions kept hold (versionMeter).
	// They are counted apart from Set.mu, by the writer of a room holding the room's
	// lock.
	memory, versionsHeld atomic.Int64
	// refused is the rooms refused, by key, with the bound that refused them (at most
	// refusedKept); forgot is set once one was not remembered.
	refused map[string]string
	forgot  bool
	warned  bool // the first refusal was logged
	// filesWarned: the first notebook file not held was logged (filerooms.go).
	filesWarned bool
}

// roomMeter charges a room's document to its Set's memory bound. extra is what a load
// may take beyond the bound: what the document it replaces holds, given back when that
// document is (settle).
type roomMeter struct {
	set   *Set
	extra atomic.Int64
}

func (m *roomMeter) Left() int64 { return m.set.maxMemory - m.set.memory.Load() + m.extra.Load() }

func (m *roomMeter) Add(n int64) { m.set.memory.Add(n) }

// versionMeter charges a room's versions kept to its Set's memory bound. They are a
// cache of what the budget leaves: they never refuse a document an update, and are
// forgotten, oldest first, while the documents, files and versions pass the bound.
type versionMeter struct{ set *Set }

// Left is what the Set's rooms' versions may still take: within changes.max_memory for
// all of them (each room's own bound is the same), and within the Set's memory bound
// when it has one.
func (m versionMeter) Left() int64 {
	held := m.set.versionsHeld.Load()
	left := m.set.versions.MaxMemory - held
	if m.set.maxMemory > 0 {
		left = min(left, m.set.maxMemory-m.set.memory.Load()-held)
	}
	return left
}

func (m versionMeter) Add(n int64) { m.set.versionsHeld.Add(n) }

// versionsMeter returns the meter of a room's versions: whatever the Set's memory bound,
// the versions of all its rooms share changes.max_memory (red team pass 19b, N2: 40
// rooms of a 2 MB cell each kept 16 MiB apiece, 1.7 GB in single mode).
func (r *Set) versionsMeter() versions.Meter { return versionMeter{r} }

// meter returns the meter of a document that is to replace rm's (nil: a new room), nil
// when the Set has no memory bound.
func (r *Set) meter(rm *room) *roomMeter {
	if r.maxMemory == 0 {
		return nil
	}
	m := &roomMeter{set: r}
	if rm != nil {
		rm.mu.Lock()
		if rm.nb != nil {
			m.extra.Store(rm.nb.Doc().Held())
		}
		rm.mu.Unlock()
	}
	return m
}

// meter returns m as a yjs.Meter: nil for none.
func (m *roomMeter) meter() yjs.Meter {
	if m == nil {
		return nil
	}
	return m
}

// settle ends what m may take beyond the bound: the document it replaced is gone.
func (m *roomMeter) settle() {
	if m != nil {
		m.extra.Store(0)
	}
}

// newNotebook returns an empty notebook charged to the Set's memory bound.
func (r *Set) newNotebook() *ynotebook.Notebook {
	nb := ynotebook.New()
	nb.Doc().SetMeter(r.meter(nil).meter())
	return nb
}

// overBound returns the bound a load's error says its room passes; "" for none.
func overBound(err error) string {
	switch {
	case errors.Is(err, errOverBytes):
		return BoundBytes
	case errors.Is(err, yjs.ErrBudget):
		return BoundMemory
	}
	return ""
}

// Validate reports what is wrong with c's bounds, each a *keyerr.KeyError naming its
// field in snake case (sidecar/config renames them to the daemon's keys): a negative
// bound, or a GapAfter not above 0, so call it on a Config as the daemon maps it (New
// takes 0 for the default).
func (c Config) Validate() error {
	var errs []error
	for _, b := range []struct {
		key string
		n   int64
	}{{"max_rooms", int64(c.MaxRooms)}, {"max_bytes", c.MaxBytes}, {"max_memory", c.MaxMemory}} {
		if b.n < 0 {
			errs = append(errs, keyerr.Invalid(b.key, "must be >= 0 (0: no bound), got %d", b.n))
		}
	}
	if c.GapAfter <= 0 {
		errs = append(errs, keyerr.Invalid("gap_after", "must be > 0, got %s", c.GapAfter))
	}
	return errors.Join(errs...)
}

// overMemory reports whether the Set would pass MaxMemory with n bytes more.
func (r *Set) overMemory(n int64) bool {
	return r.maxMemory > 0 && r.memory.Load()+n > r.maxMemory
}

// full reports whether the Set holds as many rooms as it may; Set.mu is held.
func (r *Set) full() bool {
	return r.maxRooms > 0 && len(r.rooms)+len(r.others) >= r.maxRooms
}

// overBytes reports whether the rooms' rows would pass MaxBytes with n bytes more;
// Set.mu is held.
func (r *Set) overBytes(n int64) bool { return r.maxBytes > 0 && r.bytes+n > r.maxBytes }

// overBound reports whether rooms are refused; Set.mu is held.
func (r *Set) overBound() bool { return len(r.refused) > 0 || r.forgot }

// admit reports whether the store's room key may be loaded whole (a Reset), besides
// pending rooms admitted but not held yet (a scan's: scan.go), and the bytes its rows may
// take (the room's own among them); a room refused is not. A room refused before is
// tried again.
func (r *Set) admit(key string, pending int) (budget int64, ok bool) {
	r.mu.Lock()
	rm, held := r.rooms[key]
	_, known := r.others[key]
	if !held && !known && r.maxRooms > 0 && len(r.rooms)+len(r.others)+pending >= r.maxRooms {
		r.mu.Unlock()
		r.refuse(key, BoundRooms)
		return 0, false
	}
	delete(r.refused, key)
	budget = -1 // none
	if r.maxBytes > 0 {
		budget = r.maxBytes - r.bytes
		if held {
			budget += rm.bytes
		}
	}
	r.mu.Unlock()
	return budget, true
}

// refuse records the room key as refused by bound, logs the Set's first refusal and
// counts it.
func (r *Set) refuse(key, bound string) {
	r.mu.Lock()
	if _, again := r.refused[key]; again {
		r.mu.Unlock()
		return
	}
	if len(r.refused) < refusedKept {
		r.refused[key] = bound
	} else {
		r.forgot = true
	}
	first := !r.warned
	r.warned = true
	held := len(r.rooms) + len(r.others)
	r.mu.Unlock()
	r.metrics.Refused(bound)
	if bound == BoundMemory {
		heap.Release() // what its decoding built before it stopped
	}
	level, msg := r.log.Debug, "room refused: past the store's bound"
	if first {
		level, msg = r.log.Warn, "the store is over its bound: rooms past it are not loaded, their notebooks not served"
	}
	level(msg, logkey.Room, key, "bound", bound, "rooms", held, "max_rooms", r.maxRooms, "max_bytes", r.maxBytes,
		"memory", r.memory.Load(), "max_memory", r.maxMemory)
}

// takeOther reports whether the rows of the room key, not a notebook's, are counted: a
// room held, or one there is room for; delivered whole (a Reset), a refused room is tried
// again.
func (r *Set) takeOther(key string, whole bool) bool {
	if whole {
		_, ok := r.admit(key, 0)
		return ok
	}
	r.mu.Lock()
	_, known := r.others[key]
	_, refused := r.refused[key]
	full := r.full()
	r.mu.Unlock()
	switch {
	case known:
		return true
	case refused:
		return false
	case full:
		r.refuse(key, BoundRooms)
		return false
	}
	return true
}

// unrefuse forgets that the room key was refused (it left the store).
func (r *Set) unrefuse(key string) {
	r.mu.Lock()
	delete(r.refused, key)
	r.mu.Unlock()
}

// hold returns the room of info that rows of n bytes are applied to, made if new and
// their bytes counted; nil when they are not applied: the room is refused, or is past
// MaxBytes with them (then over is the room, to be dropped).
func (r *Set) hold(info ystore.Room, n int64) (rm, over *room) {
	r.mu.Lock()
	rm, ok := r.rooms[info.Key]
	if !ok {
		_, refused := r.refused[info.Key]
		switch {
		case refused:
			r.mu.Unlock()
			return nil, nil
		case r.full():
			r.mu.Unlock()
			r.refuse(info.Key, BoundRooms)
			return nil, nil
		case r.overBytes(n):
			r.mu.Unlock()
			r.refuse(info.Key, BoundBytes)
			return nil, nil
		}
		rm = &room{info: info, nb: r.newNotebook()}
		r.rooms[info.Key] = rm
	}
	rm.mu.Lock()
	base := rm.bytes
	if rm.nb == nil || rm.detached {
		base = 0 // the rows start a new document (update)
	}
	rm.mu.Unlock()
	if r.overBytes(n - rm.bytes + base) {
		r.mu.Unlock()
		return nil, rm
	}
	r.bytes += n - rm.bytes + base
	rm.bytes = base + n
	r.mu.Unlock()
	return rm, nil
}

// notHeld is the error of a read of path p, which no room held serves.
func (r *Set) notHeld(p string) error {
	r.mu.RLock()
	over := r.overBound()
	r.mu.RUnlock()
	if !over {
		return fmt.Errorf("notebook %q: %w", p, library.ErrNotFound)
	}
	return fmt.Errorf("notebook %q: %w among the rooms loaded (at most %d rooms, %d bytes of rows and %d bytes of memory; 0: no bound): %w",
		p, library.ErrNotFound, r.maxRooms, r.maxBytes, r.maxMemory, ErrOverBound)
}
