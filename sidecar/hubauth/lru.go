package hubauth

import (
	"container/list"
	"sync"
	"time"
)

// lru is a bounded map whose entries expire: when full, a put evicts the
// least recently used entry. Keys are token digests, never tokens.
type lru[V any] struct {
	mu   sync.Mutex
	size int
	ll   *list.List // front: most recently used
	m    map[[32]byte]*list.Element
}

type lruEntry[V any] struct {
	key     [32]byte
	val     V
	expires time.Time
}

func newLRU[V any](size int) *lru[V] {
	return &lru[V]{size: size, ll: list.New(), m: make(map[[32]byte]*list.Element, size)}
}

// get returns the value of key unless it is missing or expired at now; an
// expired entry is dropped.
func (c *lru[V]) get(key [32]byte, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.m[key]
	if !ok {
		return zero, false
	}
	e := el.Value.(*lruEntry[V])
	if !now.Before(e.expires) {
		c.ll.Remove(el)
		delete(c.m, key)
		return zero, false
	}
	c.ll.MoveToFront(el)
	return e.val, true
}

// put stores val under key until expires, evicting the least recently used
// entry when the map is full.
func (c *lru[V]) put(key [32]byte, val V, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		e := el.Value.(*lruEntry[V])
		e.val, e.expires = val, expires
		c.ll.MoveToFront(el)
		return
	}
	if c.ll.Len() >= c.size {
		oldest := c.ll.Back()
		c.ll.Remove(oldest)
		delete(c.m, oldest.Value.(*lruEntry[V]).key)
	}
	c.m[key] = c.ll.PushFront(&lruEntry[V]{key: key, val: val, expires: expires})
}

// len returns the number of entries, expired ones included.
func (c *lru[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
