package rooms

import (
	"context"
	"fmt"
	"slices"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// A cold load (the sidecar's start, a hub user's first read, inspect) builds every room of
// the store at once, from nothing: when the tailer offers its rooms' rows in one pass
// over the store (ystore.Scan), the Set reads them that way, each room's rows applied to
// its own document as the pass reaches them, rather than room after room through the
// store's index. The bounds hold as they do room by room: the rooms are admitted in key
// order, counting those admitted before them; the rows' bytes are taken from one budget
// and the documents charged to the Set's memory as they are read. A room whose rows would
// pass a bound is put aside when they would, and loaded alone through its own Stream
// once the others are held (refused then if it still passes it): the rooms built
// together are charged as they load, before their text is compacted, so that refusing
// it at once would serve fewer rooms than a load room by room (red team pass 16, F2).
// Which rooms are refused may differ from a load room by room, where they were the last
// by key. A load that
// replaces held documents reads room by room: it holds a room's old and new documents
// only one room at a time; so does a load of some of the pass's rooms (inspect of one
// notebook), which would read the whole store for them.

// scanned is a room of a scan: its load (a notebook's), or the count of its rows (another
// room's).
type scanned struct {
	info  ystore.Room
	key   string
	load  *roomLoad // nil: not a notebook
	m     *roomMeter
	ev    ystore.Event
	other int  // rows of a room that is not a notebook's
	later bool // it passed a bound during the pass: loaded alone after it
	at, n int  // its run in the chunk at hand
}

// scanGroup returns how many of events, from the first, are Resets sharing its Scan (0
// when it has none), and whether they are all of the Scan's rooms.
func scanGroup(events []ystore.Event) (n int, all bool) {
	sc := events[0].Scan
	if sc == nil || events[0].Kind != ystore.EventReset {
		return 0, false
	}
	n = 1
	for n < len(events) && events[n].Kind == ystore.EventReset && events[n].Scan == sc {
		n++
	}
	return n, n == sc.Rooms
}

// cold reports whether the Set holds or counts none of the rooms of events.
func (r *Set) cold(events []ystore.Event) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, ev := range events {
		_, held := r.rooms[ev.Room]
		_, known := r.others[ev.Room]
		if held || known {
			return false
		}
	}
	return true
}

// resetScan loads the rooms of events (Resets sharing one Scan, none of them held or
// counted) from the Scan's one pass, as reset loads each: when the rows cannot be read,
// no room is loaded and the error is returned.
func (r *Writer) resetScan(ctx context.Context, events []ystore.Event) error {
	rooms := make(map[string]*scanned, len(events))
	order := make([]*scanned, 0, len(events))
	budget, first := int64(-1), true
	for _, ev := range events {
		b, ok := r.admit(ev.Room, len(order))
		if !ok {
			continue
		}
		if first {
			budget, first = b, false // the same for every room: none is held
		}
		s := &scanned{key: ev.Room, ev: ev}
		if info, ok := ystore.ParseRoom(ev.Room); ok && info.Kind == ystore.KindNotebook {
			s.info, s.m = info, r.meter(nil)
			s.load = r.newRoomLoad(info, &budget, s.m)
		}
		rooms[ev.Room] = s
		order = append(order, s)
	}
	var buf []ystore.Row   // the pass's chunk at hand, by room: each room's rows a run
	var touched []*scanned // the rooms of the chunk at hand, in order
	yield := func(rows []ystore.Row) error {
		// Counted, then placed: each room's rows in a run of buf, in their order.
		for _, row := range rows {
			if s := rooms[row.Room]; s != nil && !s.later {
				if s.n++; s.n == 1 {
					touched = append(touched, s)
				}
			}
		}
		at := 0
		for _, s := range touched {
			s.at, at, s.n = at, at+s.n, 0
		}
		buf = slices.Grow(buf[:0], at)[:at]
		for _, row := range rows {
			if s := rooms[row.Room]; s != nil && !s.later {
				buf[s.at+s.n] = row
				s.n++
			}
		}
		defer func() {
			clear(buf) // hold no row past its chunk
			for _, s := range touched {
				s.n = 0
			}
			touched = touched[:0]
		}()
		for _, s := range touched {
			run := buf[s.at : s.at+s.n]
			if s.load == nil {
				s.other += len(run)
				continue
			}
			err := s.load.add(ctx, run)
			if overBound(err) != "" {
				s.load.abandon()
				s.later = true
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	restart := func(room string) error {
		s := rooms[room]
		if s == nil || s.later {
			return nil
		}
		s.other = 0
		if s.load != nil {
			s.load.abandon()
			s.load = r.newRoomLoad(s.info, &budget, s.m)
		}
		return nil
	}
	if err := events[0].Scan.Each(ctx, yield, restart); err != nil {
		for _, s := range order {
			if s.load != nil && !s.later {
				s.load.abandon()
			}
		}
		return fmt.Errorf("load rooms: %w", err)
	}
	for _, s := range order {
		switch {
		case s.later:
		case s.load == nil:
			r.mu.Lock()
			r.others[s.key] = s.other
			r.mu.Unlock()
		default:
			r.install(ctx, s.info, s.m, s.load.done())
		}
	}
	// The rooms built together were charged their documents as loaded, before their
	// text was compacted (ynotebook.Loading.Done); a room that passed a bound then is
	// loaded again alone, as a load room by room would, with what the others left.
	for _, s := range order {
		if s.later {
			if err := r.reset(ctx, s.info, s.ev); err != nil {
				return err
			}
		}
	}
	return nil
}
