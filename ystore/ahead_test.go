package ystore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// testLarge is the size of a large chunk in these tests.
const testLarge = 512 << 10

// chunkOf is a chunk of one row of n bytes, its ID i.
func chunkOf(i int64, n int) []Row {
	return []Row{{ID: i, Room: "r", Update: make([]byte, n)}}
}

// aheadReader reads the chunks sizes, counting in started each chunk it began to read.
func aheadReader(sizes []int, started *atomic.Int64) func(context.Context, func([]Row) error) error {
	return func(ctx context.Context, send func([]Row) error) error {
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
		err := ReadAhead(t.Context(), testLarge, aheadReader([]int{10, 10, 10}, &started), func(chunk []Row) error {
			if len(got) == 0 {
				synctest.Wait() // read is blocked: having read what it may
				if n := started.Load(); n != 2 {
					t.Errorf("while the first chunk is taken, %d chunks were begun, want 2", n)
				}
			}
			got = append(got, chunk[0].ID)
			return nil
		}, new(error))
		if err != nil || fmt.Sprint(got) != "[0 1 2]" {
			t.Fatalf("taken %v, %v; want [0 1 2], nil", got, err)
		}
	})
}

// TestReadAheadHoldsOneLargeChunk: after a chunk of large bytes or more is handed over,
// nothing more is read until it has been taken, so that the read ahead never holds two
// large rows at once.
func TestReadAheadHoldsOneLargeChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var started atomic.Int64
		sizes := []int{10, testLarge, testLarge - 1, 10}
		// chunks begun while each is taken: the next one, but none past the large one
		want := []int64{2, 2, 4, 4}
		taken := 0
		err := ReadAhead(t.Context(), testLarge, aheadReader(sizes, &started), func(chunk []Row) error {
			synctest.Wait()
			if n := started.Load(); n != want[taken] {
				t.Errorf("while chunk %d (%d bytes) is taken, %d chunks were begun, want %d", taken, len(chunk[0].Update), n, want[taken])
			}
			taken++
			return nil
		}, new(error))
		if err != nil || taken != len(sizes) {
			t.Fatalf("taken %d chunks, %v; want %d, nil", taken, err, len(sizes))
		}
	})
}

// TestReadAheadStops: take's error is returned and stops the read at its next chunk,
// without canceling its context (its goroutine ends: synctest.Test fails on a goroutine
// left blocked); a read's error is returned after the chunks read before it are taken.
func TestReadAheadStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var started atomic.Int64
		refused := errors.New("refused")
		var readCtx, failed error
		read := aheadReader([]int{10, 10, 10, 10}, &started)
		err := ReadAhead(t.Context(), testLarge, func(ctx context.Context, send func([]Row) error) error {
			err := read(ctx, send)
			readCtx = ctx.Err()
			return err
		}, func(chunk []Row) error {
			return refused
		}, &failed)
		if !errors.Is(err, refused) || failed != nil {
			t.Fatalf("got %v (read failed: %v), want take's error and no read failure", err, failed)
		}
		if readCtx != nil {
			t.Errorf("the read's context was %v: a query in flight must end as it would have", readCtx)
		}
		if n := started.Load(); n > 2 {
			t.Errorf("the read went on after take failed: %d chunks begun", n)
		}
		broken := errors.New("disk")
		read = func(ctx context.Context, send func([]Row) error) error {
			if err := send(chunkOf(0, 10)); err != nil {
				return err
			}
			return broken
		}
		taken := 0
		err = ReadAhead(t.Context(), testLarge, read, func([]Row) error { taken++; return nil }, &failed)
		if !errors.Is(err, broken) || !errors.Is(failed, broken) || taken != 1 {
			t.Fatalf("got %v (read failed: %v) after %d chunks, want the read's error after 1", err, failed, taken)
		}
		ctx, cancel := context.WithCancel(t.Context())
		err = ReadAhead(ctx, testLarge, aheadReader([]int{10, 10, 10}, &started), func([]Row) error {
			cancel()
			return nil
		}, &failed)
		if !errors.Is(err, context.Canceled) || !errors.Is(failed, context.Canceled) {
			t.Fatalf("canceled: got %v", err)
		}
	})
}
