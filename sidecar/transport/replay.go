package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/server"
)

// replayStore is the SDK's EventStore for 2025-11-25 sessions: each session's
// latest SSE events, bounded in count and bytes, so that a GET stream that
// drops and comes back with Last-Event-ID receives what was sent meanwhile.
// Once the event a client resumes from has been evicted, the transport ends
// the session (404), so the client knows to start again rather than miss
// changes silently.
type replayStore struct {
	maxEvents, maxBytes int
	seq                 atomic.Uint64

	mu       sync.Mutex
	sessions map[string]*replayLog
}

// replayLog is one session's events, oldest first.
type replayLog struct {
	events []replayEvent
	bytes  int
}

type replayEvent struct {
	seq    uint64
	stream string
	msg    json.RawMessage
}

var _ server.EventStore = (*replayStore)(nil)

func newReplayStore(maxEvents, maxBytes int) *replayStore {
	return &replayStore{maxEvents: maxEvents, maxBytes: maxBytes, sessions: map[string]*replayLog{}}
}

// StoreEvent records message as the next event of the session's stream and
// evicts the oldest events beyond the bounds (never the newest one).
func (rs *replayStore) StoreEvent(_ context.Context, sessionID, streamID string, message json.RawMessage) (string, error) {
	return strconv.FormatUint(rs.store(sessionID, streamID, slices.Clone(message)), 10), nil
}

// noteStream is the stream id of the notifications the transport writes itself on a
// 2025-11-25 session's GET stream (noteWriter); the SDK's streams have UUIDs.
const noteStream = "notes"

// storeNote records a notification the transport writes on the session's GET
// stream and returns its event id. msg is kept as it is, not copied: it is the
// bytes every subscriber is handed, never modified.
func (rs *replayStore) storeNote(sessionID string, msg []byte) uint64 {
	return rs.store(sessionID, noteStream, msg)
}

// store records msg as the next event of the session's stream and returns its
// sequence number.
func (rs *replayStore) store(sessionID, streamID string, msg []byte) uint64 {
	ev := replayEvent{seq: rs.seq.Add(1), stream: streamID, msg: msg}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	l := rs.sessions[sessionID]
	if l == nil {
		l = &replayLog{}
		rs.sessions[sessionID] = l
	}
	l.events = append(l.events, ev)
	l.bytes += len(ev.msg)
	drop := 0
	for len(l.events)-drop > 1 && (len(l.events)-drop > rs.maxEvents || l.bytes > rs.maxBytes) {
		l.bytes -= len(l.events[drop].msg)
		drop++
	}
	if drop > 0 {
		l.events = slices.Delete(l.events, 0, drop)
	}
	return ev.seq
}

// find returns the position of the event lastEventID in the session's log.
// rs.mu is held.
func (rs *replayStore) find(sessionID, lastEventID string) (*replayLog, int, bool) {
	seq, err := strconv.ParseUint(lastEventID, 10, 64)
	l := rs.sessions[sessionID]
	if err != nil || l == nil {
		return nil, 0, false
	}
	i, ok := slices.BinarySearchFunc(l.events, seq, func(e replayEvent, seq uint64) int {
		switch {
		case e.seq < seq:
			return -1
		case e.seq > seq:
			return 1
		}
		return 0
	})
	return l, i, ok
}

// resumable reports whether a stream of the session can resume after lastEventID.
func (rs *replayStore) resumable(sessionID, lastEventID string) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	_, _, ok := rs.find(sessionID, lastEventID)
	return ok
}

// ReplayEventsAfter sends, in order, the events after lastEventID on its stream.
func (rs *replayStore) ReplayEventsAfter(_ context.Context, sessionID, lastEventID string, send func(eventID string, message json.RawMessage) error) (string, error) {
	rs.mu.Lock()
	l, i, ok := rs.find(sessionID, lastEventID)
	if !ok {
		rs.mu.Unlock()
		return "", fmt.Errorf("%w: %s", server.ErrUnknownEventID, lastEventID)
	}
	stream := l.events[i].stream
	var tail []replayEvent
	for _, e := range l.events[i+1:] {
		if e.stream == stream {
			tail = append(tail, e)
		}
	}
	rs.mu.Unlock()
	for _, e := range tail {
		if err := send(strconv.FormatUint(e.seq, 10), e.msg); err != nil {
			return "", err
		}
	}
	return stream, nil
}

// streamOf is the stream of the session's event lastEventID ("" if unknown).
func (rs *replayStore) streamOf(sessionID, lastEventID string) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if l, i, ok := rs.find(sessionID, lastEventID); ok {
		return l.events[i].stream
	}
	return ""
}

// notesAfter returns, in order, the transport's notifications of the session
// recorded after lastEventID.
func (rs *replayStore) notesAfter(sessionID, lastEventID string) []replayEvent {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	l, i, ok := rs.find(sessionID, lastEventID)
	if !ok {
		return nil
	}
	var tail []replayEvent
	for _, e := range l.events[i+1:] {
		if e.stream == noteStream {
			tail = append(tail, e)
		}
	}
	return tail
}

// PurgeSession forgets the session's events; the SDK calls it when the session ends.
func (rs *replayStore) PurgeSession(_ context.Context, sessionID string) error {
	rs.mu.Lock()
	delete(rs.sessions, sessionID)
	rs.mu.Unlock()
	return nil
}
