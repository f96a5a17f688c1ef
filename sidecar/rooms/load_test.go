package rooms

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"weak"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/resources/library"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// streamed is a Reset whose rows stream in chunks of size rows, each row's update a fresh
// copy the source tracks: before handing over a chunk, it collects garbage and records
// how many rows of the chunks handed over before are still held by anyone (most: the
// largest count seen). After fail chunks (0: never), the stream fails instead.
type streamed struct {
	key     string
	updates [][]byte
	size    int
	fail    int
	held    []weak.Pointer[byte]
	most    int
}

var errRead = errors.New("store unreadable")

func (s *streamed) event() ystore.Event {
	return ystore.Event{Kind: ystore.EventReset, Room: s.key, Stream: s.stream}
}

func (s *streamed) stream(_ context.Context, yield func([]ystore.Row) error) error {
	s.held = nil
	for i, piece := range slices.Collect(slices.Chunk(s.updates, s.size)) {
		if s.fail > 0 && i == s.fail {
			return errRead
		}
		runtime.GC()
		alive := 0
		for _, w := range s.held {
			if w.Value() != nil {
				alive++
			}
		}
		s.most = max(s.most, alive)
		rows := make([]ystore.Row, len(piece))
		for j, u := range piece {
			c := slices.Clone(u)
			s.held = append(s.held, weak.Make(&c[0]))
			rows[j] = ystore.Row{Room: s.key, ID: int64(i*s.size + j + 1), Update: c, Timestamp: float64(i*s.size + j + 1)}
		}
		if err := yield(rows); err != nil {
			return err
		}
	}
	return nil
}

// A room's rows streamed in (a cold load, inspect) are decoded as they come: no more than
// the chunk being applied is held, whatever the room's history, and the notebook is the
// one its rows make.
func TestRoomsStreamedLoadHoldsNoMoreThanAChunk(t *testing.T) {
	if testing.Short() {
		t.Skip("collects garbage at every chunk")
	}
	const key = ".notebook:n.ipynb.y"
	updates, want := loadSession(t, "s0001.json.gz")
	const size = 16
	if len(updates) < 8*size {
		t.Fatalf("session of %d updates: too short to tell a chunk from the whole", len(updates))
	}
	src := &streamed{key: key, updates: updates, size: size}
	r := writer(nil, nil, nil)
	if err := r.Sink(t.Context(), []ystore.Event{src.event()}); err != nil {
		t.Fatal(err)
	}
	if src.most > size {
		t.Fatalf("%d rows of earlier chunks still held while streaming %d rows in chunks of %d", src.most, len(updates), size)
	}
	snap, err := r.Notebook("n.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, snap, want)
	if infos := r.Infos(); len(infos) != 1 || infos[0].Rows != len(updates) || infos[0].BadRows != 0 {
		t.Fatalf("Infos() = %+v, want %d rows", infos, len(updates))
	}
}

// A streamed Reset whose rows cannot all be read leaves the room as it was, and the sink
// says why (the tailer retries the read).
func TestRoomsStreamedLoadThatFails(t *testing.T) {
	const key = ".notebook:n.ipynb.y"
	first, want := loadSession(t, "s0003.json.gz")
	second, _ := loadSession(t, "s0004.json.gz")
	r := writer(nil, nil, nil)
	if err := r.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventReset, Room: key, Rows: rowsOf(key, first)}}); err != nil {
		t.Fatal(err)
	}
	src := &streamed{key: key, updates: second, size: 4, fail: 2}
	if err := r.Sink(t.Context(), []ystore.Event{src.event()}); !errors.Is(err, errRead) {
		t.Fatalf("Sink of a stream that fails: err = %v, want %v", err, errRead)
	}
	snap, err := r.Notebook("n.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, snap, want)
	if infos := r.Infos(); len(infos) != 1 || infos[0].Rows != len(first) {
		t.Fatalf("Infos() = %+v, want the %d rows of before", infos, len(first))
	}
}

// checked is a context whose Err reports it cancelled from its left+1st call on.
type checked struct {
	context.Context
	left int
}

func (c *checked) Err() error {
	if c.left <= 0 {
		return context.Canceled
	}
	c.left--
	return nil
}

// A load looks at its context before each row, not each batch of them: cancelled after
// fewer checks than the room has rows, it stops, leaves no room and says why; given
// enough, it loads the room.
func TestRoomsLoadStopsBetweenRows(t *testing.T) {
	const key = ".notebook:n.ipynb.y"
	updates, want := loadSession(t, "s0001.json.gz")
	for _, left := range []int{0, 1, 2, len(updates) - 1} {
		r := writer(nil, nil, nil)
		ctx := &checked{Context: t.Context(), left: left}
		err := r.Sink(ctx, []ystore.Event{{Kind: ystore.EventReset, Room: key, Rows: rowsOf(key, updates)}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%d checks for %d rows: Sink err = %v, want context.Canceled", left, len(updates), err)
		}
		if _, err := r.Notebook("n.ipynb"); !errors.Is(err, library.ErrNotFound) {
			t.Fatalf("%d checks for %d rows: a room is served (err %v)", left, len(updates), err)
		}
	}
	r := writer(nil, nil, nil)
	ctx := &checked{Context: t.Context(), left: 2 * len(updates)}
	if err := r.Sink(ctx, []ystore.Event{{Kind: ystore.EventReset, Room: key, Rows: rowsOf(key, updates)}}); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Notebook("n.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, snap, want)
}

// A room whose rows mostly do not decode (a crafted store; or a document that failed and
// refuses every later row) logs a few of them at Warn, loaded or as they come, and counts
// all: the log does not grow with the store.
func TestRoomsBadRowsLogBounded(t *testing.T) {
	const key = ".notebook:n.ipynb.y"
	updates, _ := loadSession(t, "s0001.json.gz")
	var bad [][]byte
	for range 100 {
		bad = append(bad, []byte{0xff})
	}
	var log bytes.Buffer
	r := New(Config{Logger: slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))}).Writer(nil)
	if err := r.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventReset, Room: key, Rows: rowsOf(key, append(updates, bad...))}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Sink(t.Context(), []ystore.Event{{Kind: ystore.EventUpdates, Room: key, Rows: rowsOf(key, bad)}}); err != nil {
		t.Fatal(err)
	}
	if infos := r.Infos(); len(infos) != 1 || infos[0].BadRows != 200 {
		t.Fatalf("Infos() = %+v, want 200 bad rows", infos)
	}
	if n := strings.Count(log.String(), "\n"); n > 10 {
		t.Fatalf("%d lines logged at Warn for 200 bad rows:\n%s", n, log.String())
	}
}
