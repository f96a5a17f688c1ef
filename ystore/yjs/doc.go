// Package yjs implements Yjs v1 updates in pure Go: decoding, the CRDT document (YATA
// integration, maps, deletes, garbage collection, pending structs and deletes), state
// vectors and encoding the document state as an update that real Yjs accepts.
//
// It reads rows as yrs (pycrdt, the Jupyter server's engine) does, and follows the
// algorithms of yjs 13.6 (utils/encoding.js, structs/Item.js, utils/DeleteSet.js,
// utils/Transaction.js) where the two agree: the same splits, merges, garbage collection
// and delete sets. Where yrs differs from Yjs, it follows yrs (docs/COMPATIBILITY.md):
//   - An item whose neighbour was garbage-collected keeps the other neighbour's parent
//     (Yjs drops it).
//   - A split inside a surrogate pair keeps the character whole in the left part (Yjs
//     writes U+FFFD on both sides); encoding writes such an item as Yjs would (CutPairs).
//   - Every update is applied in a transaction of its own.
//   - A struct past a gap in its own client's clocks integrates when its origin, right
//     origin and parent are there, the gap held as a Skip struct that the missing
//     structs fill when they arrive; the state vector stops at the first Skip (Yjs keeps
//     such a struct pending). A struct that waits for a client already waited for is
//     kept pending with the rest of its client (Yjs tries that client's next struct).
//
// Other structs that wait for a missing one are kept pending and retried as both do:
// when the state of a client they wait for passes the clock they waited for. The package
// does no I/O and no logging.
//
// Where it differs from Yjs on purpose:
//   - Malformed input is rejected before anything is applied (Yjs may throw halfway):
//     numbers beyond 2^53-1, structs longer than 2^32-1, zero-length structs,
//     references to a struct of the same client that is not earlier, unknown kinds,
//     type refs and Any tags, invalid UTF-8 or JSON.
//   - Shared types nest at most MaxDepth deep (Yjs has no bound): an update that would
//     nest one deeper is refused before anything is applied, so that no walk over the
//     types recurses deeper.
//   - Items keep 32-bit lengths: adjacent structs whose lengths add up to 2^32 or more
//     are not merged.
//   - Any objects are Go maps, so re-encoding writes their keys sorted where Yjs keeps
//     insertion order; the values are the same.
//   - The document is a read-only replica: it never edits itself, where a Yjs replica
//     cleans up redundant text formatting after remote changes.
//   - Like Yjs, integration is quadratic in the number of concurrent inserts at one
//     position and in splits of one long item.
package yjs

import (
	"cmp"
	"maps"
	"slices"
)

// Doc is a Yjs document. It is not safe for concurrent use.
type Doc struct {
	clients map[uint64]*clientStructs
	roots   map[string]*Type
	// pending structs wait for missing dependencies (the state in pendingMissing);
	// pendingDS holds delete ranges beyond the known state. pendingNeeds holds, by
	// client, the smallest clock past its state that the first pending struct of a
	// client needs; unblocked says one may integrate since they were last tried (a
	// needed clock was reached, a Skip filled, a first struct dropped as known).
	// waitsTried says pendingMissing is what trying them again would record, but for
	// the states of clients that moved since.
	pending        map[uint64][]*item
	pendingMissing map[uint64]uint64
	pendingNeeds   map[uint64]uint64
	pendingDS      map[uint64][]dsRange
	unblocked      bool
	waitsTried     bool
	txn            *Txn       // the transaction being applied
	txnBuf         Txn        // every update's transaction, reset before each
	texts          arena      // decoded strings and map keys
	exts           extBuf     // the explicit parents of decoded structs
	scratch        update     // ApplyUpdate's update, decoded into the same storage each time
	one            item       // the struct of an update of one (update.one), copied if kept
	lone           bool       // the update being applied is one struct and nothing else
	csCache        [2]csEntry // the struct lists looked up last (structsOf)
	skipping       int        // the Skips of every client (clientStructs.skipped)
	conflicting    itemSet
	beforeOrigin   itemSet
	depth          depthCheck // every update's check, its memo kept for the next
	maxDepth       int32      // the depth of the deepest type integrated so far
	// failed is set when integration met a type deeper than MaxDepth that the check
	// before it did not foresee (depth.go, a *DepthError), an item whose parent is not
	// a type (a *ParentError), or work past the work bound (a *WorkError): the
	// item was dropped or misplaced, d no longer follows the writer and refuses every
	// later update.
	failed error
	// work is the conflict scan's steps d may still take (workBase and workPerStruct).
	work int64
	// guid and opts describe a subdocument found in a ContentDoc.
	guid string
	opts any
	// meter is charged held, d's memory; counted is what d measured it at last
	// (memory.go).
	meter   Meter
	held    int64
	counted int64
}

// NewDoc returns an empty document.
func NewDoc() *Doc {
	return &Doc{clients: make(map[uint64]*clientStructs), roots: make(map[string]*Type), work: workBase}
}

// The work bound: YATA's conflict scan walks every item between a new item's origins,
// so structs inserted concurrently at one place (a client each) cost a scan over all
// the earlier ones, quadratic in the rows of a crafted store (as in yrs and Yjs); and
// pending deletes and structs are tried again at updates of the clients they wait for.
// A document may take workBase steps (an item scanned, a pending range tried or sorted,
// workPerRetry for a pending client's list tried again), and more for every struct it
// integrates: workPerStruct, and workPerUnit for each unit of text or values it brings
// (a byte or more of the store), so that its work stays linear in the bytes of its
// history, about 400 steps a byte at most. Honest editing takes a few steps a struct;
// two replicas each prepending 87,000 words to one cell offline, then merged, take about
// 750 (red team pass 18b, N2); whole lines prepended offline, a struct each, take more
// the more there are (pass 18c, N4: 30,000 by 10 writers, about 6,700 a line). Past the
// bound the document fails (a *WorkError).
const (
	workBase      = 1 << 24 // about half a second of scanning
	workPerStruct = 4096
	workPerUnit   = 256 // more for each unit of text or values a struct brings
	workPerRetry  = 32  // a pending client's list tried again (about 1 µs, of 100,000)
)

// root returns the root type name, creating it with unknown kind like doc.get.
func (d *Doc) root(name string) *Type {
	t := d.roots[name]
	if t == nil {
		t = &Type{doc: d, name: name}
		d.roots[name] = t
	}
	return t
}

func (d *Doc) rootOf(name string, k Kind) *Type {
	t := d.root(name)
	if t.kind == KindUnknown {
		t.kind = k
	}
	return t
}

// Map returns the root map name, like ydoc.getMap.
func (d *Doc) Map(name string) *Map { return (*Map)(d.rootOf(name, KindMap)) }

// Array returns the root array name, like ydoc.getArray.
func (d *Doc) Array(name string) *Array { return (*Array)(d.rootOf(name, KindArray)) }

// Text returns the root text name, like ydoc.getText.
func (d *Doc) Text(name string) *Text { return (*Text)(d.rootOf(name, KindText)) }

// XmlFragment returns the root XML fragment name, like ydoc.getXmlFragment.
func (d *Doc) XmlFragment(name string) *XmlFragment {
	return (*XmlFragment)(d.rootOf(name, KindXmlFragment))
}

// Roots returns the names of the root types that updates or callers referred to, sorted.
func (d *Doc) Roots() []string { return slices.Sorted(maps.Keys(d.roots)) }

// Root returns the root type name if it exists.
func (d *Doc) Root(name string) (*Type, bool) {
	t, ok := d.roots[name]
	return t, ok
}

// StateVector returns the next expected clock of every client.
func (d *Doc) StateVector() map[uint64]uint64 {
	sv := make(map[uint64]uint64, len(d.clients))
	for c := range d.clients {
		sv[c] = d.known(c)
	}
	return sv
}

// HasPending reports whether the document lacks updates: structs or deletes wait for
// missing ones, or it holds structs past a gap in their client's clocks (a Skip).
func (d *Doc) HasPending() bool {
	return len(d.pending) > 0 || len(d.pendingDS) > 0 || d.skipping > 0
}

// Gap is a range of one client's clocks that the document lacks and pending structs or
// deletes wait for, or that later structs of the client skipped: the document holds the
// client's structs below From (its state vector's clock), and lacks some from From up
// to To (exclusive; at least From+1): all of them, but those held past a Skip.
type Gap struct {
	Client   uint64
	From, To uint64
}

// Gaps lists what the pending structs and deletes wait for and the Skips, one Gap per
// client, sorted by client; nil when nothing is pending. It changes nothing.
func (d *Doc) Gaps() []Gap {
	if !d.HasPending() {
		return nil
	}
	need := make(map[uint64]uint64) // client → one past the highest clock known missing
	note := func(c, end uint64) { need[c] = max(need[c], end) }
	for c, m := range d.pendingMissing {
		note(c, m+1) // the struct at m is missing (Yjs's missing state vector)
	}
	// A clock of client c is missing when the document does not have it and no pending
	// struct holds it.
	missing := func(id ID) {
		end := id.Clock + 1
		if list := d.pending[id.Client]; len(list) > 0 {
			end = min(end, list[0].id.Clock)
		}
		if end > d.state(id.Client) || (end > 0 && d.missing(ID{id.Client, end - 1})) {
			note(id.Client, end)
		}
	}
	for c, cs := range d.clients {
		if n := len(cs.skipped); n > 0 {
			note(c, cs.skipped[n-1].clock+cs.skipped[n-1].length)
		}
	}
	for c, list := range d.pending {
		note(c, list[0].id.Clock) // the client's own structs before its first pending one
		for _, it := range list {
			if it.kind == kindGC {
				continue
			}
			if it.hasOrigin() {
				missing(it.origin)
			}
			if it.hasRightOrigin() {
				missing(it.rightOrigin)
			}
			if it.flags&flagHasPref != 0 && it.ext.pref.isID {
				missing(it.ext.pref.id)
			}
		}
	}
	for c, ranges := range d.pendingDS {
		end := ranges[len(ranges)-1].clock + ranges[len(ranges)-1].length
		if list := d.pending[c]; len(list) > 0 {
			end = min(end, list[0].id.Clock) // deletes of pending structs wait for those
		}
		note(c, end)
	}
	var out []Gap
	for c, end := range need {
		if from := d.known(c); end > from {
			out = append(out, Gap{Client: c, From: from, To: end})
		}
	}
	slices.SortFunc(out, func(a, b Gap) int { return cmp.Compare(a.Client, b.Client) })
	return out
}

// ApplyUpdate applies a Yjs v1 update. The update is decoded completely first: a
// malformed update returns a *DecodeError and leaves d unchanged, and so does one that
// would nest a type deeper than MaxDepth, with a *DepthError. Structs whose dependencies
// are missing are kept pending and integrated when those arrive. An item whose parent is
// not a type returns a *ParentError (yrs refuses such an update; Yjs drops the item):
// d then refuses every later update. The Txn is d's own, reused by the next update:
// read it before applying another.
func (d *Doc) ApplyUpdate(update []byte) (*Txn, error) {
	if d.failed != nil {
		return nil, d.failed
	}
	defer func() {
		d.exts.reset()
		d.scratch.clear()
		d.one, d.lone = item{}, false
	}()
	d.scratch.one = &d.one
	u, err := decodeUpdate(update, d.limit(), &d.texts, &d.exts, &d.scratch)
	if err != nil {
		return nil, err
	}
	// one struct and nothing else: integrate may extend the client's last item with it
	d.lone = len(u.refs) == 1 && len(u.refs[0].refs) == 1 && u.refs[0].refs[0] == &d.one &&
		len(u.ds) == 0 && d.pending == nil && len(d.pendingDS) == 0
	return d.apply(u)
}

// Failed returns why d refuses every update (a *ParentError, *DepthError or *WorkError),
// or nil: it no longer follows its writers.
func (d *Doc) Failed() error { return d.failed }

// apply integrates a decoded update in a transaction of its own. It refuses one that
// could nest a type deeper than MaxDepth, and returns the error of one that did
// (d.failed); the transaction is nil then.
func (d *Doc) apply(u *update) (*Txn, error) {
	txn := &d.txnBuf
	txn.reset()
	txn.doc, d.txn = d, txn
	applied := false
	defer func() {
		d.cleanup(txn)
		d.txn = nil
		if applied {
			d.charge(u.spent) // after the merges, so that a measure sees them
		}
	}()
	if err := d.depth.run(d, u); err != nil {
		return nil, err
	}
	d.readUpdate(txn, u, false)
	txn.settle()
	applied = true
	if d.failed != nil {
		return nil, d.failed
	}
	return txn, nil
}

// dropKnownPending drops pending structs whose clocks the document holds since txn
// added them, by another update: integrating them again would add nothing (yrs trims a
// retried update by what it holds), yet they would stand for missing updates. Each
// client's pending structs are sorted by clock: those from the first it lacks on wait.
func (d *Doc) dropKnownPending(txn *Txn) {
	for _, b := range txn.before {
		list := d.pending[b.client]
		k := 0
		for k < len(list) && d.holds(b.client, list[k].id.Clock, list[k].end()) {
			k++
		}
		if k > 0 {
			d.unblocked = true // the struct after them may integrate
		}
		switch {
		case k == 0:
			continue
		case k == len(list):
			delete(d.pending, b.client)
		default:
			d.pending[b.client] = slices.Delete(list, 0, k)
		}
	}
	if len(d.pending) == 0 {
		d.pending, d.pendingMissing, d.pendingNeeds = nil, nil, nil
	}
}

// holds reports whether the document holds every clock of client from from up to to.
func (d *Doc) holds(client, from, to uint64) bool {
	cs := d.structsOf(client)
	return cs != nil && to <= cs.end && !cs.lacks(from, to)
}

// readUpdate integrates a decoded update like Yjs's readUpdateV2. A retry's update holds
// the document's own pending lists (owned): what still waits is kept as it is.
func (d *Doc) readUpdate(txn *Txn, u *update, owned bool) {
	rest, missing := d.integrateStructs(txn, u.refs, owned)
	retry := false
	switch {
	case d.pending != nil:
		retry = d.pendingReady(u.refs)
		d.noteReached(u.refs)
		if rest != nil {
			d.own(rest)
			for c, clock := range missing {
				if m, ok := d.pendingMissing[c]; !ok || m > clock {
					d.pendingMissing[c] = clock
				}
			}
			mergePending(d.pending, rest)
			d.noteNeeds(rest)
			d.waitsTried = false
		}
	case rest != nil && owned:
		d.pending, d.pendingMissing, d.pendingNeeds = rest, missing, nil
		d.noteNeeds(rest)
		// the waits of every pending struct, tried just now: they are what a retry
		// would record, unless a client they wait for moved during this one
		d.waitsTried = true
		for c, m := range missing {
			if m < d.state(c) {
				d.waitsTried = false
			}
		}
	case rest != nil:
		d.own(rest)
		d.pending = make(map[uint64][]*item, len(rest))
		mergePending(d.pending, rest)
		d.pendingMissing, d.pendingNeeds, d.waitsTried = missing, nil, false
		d.noteNeeds(rest)
	}
	dsRest := d.applyDeleteSet(txn, u.ds)
	if d.pendingDS != nil {
		// As yrs, the pending deletes are tried again after the update's, but only those
		// that can apply now: each lies beyond its client's state or in its Skips (what
		// applyDeletes left), so only ranges over clocks this transaction added can, from
		// the client's state before it on or in the Skips it filled. A store's row of many
		// deletes ahead of its structs, or inside a Skip of a typing client, does not
		// cost every later row all of them (red team passes 18b, N1, and 18c, N6). What
		// is tried and merged is work (workBase): past the bound the document fails.
		var again []clientRanges
		var filled map[uint64][]deleteRange
		for _, f := range txn.filled {
			if _, ok := d.pendingDS[f.client]; ok {
				if filled == nil {
					filled = make(map[uint64][]deleteRange)
				}
				filled[f.client] = append(filled[f.client], f)
			}
		}
		for i := range u.refs {
			c := u.refs[i].client
			rs, ok := d.pendingDS[c]
			if !ok {
				continue
			}
			before, added := txn.beforeOf(c)
			if !added {
				continue
			}
			try, wait, moved := newlyHeld(rs, before, d.state(c), filled[c])
			if len(try) == 0 {
				continue
			}
			if !d.spend(int64(len(try)+moved/16), ID{c, try[0].clock}, "pending deletes") {
				d.pendingDS[c] = sortAndMerge(append(wait, try...)) // rs's storage holds wait
				continue
			}
			again = append(again, clientRanges{c, try})
			if len(wait) == 0 {
				delete(d.pendingDS, c)
			} else {
				d.pendingDS[c] = wait
			}
		}
		d.mergeDeletes(dsRest)
		d.mergeDeletes(d.applyDeleteSet(txn, again))
		if len(d.pendingDS) == 0 {
			d.pendingDS = nil
		}
	} else {
		d.pendingDS = dsRest
	}
	if d.pending != nil {
		d.dropKnownPending(txn)
	}
	if retry && !d.unblocked && d.waitsTried {
		// yrs tries every pending struct again here, but none can integrate: the
		// first struct of each client's list (the rest wait for it) needs a clock
		// that is still missing, and the lists are those last tried. What the retry
		// would change is the waits: the same clients', each recorded again at its
		// state, which moved only for u's clients. So a crafted row of structs that
		// need clocks far ahead of a typing client is not tried again at each
		// keystroke (red team pass 18c, N5).
		for i := range u.refs {
			c := u.refs[i].client
			if m, ok := d.pendingMissing[c]; ok && m < d.state(c) {
				d.pendingMissing[c] = d.state(c)
			}
		}
		retry = false
	}
	if retry {
		// As yrs, every pending struct is tried again. Each client's list costs the
		// document work (workPerRetry), whether it integrates or waits on: lists that
		// need clocks a typing client reaches one after another are each tried at
		// every one, and past the bound the document fails instead.
		p := d.pending
		if !d.spend(int64(len(p))*workPerRetry, d.firstPending(), "pending structs") {
			return
		}
		d.pending, d.pendingMissing, d.pendingNeeds, d.unblocked, d.waitsTried = nil, nil, nil, false, false
		refs := make([]structRefs, 0, len(p))
		for c, list := range p {
			refs = append(refs, structRefs{client: c, refs: list})
		}
		slices.SortFunc(refs, func(a, b structRefs) int { return cmp.Compare(a.client, b.client) })
		d.readUpdate(txn, &update{refs: refs}, true)
	}
}

// noteReached records that a pending struct may integrate when a client of refs, just
// integrated, reached a clock a first pending struct needs.
func (d *Doc) noteReached(refs []structRefs) {
	for i := range refs {
		c := refs[i].client
		if need, ok := d.pendingNeeds[c]; ok && need < d.state(c) {
			d.unblocked = true
			return
		}
	}
}

// noteNeeds records what the first pending struct of each client of rest (just merged
// into the pending ones) needs: a clock past its client's state in pendingNeeds; one the
// document holds, or none, leaves it free to integrate (unblocked). A struct it needs
// in a Skip is had when the Skip is filled (addStruct). A struct past a gap too long for
// one Skip needs its client's state to come within maxLength of it.
func (d *Doc) noteNeeds(rest map[uint64][]*item) {
	need := func(id ID) bool {
		if !d.missing(id) {
			return false
		}
		if id.Clock >= d.state(id.Client) {
			if d.pendingNeeds == nil {
				d.pendingNeeds = make(map[uint64]uint64)
			}
			if m, ok := d.pendingNeeds[id.Client]; !ok || id.Clock < m {
				d.pendingNeeds[id.Client] = id.Clock
			}
		}
		return true
	}
	for c := range rest {
		list := d.pending[c]
		if len(list) == 0 {
			continue
		}
		it := list[0]
		lacks := false
		if local := d.state(c); it.id.Clock > local && it.id.Clock-local > maxLength {
			lacks = need(ID{c, it.id.Clock - maxLength - 1})
		}
		if it.hasOrigin() {
			lacks = need(it.origin) || lacks
		}
		if it.hasRightOrigin() {
			lacks = need(it.rightOrigin) || lacks
		}
		if it.flags&flagHasPref != 0 && it.ext.pref.isID {
			lacks = need(it.ext.pref.id) || lacks
		}
		if !lacks {
			d.unblocked = true
		}
	}
}

// newlyHeld splits a client's pending delete ranges (sorted, apart) into those over
// clocks a transaction added (from before, the client's state before it, up to state, or
// in the Skips it filled) and the others, in order; wait reuses the storage of rs, and
// moved counts the ranges moved to close the gap (the smaller side, when those tried are
// one run).
func newlyHeld(rs []dsRange, before, state uint64, filled []deleteRange) (try, wait []dsRange, moved int) {
	endAfter := func(clock uint64) int {
		k, _ := slices.BinarySearchFunc(rs, clock, func(r dsRange, c uint64) int {
			if r.clock+r.length <= c {
				return -1
			}
			return 1
		})
		return k
	}
	lo := endAfter(before)
	hi, _ := slices.BinarySearchFunc(rs, state, func(r dsRange, s uint64) int { return cmp.Compare(r.clock, s) })
	hi = max(hi, lo)
	var pick []int
	for _, f := range filled {
		for k := endAfter(f.clock); k < lo && rs[k].clock < f.clock+f.length; k++ {
			pick = append(pick, k)
		}
	}
	switch {
	case len(pick) == 0 && lo == hi:
		return nil, rs, 0
	case len(pick) == 0:
		try = slices.Clone(rs[lo:hi])
		switch {
		case lo == 0:
			return try, rs[hi:], 0
		case hi == len(rs):
			return try, rs[:lo], 0
		case lo < len(rs)-hi:
			copy(rs[hi-lo:hi], rs[:lo])
			return try, rs[hi-lo:], lo
		default:
			return try, append(rs[:lo], rs[hi:]...), len(rs) - hi
		}
	}
	slices.Sort(pick)
	pick = slices.Compact(pick)
	for k := lo; k < hi; k++ {
		pick = append(pick, k)
	}
	try = make([]dsRange, 0, len(pick))
	wait = rs[:0]
	next := 0
	for k, r := range rs {
		if next < len(pick) && pick[next] == k {
			try = append(try, r)
			next++
			continue
		}
		wait = append(wait, r)
	}
	return try, wait, len(rs)
}

// mergeDeletes adds the ranges of src to the pending deletes, sorting and merging those
// of the clients src holds; what each client's sorts is work.
func (d *Doc) mergeDeletes(src map[uint64][]dsRange) {
	for c, rs := range src {
		if len(rs) == 0 {
			continue
		}
		merged := sortAndMerge(append(d.pendingDS[c], rs...))
		d.pendingDS[c] = merged
		d.spend(int64(len(merged)+len(rs)), ID{c, rs[0].clock}, "pending deletes")
	}
}

// firstPending returns the ID of the lowest client's first pending struct.
func (d *Doc) firstPending() ID {
	var first ID
	seen := false
	for c, list := range d.pending {
		if !seen || c < first.Client {
			first, seen = list[0].id, true
		}
	}
	return first
}

// pendingReady reports whether the clients of refs, just integrated, moved past a clock
// the pending structs wait for (yrs retries its pending update then). Only they moved:
// every other client the pending structs wait for is still at most at the clock it was
// at when the wait was recorded, so an update costs its own clients, not the document's
// waits.
func (d *Doc) pendingReady(refs []structRefs) bool {
	for i := range refs {
		c := refs[i].client
		if clock, ok := d.pendingMissing[c]; ok && clock < d.state(c) {
			return true
		}
	}
	return false
}

// own replaces the document's lent struct (Doc.one) in structs set aside as pending
// with a copy of its own.
func (d *Doc) own(rest map[uint64][]*item) {
	for _, list := range rest {
		for i, it := range list {
			if it == &d.one {
				c := new(item)
				*c = *it
				list[i] = c
			}
		}
	}
}

// cleanup garbage-collects what the transaction deleted and merges adjacent structs,
// like Yjs's cleanupTransactions (tryGcDeleteSet, tryMergeDeleteSet, then merging the
// structs added or split by the transaction).
func (d *Doc) cleanup(txn *Txn) {
	txn.sortDeletes()
	d.gcDeleted(txn.deletes)
	hint := -1
	for i := len(txn.deletes) - 1; i >= 0; i-- {
		r := txn.deletes[i]
		if i+1 < len(txn.deletes) && txn.deletes[i+1].client != r.client {
			hint = -1
		}
		cs := d.structsOf(r.client)
		si := min(cs.len()-1, 1+cs.findNear(r.clock+r.length-1, hint))
		for si > 0 && cs.at(si).id.Clock >= r.clock {
			si -= 1 + d.mergeWithLefts(cs, si)
		}
		hint = si
	}
	for _, b := range txn.before {
		// the structs the transaction added are the last ones, from clock b.clock on
		cs := d.structsOf(b.client)
		for i := cs.len() - 1; i >= 1 && cs.at(i).id.Clock >= b.clock; {
			i -= 1 + d.mergeWithLefts(cs, i)
		}
	}
	hint = -1
	for i := len(txn.mergeStructs) - 1; i >= 0; i-- {
		id := txn.mergeStructs[i]
		cs := d.structsOf(id.Client)
		pos := cs.findNear(id.Clock, hint)
		hint = pos
		if pos+1 < cs.len() && d.mergeWithLefts(cs, pos+1) > 1 {
			continue
		}
		if pos > 0 {
			d.mergeWithLefts(cs, pos)
		}
	}
}

// mergeWithLefts merges the struct at pos into its left neighbours while possible, like
// Yjs's tryToMergeWithLefts, and returns how many structs were merged away.
func (d *Doc) mergeWithLefts(cs *clientStructs, pos int) int {
	i := pos
	right := cs.at(i)
	for ; i > 0; i-- {
		left := cs.at(i - 1)
		if left.deleted() != right.deleted() || (left.kind == kindGC) != (right.kind == kindGC) || !left.mergeWith(right) {
			break
		}
		if right.flags&flagHasParentSub != 0 && right.parent != nil && right.parent.keys[right.ext.sub] == right {
			right.parent.keys[right.ext.sub] = left
		}
		right = left
	}
	merged := pos - i
	if merged > 0 {
		cs.remove(i+1, merged)
	}
	return merged
}

// gcDeleted garbage-collects the structs deleted in the ranges rs, like tryGcDeleteSet;
// structs already collected are skipped.
func (d *Doc) gcDeleted(rs []deleteRange) {
	hint := -1
	for i, r := range rs {
		if i > 0 && rs[i-1].client != r.client {
			hint = -1
		}
		cs := d.structsOf(r.client)
		end := r.clock + r.length
		hint = cs.findNear(r.clock, hint)
		for si := hint; si >= 0 && si < cs.len() && cs.at(si).id.Clock < end; si++ {
			if it := cs.at(si); it.kind != kindGC && it.deleted() {
				d.gc(it, false)
			}
		}
	}
}
