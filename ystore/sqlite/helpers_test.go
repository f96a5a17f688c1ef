package sqlite

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/sqlite/sqlitetest"
)

// writer drives testdata/pycrdt_writer/writer.py, which writes like pycrdt-store.
type writer = sqlitetest.Writer

// reply is one answer of the writer.
type reply = sqlitetest.Reply

func startWriter(t testing.TB, path string) *writer { return sqlitetest.Start(t, path) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Token updates stand in for Yjs updates where the tailer's correctness is what is
// tested: an update is a set of tokens, applying is union, merging is union, exactly the
// idempotent, commutative state of a CRDT document.
func tokens(ts ...string) []byte { return []byte(strings.Join(ts, ",")) }

func tokenSet(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), ",")
}

// docs is a set of token documents by room.
type docs map[string]map[string]bool

func (d docs) apply(room string, update []byte) {
	if d[room] == nil {
		d[room] = map[string]bool{}
	}
	for _, tok := range tokenSet(update) {
		d[room][tok] = true
	}
}

// merged returns the room's state as one update.
func (d docs) merged(room string) []byte {
	var ts []string
	for tok := range d[room] {
		ts = append(ts, tok)
	}
	sort.Strings(ts)
	return tokens(ts...)
}

func (d docs) String() string {
	var rooms []string
	for room := range d {
		rooms = append(rooms, room+"="+string(d.merged(room)))
	}
	sort.Strings(rooms)
	return strings.Join(rooms, " ")
}

// model is the writer's view: what each room's document is.
type model struct {
	w    *writer
	docs docs
}

func newModel(w *writer) *model { return &model{w: w, docs: docs{}} }

func (m *model) write(room string, toks ...string) reply {
	m.docs.apply(room, tokens(toks...))
	return m.w.Do(map[string]any{"op": "write", "room": room, "update": b64(tokens(toks...))})
}

// sink collects what a tailer delivers, applied to token documents.
type sink struct {
	mu     sync.Mutex
	docs   docs
	events []ystore.Event
}

func newSink() *sink { return &sink{docs: docs{}} }

func (s *sink) deliver(ctx context.Context, events []ystore.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range events {
		switch e.Kind {
		case ystore.EventReset:
			delete(s.docs, e.Room)
		case ystore.EventRemoved:
			delete(s.docs, e.Room)
		}
		if err := e.Each(ctx, func(rows []ystore.Row) error {
			for _, r := range rows {
				s.docs.apply(e.Room, r.Update)
			}
			return nil
		}); err != nil {
			return err
		}
		s.events = append(s.events, e)
	}
	return nil
}

func (s *sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs.String()
}

// kinds counts the delivered events of each kind for room ("" for any room).
func (s *sink) kinds(room string) map[ystore.EventKind]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := map[ystore.EventKind]int{}
	for _, e := range s.events {
		if room == "" || e.Room == room {
			n[e.Kind]++
		}
	}
	return n
}

// converge waits until the sink's documents equal the model's.
func converge(t testing.TB, s *sink, m *model) {
	t.Helper()
	want := m.docs.String()
	testenv.Eventually(t, testenv.Wait, "the served documents to equal the writer's", func() bool { return s.String() == want },
		func() string { return fmt.Sprintf("served documents\n  %s\nwant\n  %s", s.String(), want) })
}

// runTailer runs tl until the test ends.
func runTailer(t testing.TB, tl *Tailer, deliver func(context.Context, []ystore.Event) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx, deliver) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// sharedWatcher serves the tailers of every test in the "shared" mode, as hub mode's
// one Watcher serves every user's tailer.
var sharedWatcher = NewWatcher(WatcherConfig{})

// modes are the ways a tailer wakes.
var modes = []struct {
	name string
	cfg  func(path string) Config
}{
	// With an hour between polls, only file events can wake the fsnotify tailers.
	{"fsnotify", func(path string) Config { return Config{Path: path, PollInterval: time.Hour} }},
	{"shared", func(path string) Config { return Config{Path: path, PollInterval: time.Hour, Watcher: sharedWatcher} }},
	{"polling", func(path string) Config {
		return Config{Path: path, PollInterval: 20 * time.Millisecond, DisableFSNotify: true}
	}},
	// Loads streamed to the sink, as ship reads them.
	{"streamed", func(path string) Config { return Config{Path: path, PollInterval: time.Hour, StreamLoads: true} }},
}

func newTailer(t testing.TB, cfg Config) *Tailer {
	t.Helper()
	tl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// tailing runs a new tailer with cfg until the test ends, once its sink holds m's rooms.
func tailing(t testing.TB, cfg Config, m *model) (*Tailer, *sink) {
	t.Helper()
	tl, s := newTailer(t, cfg), newSink()
	runTailer(t, tl, s.deliver)
	converge(t, s, m)
	return tl, s
}
