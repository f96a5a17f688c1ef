// Package versions gives a served notebook its version and keeps the snapshots of its
// recent versions. A version is a content address, not a counter of this process:
// "v1." and the base64url of the first 16 bytes of a SHA-256 over the notebook's
// identity (its scope, such as a hub user, and its room) and its content as served (the
// notebook-level members and each cell's JSON value, in order: digest.go). Two
// sidecars of one release following one store, or one restarted, give the same content
// of the same room the same version; a room whose content returns to an earlier state
// gets the earlier version back, which is harmless since a snapshot kept under a version
// is that content. Hashing is cheap: cells are immutable and shared between snapshots, so
// each cell is hashed once (History keeps its sum), a version costs a hash over 32 bytes
// per cell, and a changed cell costs what changed in it.
package versions

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/keyerr"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook"
)

// Prefix starts every version of this scheme.
const Prefix = "v1."

// encodedLen is the length of a version: the prefix and 16 bytes in base64url.
var encodedLen = len(Prefix) + base64.RawURLEncoding.EncodedLen(sumBytes)

// sumBytes is how much of the SHA-256 a version keeps.
const sumBytes = 16

// Defaults of Config: a room keeps the versions of the last 10 minutes, at most 1,000,
// holding at most 16 MiB besides what it serves.
const (
	DefaultMaxVersions = 1000
	DefaultMaxAge      = 10 * time.Minute
	DefaultMaxMemory   = 16 << 20
)

// MaxVersionsLimit is the largest Config.MaxVersions.
const MaxVersionsLimit = 100_000

// Config bounds the versions a room keeps: whichever bound is met first.
type Config struct {
	MaxVersions int           // versions kept per room; 0: DefaultMaxVersions
	MaxAge      time.Duration // a version older than this is forgotten (the current one never is); 0: DefaultMaxAge
	// MaxMemory bounds what the versions kept besides the current one hold (the cells
	// each rebuilt, ynotebook.Snapshot.Footprint), in bytes; 0: DefaultMaxMemory. A cell
	// of megabytes edited a keystroke at a time keeps few versions, not a thousand
	// copies of it. (sidecar/rooms also bounds all its rooms' together by it, through
	// their Meter.)
	MaxMemory int64
}

// Defaults returns c with its zero fields set to the defaults.
func (c Config) Defaults() Config {
	if c.MaxVersions == 0 {
		c.MaxVersions = DefaultMaxVersions
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.MaxMemory == 0 {
		c.MaxMemory = DefaultMaxMemory
	}
	return c
}

// Validate reports a configuration out of bounds, each a *keyerr.KeyError
// (keyerr.ErrInvalid) naming its field in snake case (sidecar/config renames them to the
// daemon's keys); a zero field is refused, so call it on a Config as the daemon maps
// it, or after Defaults.
func (c Config) Validate() error {
	var errs []error
	if c.MaxVersions < 1 || c.MaxVersions > MaxVersionsLimit {
		errs = append(errs, keyerr.Invalid("max_versions", "must be from 1 to %d, got %d", MaxVersionsLimit, c.MaxVersions))
	}
	if c.MaxAge <= 0 {
		errs = append(errs, keyerr.Invalid("max_age", "must be > 0, got %s", c.MaxAge))
	}
	if c.MaxMemory <= 0 {
		errs = append(errs, keyerr.Invalid("max_memory", "must be > 0, got %d", c.MaxMemory))
	}
	return errors.Join(errs...)
}

// Valid reports whether v has the shape of a version (it may still be unknown).
func Valid(v string) bool {
	if len(v) != encodedLen || !strings.HasPrefix(v, Prefix) {
		return false
	}
	_, err := base64.RawURLEncoding.Strict().DecodeString(v[len(Prefix):])
	return err == nil
}

// Meter is what the memory of the versions kept is charged to (a yjs.Meter's methods):
// in hub mode, the user's memory bound.
type Meter interface {
	// Left returns the bytes that may still be taken; 0 or less: none.
	Left() int64
	// Add takes n bytes, or gives them back when n is negative.
	Add(n int64)
}

// History is one room's versions: the sums of the cells it has hashed and the snapshots
// of its recent versions. It is not safe for concurrent use (the room's lock guards it).
type History struct {
	identity []byte
	cfg      Config
	now      func() time.Time
	// meter is charged what the kept snapshots hold (SetMeter); nil: not counted.
	meter Meter

	sums  map[*ynotebook.Cell]*cellSum
	parts map[part]*partSum // the digests of the parts that took long (digest.go)
	runs  map[runKey]*runSum
	// scratch is where writeSum puts a tagged digest
	scratch [1 + sha256.Size]byte
	// added counts the digests kept since the last sweep, and kept what that sweep
	// left; keptWork is the work of the parts' digests kept, usedWork of those this
	// round used (forgetParts)
	added, kept, keptWork, usedWork int
	round                           uint32 // the Observe a sum was last used in
	hashed                          int    // the cells hashed so far

	last        *ynotebook.Snapshot // the snapshot last observed, and its version
	lastVersion string

	ring   []*kept          // oldest first; ring[len-1] is the newest
	byName map[string]*kept // the newest entry of each version in ring
	held   int64            // the bytes of the versions in ring but the newest
}

type cellSum struct {
	sum   [sha256.Size]byte
	round uint32
}

// kept is one version and the snapshot it names; bytes is the memory of its head and of
// the cells no snapshot observed just before it held, held (and charged) once a newer
// version is kept (the newest is what the room serves, counted by its owner).
type kept struct {
	version string
	snap    *ynotebook.Snapshot
	at      time.Time
	bytes   int64
}

// NewHistory returns the history of the room whose identity is scope (a hub user, ""
// outside hub mode) and room (the store's room key), kept within cfg (defaults applied);
// now is the clock (nil: time.Now).
func NewHistory(scope, room string, cfg Config, now func() time.Time) *History {
	if now == nil {
		now = time.Now
	}
	id := binary.AppendUvarint(nil, uint64(len(scope)))
	id = append(id, scope...)
	id = binary.AppendUvarint(id, uint64(len(room)))
	id = append(id, room...)
	return &History{identity: id, cfg: cfg.Defaults(), now: now, sums: map[*ynotebook.Cell]*cellSum{}, parts: map[part]*partSum{}, runs: map[runKey]*runSum{}, byName: map[string]*kept{}}
}

// SetMeter charges the memory of the versions h keeps, but the newest, to m from now on
// (nil: none): an estimate (ynotebook.Snapshot.Footprint) of what each holds that the
// one observed before it did not, the cells a change rebuilt. Past what m has left, the
// oldest versions are forgotten (never the newest), as past Config.MaxMemory.
func (h *History) SetMeter(m Meter) {
	h.Release()
	h.meter = m
	h.charge(h.held)
}

// Held returns the memory of the versions kept but the newest (charged on h's meter).
func (h *History) Held() int64 { return h.held }

// Release gives back what the versions kept were charged: h is dropped.
func (h *History) Release() { h.charge(-h.Held()) }

func (h *History) charge(n int64) {
	if h.meter != nil && n != 0 {
		h.meter.Add(n)
	}
}

// Observe returns the version of snap, the room's snapshot now, and keeps it; observing
// the snapshot last observed again costs nothing.
func (h *History) Observe(snap *ynotebook.Snapshot) string {
	if snap == h.last && h.lastVersion != "" {
		return h.lastVersion
	}
	v, fresh := h.version(snap)
	h.last, h.lastVersion = snap, v
	now := h.now()
	if n := len(h.ring); n == 0 || h.ring[n-1].version != v {
		k := &kept{version: v, snap: snap, at: now, bytes: snap.HeadFootprint() + fresh}
		if n := len(h.ring); n > 0 {
			h.held += h.ring[n-1].bytes // no longer what the room serves
			h.charge(h.ring[n-1].bytes)
		}
		h.ring = append(h.ring, k)
		h.byName[v] = k
	}
	h.evict(now)
	return v
}

// Version returns the version last observed ("" before any).
func (h *History) Version() string { return h.lastVersion }

// Kept returns the snapshot kept for version v; false when v is not kept (never seen
// here, forgotten, malformed).
func (h *History) Kept(v string) (*ynotebook.Snapshot, bool) {
	h.evict(h.now())
	k, ok := h.byName[v]
	if !ok {
		return nil, false
	}
	return k.snap, true
}

// Len returns the number of versions kept.
func (h *History) Len() int { return len(h.ring) }

// evict forgets the versions beyond the count, older than the age, past the memory
// bound or past what the meter has left, never the newest.
func (h *History) evict(now time.Time) {
	drop := max(len(h.ring)-h.cfg.MaxVersions, 0)
	held := h.held
	for _, k := range h.ring[:drop] {
		held -= k.bytes
	}
	for drop < len(h.ring)-1 && (now.Sub(h.ring[drop].at) > h.cfg.MaxAge || held > h.cfg.MaxMemory) {
		held -= h.ring[drop].bytes
		drop++
	}
	if h.meter != nil {
		for left := h.meter.Left(); drop < len(h.ring)-1 && left < 0; drop++ {
			left += h.ring[drop].bytes
		}
	}
	if drop == 0 {
		return
	}
	for _, k := range h.ring[:drop] {
		if h.byName[k.version] == k {
			delete(h.byName, k.version)
		}
		h.held -= k.bytes
		h.charge(-k.bytes)
	}
	clear(h.ring[:drop])
	h.ring = h.ring[drop:]
	if cap(h.ring) > 2*len(h.ring)+16 {
		h.ring = append([]*kept(nil), h.ring...)
	}
}

// version computes the content address of snap, hashing only the cells it has not
// hashed before; fresh is their memory (Cell.NewFootprint: what the cells they were read
// again from do not hold too).
func (h *History) version(snap *ynotebook.Snapshot) (v string, fresh int64) {
	h.round++
	h.usedWork = 0
	d := sha256.New()
	d.Write([]byte("jupyter-mcp-sidecar notebook version 3\x00"))
	d.Write(h.identity)
	hs := h.sumOf(snap.Head())
	d.Write(hs[:])
	var n [binary.MaxVarintLen64]byte
	d.Write(n[:binary.PutUvarint(n[:], uint64(snap.Len()))])
	for _, c := range snap.All() {
		s := h.sums[c]
		if s == nil {
			s = &cellSum{sum: h.sumOf(c.Object())}
			h.sums[c] = s
			h.hashed++
			fresh += c.NewFootprint()
		}
		s.round = h.round
		d.Write(s.sum[:])
	}
	// What this snapshot does not hold is forgotten now: a sum keeps its cell alive, and
	// a kept part its value (a source of 25 MB each, one a keystroke).
	for c, s := range h.sums {
		if s.round != h.round {
			delete(h.sums, c)
		}
	}
	h.forgetParts()
	var sum [sha256.Size]byte
	return Prefix + base64.RawURLEncoding.EncodeToString(d.Sum(sum[:0])[:sumBytes]), fresh
}
