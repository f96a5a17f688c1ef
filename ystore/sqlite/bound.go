package sqlite

import (
	"container/heap"
	"strings"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/logkey"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// The rooms a tailer reads and follows (Config.MaxRooms). In hub mode a user's store is
// input that user alone writes, and the process is everyone's: unbounded, a store of
// 2,000,000 one-row rooms made the tailer hold an entry per room (hundreds of MB) before
// the rooms.Set it feeds refused any. Bounded, it makes the same choice as a rooms.Set
// bounded by the same number (sidecar/rooms/bound.go): at a read of the whole store it
// keeps the rooms it follows that are still stored, then the first others by key, up to
// MaxRooms; while following, it takes a room that appears while it follows fewer. It
// also follows one room more, the next by key (or the next to appear): a sink bounded by
// MaxRooms refuses it, and so knows, logs and tells that the store is over its bound.
// The rows of the other rooms are neither read nor delivered, only counted
// (sqlite_rows_skipped_total); the tailer's memory is its MaxRooms+1 rooms', whatever the
// store holds. A room it follows that leaves the store frees a place, taken by the
// next room by key at the re-read that notices it (a history rewrite, a file replaced:
// the store read whole); then every room it follows is delivered again (Reset), so that
// a sink that refused one takes it now that it has room.
//
// What it still spends on a store past its bound is CPU: a read of the whole store reads
// every row's key (no update), a chunk per read transaction, in constant memory: 2.8 s
// for 2,000,000 one-row rooms (TestMeasureManyRooms; unbounded, 4 min 54 s and 500 MB).

// followLimit is the rooms the tailer follows at most (MaxRooms and the one past it), 0
// when unbounded.
func (c Config) followLimit() int {
	if c.MaxRooms == 0 {
		return 0
	}
	return c.MaxRooms + 1
}

// picker chooses a plan's rooms as a read of the whole store comes upon them: at most
// limit (0: all), the first by rank, the rooms followed (those of followed) before the
// others, then by key. Every room it keeps has all its rows planned: a room it drops
// ranks after every room kept then, and so after every room it keeps later.
type picker struct {
	limit    int
	followed map[string]summary
	rooms    map[string]*roomPlan
	worst    rankHeap // the rooms' keys, the last by rank on top (limit > 0)
	skipped  int64    // rows of the rooms left out
	over     bool     // a room was left out
}

func newPicker(limit int, followed map[string]summary) *picker {
	k := &picker{limit: limit, followed: followed, rooms: map[string]*roomPlan{}}
	k.worst.after = k.after
	return k
}

// after reports whether room a ranks after room b.
func (k *picker) after(a, b string) bool {
	_, fa := k.followed[a]
	_, fb := k.followed[b]
	if fa != fb {
		return fb
	}
	return a > b
}

// room returns the plan of room key, new if there is room for it or if it ranks before
// the last one planned (which is then left out); nil when it is left out.
func (k *picker) room(key string) *roomPlan {
	if rp := k.rooms[key]; rp != nil {
		return rp
	}
	if k.limit > 0 && len(k.rooms) >= k.limit {
		k.over = true
		if !k.after(k.worst.keys[0], key) {
			return nil
		}
		out := heap.Pop(&k.worst).(string)
		k.skipped += k.rooms[out].sum.count
		delete(k.rooms, out)
	}
	key = strings.Clone(key) // a row's key is the fold's while it runs (foldRows)
	rp := &roomPlan{}
	k.rooms[key] = rp
	if k.limit > 0 {
		heap.Push(&k.worst, key)
	}
	return rp
}

// row plans row r, or counts it skipped when its room is left out.
func (k *picker) row(r ystore.Row) {
	rp := k.room(r.Room)
	if rp == nil {
		k.skipped++
		return
	}
	rp.sum.add(r)
	if r.Timestamp >= rp.floor { // 0 without a checkpoint (eachRow)
		rp.rows++
	}
}

// rankHeap is a heap of room keys, the last by rank (after) on top.
type rankHeap struct {
	keys  []string
	after func(a, b string) bool
}

func (h rankHeap) Len() int           { return len(h.keys) }
func (h rankHeap) Less(i, j int) bool { return h.after(h.keys[i], h.keys[j]) }
func (h rankHeap) Swap(i, j int)      { h.keys[i], h.keys[j] = h.keys[j], h.keys[i] }
func (h *rankHeap) Push(x any)        { h.keys = append(h.keys, x.(string)) }
func (h *rankHeap) Pop() any {
	last := h.keys[len(h.keys)-1]
	h.keys = h.keys[:len(h.keys)-1]
	return last
}

// follow returns the rows of rows that the tailer delivers: those of the rooms it
// follows, and of a room new to it while it follows fewer than its limit and has left
// none out since its last read of the whole store (then the room is new to the store:
// its first row is among these). The others are counted skipped.
func (t *Tailer) follow(rows []ystore.Row) []ystore.Row {
	limit := t.cfg.followLimit()
	if limit == 0 {
		return rows
	}
	kept := make([]ystore.Row, 0, len(rows))
	var skipped int
	for _, r := range rows {
		if _, ok := t.rooms[r.Room]; !ok {
			if t.over || len(t.rooms) >= limit {
				if !t.over {
					t.log.Warn("y-store past its bound: rooms past it are not read", logkey.Room, r.Room, "max_rooms", t.cfg.MaxRooms)
				}
				t.over = true
				skipped++
				continue
			}
			t.rooms[r.Room] = summary{}
		}
		kept = append(kept, r)
	}
	t.m.skipped.Add(float64(skipped))
	return kept
}

// skippedAt counts the rows a read of the whole store (why: a load, a resync's reason)
// left out with their rooms, and logs the read that left rooms out.
func (t *Tailer) skippedAt(why string, p *plan) {
	if !p.over {
		return
	}
	t.m.skipped.Add(float64(p.skipped))
	t.log.Warn("y-store past its bound: rooms past it are not read", "read", why, "rooms", len(p.rooms),
		"max_rooms", t.cfg.MaxRooms, "rows_skipped", p.skipped)
}
