package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// chunkOf is a chunk of one row of n bytes, its ID i.
func chunkOf(i int64, n int) []ystore.Row {
	return []ystore.Row{{ID: i, Room: "r", Update: make([]byte, n)}}
}

// aheadReader reads the chunks sizes, counting in started each chunk it began to read.
func aheadReader(sizes []int, started *atomic.Int64) func(context.Context, func([]ystore.Row) error) error {
	return func(ctx context.Context, send func([]ystore.Row) error) error {
		for i, n := range sizes {
			started.Add(1)
			if err := send(chunkOf(int64(i), n)); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestReadAheadOverlaps: while the first chunk is being taken, the second has been read
// already (read and take on two goroutines); every chunk is taken once, in order.
func TestReadAheadOverlaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var started atomic.Int64
		var got []int64
		err := readAhead(t.Context(), aheadReader([]int{10, 10, 10}, &started), func(chunk []ystore.Row) error {
			if len(got) == 0 {
				synctest.Wait() // read is blocked: having read what it may
				if n := started.Load(); n != 2 {
					t.Errorf("while the first chunk is taken, %d chunks were begun, want 2", n)
				}
			}
			got = append(got, chunk[0].ID)
			return nil
		})
		if err != nil || fmt.Sprint(got) != "[0 1 2]" {
			t.Fatalf("taken %v, %v; want [0 1 2], nil", got, err)
		}
	})
}

// TestReadAheadHoldsOneLargeChunk: after a chunk of 2×chunkBytes or more is handed over,
// nothing more is read until it has been taken, so that the read ahead never holds two
// large rows at once.
func TestReadAheadHoldsOneLargeChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var started atomic.Int64
		sizes := []int{10, 2 * chunkBytes, 2*chunkBytes - 1, 10}
		// chunks begun while each is taken: the next one, but none past the large one
		want := []int64{2, 2, 4, 4}
		taken := 0
		err := readAhead(t.Context(), aheadReader(sizes, &started), func(chunk []ystore.Row) error {
			synctest.Wait()
			if n := started.Load(); n != want[taken] {
				t.Errorf("while chunk %d (%d bytes) is taken, %d chunks were begun, want %d", taken, len(chunk[0].Update), n, want[taken])
			}
			taken++
			return nil
		})
		if err != nil || taken != len(sizes) {
			t.Fatalf("taken %d chunks, %v; want %d, nil", taken, err, len(sizes))
		}
	})
}

// TestReadAheadStops: take's error is returned and stops the read (its goroutine ends:
// synctest.Test fails on a goroutine left blocked); a read's error is returned after the
// chunks read before it are taken.
func TestReadAheadStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var started atomic.Int64
		refused := errors.New("refused")
		err := readAhead(t.Context(), aheadReader([]int{10, 10, 10, 10}, &started), func(chunk []ystore.Row) error {
			return refused
		})
		if !errors.Is(err, refused) {
			t.Fatalf("got %v, want take's error", err)
		}
		if n := started.Load(); n > 2 {
			t.Errorf("the read went on after take failed: %d chunks begun", n)
		}
		broken := errors.New("disk")
		read := func(ctx context.Context, send func([]ystore.Row) error) error {
			if err := send(chunkOf(0, 10)); err != nil {
				return err
			}
			return broken
		}
		taken := 0
		err = readAhead(t.Context(), read, func([]ystore.Row) error { taken++; return nil })
		if !errors.Is(err, broken) || taken != 1 {
			t.Fatalf("got %v after %d chunks, want the read's error after 1", err, taken)
		}
		ctx, cancel := context.WithCancel(t.Context())
		err = readAhead(ctx, aheadReader([]int{10, 10, 10}, &started), func([]ystore.Row) error {
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled: got %v", err)
		}
	})
}
