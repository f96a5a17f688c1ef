package yjs

// depthCheck refuses, before anything is integrated, an update that could nest a type
// deeper than MaxDepth, so that the document never holds one and every walk over its
// types (ToJSON, String, deleting, garbage collection) recurses at most MaxDepth deep.
//
// It follows, from each type the update (and, when they may integrate with it, the
// pending structs) would add, the chain that gives a struct its parent in getMissing: the
// origin's struct, else the right origin's, else the explicit parent. The chain ends in
// the document, which knows its types' depths, or at a root. Where Yjs would drop a struct
// (its parent is not a type, garbage collected, or missing) the check counts from depth 0
// instead: the bound only ever overestimates. The depths of structs not integrated yet
// are kept in memo for the check of one update.
type depthCheck struct {
	d       *Doc
	refs    []structRefs
	pending bool            // whether d.pending may integrate with the update
	memo    map[*item]int32 // the parent depth of structs not integrated; -1 on the path
	path    []depthLink     // the chain being followed
}

// depthLink is a struct on the chain and how much deeper its parent is than the next
// one's: 1 when its parent is the type the next one holds, 0 when they share a parent.
type depthLink struct {
	it  *item
	add int32
}

// run returns a *DepthError when integrating u into d could nest a type deeper than
// MaxDepth; d is not changed.
func (c *depthCheck) run(d *Doc, u *update) error {
	c.d, c.refs = d, u.refs
	c.pending = d.mayIntegratePending(u)
	defer c.done()
	if int(d.maxDepth)+c.newTypes() < MaxDepth {
		// A new type is at most one deeper than its parent, a type the document holds
		// or another new one: none can be deeper than the deepest the document holds
		// plus the number of new types. Most updates are refused nothing this way
		// without following a chain.
		return nil
	}
	for _, r := range u.refs {
		for _, it := range r.refs {
			if err := c.checkType(it); err != nil {
				return err
			}
		}
	}
	if !c.pending {
		return nil
	}
	for _, list := range d.pending {
		for _, it := range list {
			if err := c.checkType(it); err != nil {
				return err
			}
		}
	}
	return nil
}

// newTypes returns how many types the update, and the pending structs when they may
// integrate with it, hold.
func (c *depthCheck) newTypes() int {
	var n int
	count := func(list []*item) {
		for _, it := range list {
			if it.kind == kindType {
				n++
			}
		}
	}
	for _, r := range c.refs {
		count(r.refs)
	}
	if c.pending {
		for _, list := range c.d.pending {
			count(list)
		}
	}
	return n
}

// done forgets the update, keeping the memo's storage for the next unless an update
// with many types made it large.
func (c *depthCheck) done() {
	c.d, c.refs = nil, nil
	switch {
	case len(c.memo) > memoKeep:
		c.memo = nil
	case len(c.memo) > 0:
		clear(c.memo)
	}
}

// memoKeep is the most entries the memo keeps its storage for.
const memoKeep = 256

// checkType checks it if it is a type the document does not hold yet.
func (c *depthCheck) checkType(it *item) error {
	if it.kind != kindType || !c.d.missing(it.id) {
		return nil
	}
	if c.parentDepth(it) >= MaxDepth {
		return &DepthError{ID: it.id}
	}
	return nil
}

// parentDepth returns a bound on the depth of the type s would be integrated into (0 for
// a root), or at least MaxDepth as soon as the chain holds that many types.
func (c *depthCheck) parentDepth(s *item) int32 {
	// the common case: the parent is known at once, from the document or a root
	if next, _, depth := c.parent(s); next == nil {
		return depth
	}
	if c.memo == nil {
		c.memo = make(map[*item]int32)
	}
	path := c.path[:0]
	defer func() { c.path = path[:0] }()
	var v, types int32
	for cur := s; ; {
		if m, seen := c.memo[cur]; seen {
			v = max(m, 0) // on the path: a cycle of structs, which never integrate
			break
		}
		c.memo[cur] = -1
		next, up, depth := c.parent(cur)
		if next == nil {
			path = append(path, depthLink{cur, 0})
			v = depth
			break
		}
		add := int32(0)
		if up {
			add = 1
		}
		path = append(path, depthLink{cur, add})
		if types += add; types >= MaxDepth {
			return types
		}
		cur = next
	}
	for i := len(path) - 1; i >= 0; i-- {
		v += path[i].add
		c.memo[path[i].it] = v
	}
	return v
}

// parent returns the struct not integrated yet that the parent of it derives from (next;
// up when that parent is the type next holds, else next's parent) or, when next is nil,
// a bound on the depth of the parent of it.
func (c *depthCheck) parent(it *item) (next *item, up bool, depth int32) {
	var id ID
	switch {
	case it.kind == kindGC:
		return nil, false, 0
	case it.hasOrigin():
		id = it.origin
	case it.hasRightOrigin():
		id = it.rightOrigin
	case it.flags&flagHasPref == 0 || !it.ext.pref.isID:
		return nil, false, 0 // a root
	default:
		id, up = it.ext.pref.id, true
	}
	if !c.d.missing(id) {
		x := c.d.getItem(id)
		switch {
		case up && x.kind == kindType:
			return nil, false, x.typ().depth
		case !up && x.kind != kindGC && x.parent != nil:
			return nil, false, x.parent.depth
		}
		return nil, false, 0
	}
	x := c.lookup(id)
	if x == nil || (up && x.kind != kindType) {
		return nil, false, 0
	}
	return x, up, 0
}

// lookup returns the struct of the update, else the pending one, holding id (beyond the
// document's state), or nil.
func (c *depthCheck) lookup(id ID) *item {
	if r := findRefs(c.refs, id.Client); r != nil {
		if i := findIndex(r.refs, id.Clock); i >= 0 && r.refs[i].kind != kindSkip {
			return r.refs[i]
		}
	}
	if c.pending {
		if list := c.d.pending[id.Client]; len(list) > 0 {
			if i := findIndex(list, id.Clock); i >= 0 {
				return list[i]
			}
		}
	}
	return nil
}

// mayIntegratePending reports whether applying u could integrate pending structs: whether
// a clock they wait for is below the state that u could bring its client to. u brings a
// client no further when the first of its structs for the client lies past a gap and
// depends on a struct neither the document nor u can give: integration then keeps all
// of them pending (integrateStructs), and a writer sending a client's structs in reverse
// order does not make each update check every pending struct. Only u's clients can move
// (pendingReady), so only they are looked at. And pending structs integrate only when
// one is free to (unblocked), or u may free one: u reaches a clock one needs, may fill a
// Skip, or holds structs of a client with pending ones.
func (d *Doc) mayIntegratePending(u *update) bool {
	if !d.unblocked && !d.mayUnblock(u) {
		return false
	}
	for i := range u.refs {
		r := &u.refs[i]
		clock, ok := d.pendingMissing[r.client]
		if ok && !r.gone && len(r.refs) > 0 && d.mayAdvance(u, r) && clock < r.refs[len(r.refs)-1].end() {
			return true
		}
	}
	return false
}

// mayUnblock reports whether integrating u may leave a pending struct free to integrate
// (Doc.unblocked): whether u holds a clock a first pending struct needs, one below its
// client's state (it may fill a Skip), or structs of a client with pending ones.
func (d *Doc) mayUnblock(u *update) bool {
	for i := range u.refs {
		r := &u.refs[i]
		if r.gone || len(r.refs) == 0 {
			continue
		}
		if len(d.pending[r.client]) > 0 || r.refs[0].id.Clock < d.state(r.client) {
			return true
		}
		if need, ok := d.pendingNeeds[r.client]; ok && need < r.refs[len(r.refs)-1].end() {
			return true
		}
	}
	return false
}

// mayAdvance reports whether integrating u could add r's structs to the document: not
// when the first of them lies past a gap in its client's clocks and depends on a struct
// that the document lacks and that u holds no struct of the client for.
func (d *Doc) mayAdvance(u *update, r *structRefs) bool {
	i := 0
	for i < len(r.refs) && r.refs[i].kind == kindSkip {
		i++
	}
	if i == len(r.refs) {
		return false
	}
	first := r.refs[i]
	if first.id.Clock <= d.state(r.client) || first.kind == kindGC {
		return true
	}
	lacking := func(id ID) bool {
		return d.missing(id) && (id.Client == r.client || findRefs(u.refs, id.Client) == nil)
	}
	switch {
	case first.hasOrigin() && lacking(first.origin),
		first.hasRightOrigin() && lacking(first.rightOrigin),
		first.flags&flagHasPref != 0 && first.ext.pref.isID && lacking(first.ext.pref.id):
		return false
	}
	return true
}
