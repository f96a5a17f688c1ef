package sqlite

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ystoretest"
)

// LoadStream hands the sink, in one call, the Resets Load returns, their rows streamed a
// chunk at a time.
func TestLoadStream(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	m := newModel(startWriter(t, path))
	for _, tok := range []string{"a1", "a2", "a3", "a4", "a5"} {
		m.write(roomA, tok)
		m.write(roomB, "b"+tok)
	}
	tl := newTailer(t, Config{Path: path, ChunkRows: 2})
	s := newSink()
	calls, chunks := 0, 0
	err := tl.LoadStream(t.Context(), func(ctx context.Context, events []ystore.Event) error {
		calls++
		for i, e := range events {
			if e.Kind != ystore.EventReset || e.Stream == nil || len(e.Rows) != 0 {
				t.Errorf("event %d = %+v, want a streamed Reset", i, e)
			}
		}
		ystoretest.TapStreams(events, func(rows []ystore.Row) error {
			if chunks++; len(rows) > 2 {
				t.Errorf("chunk of %d rows, want at most ChunkRows", len(rows))
			}
			return nil
		})
		return s.deliver(ctx, events)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), m.docs.String(); calls != 1 || got != want {
		t.Fatalf("LoadStream: %d calls delivering\n  %s\nwant one delivering\n  %s", calls, got, want)
	}
	if chunks < 6 {
		t.Fatalf("%d chunks for 10 rows in chunks of 2", chunks)
	}
	wantErr := errors.New("sink")
	if err := tl.LoadStream(t.Context(), func(context.Context, []ystore.Event) error { return wantErr }); !errors.Is(err, wantErr) {
		t.Fatalf("LoadStream's sink failed: err = %v, want %v", err, wantErr)
	}
}

// A streamed load whose store cannot be read halfway (the file damaged in place) is a
// read that failed, however the sink answered: the tailer goes on, unreachable, and
// delivers the load again once the store reads, where the sink's own failure would have
// ended Run.
func TestStreamedLoadReadFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	m := newModel(startWriter(t, path))
	for _, tok := range []string{"a1", "a2", "a3", "a4"} {
		m.write(roomA, tok)
		m.write(roomB, "b"+tok)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damage := func(b []byte) error {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteAt(b, 0)
		return errors.Join(err, f.Close())
	}
	var once sync.Once
	s := newSink()
	tl := newTailer(t, Config{Path: path, ChunkRows: 1, PollInterval: 20 * time.Millisecond, DisableFSNotify: true, StreamLoads: true})
	runTailer(t, tl, func(ctx context.Context, events []ystore.Event) error {
		ystoretest.TapStreams(events, func([]ystore.Row) error {
			var err error
			// The first chunk read, the store's header is overwritten: the next read fails.
			once.Do(func() { err = damage(bytes.Repeat([]byte{0x5a}, 100)) })
			return err
		})
		return s.deliver(ctx, events)
	})
	testenv.Eventually(t, testenv.Wait, "unreachable status", func() bool {
		st := tl.Status()
		return !st.Reachable && st.LastError != ""
	})
	if err := damage(good[:100]); err != nil {
		t.Fatal(err)
	}
	converge(t, s, m)
	testenv.Eventually(t, testenv.Wait, "reachable status after the restore", func() bool { return tl.Status().Reachable })
}
