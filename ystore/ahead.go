package ystore

import (
	"context"
	"errors"
)

// ReadAhead runs read on a goroutine of its own, one chunk ahead of take: while take
// has one chunk (a room's load decoding it), read reads the next from the store, so
// that a load uses a core (or a round trip) for each. It holds at most two chunks at
// once, and only one of large bytes of updates or more: after handing over such a
// chunk, read waits until take is done with it, so that rows larger than a backend's
// chunks are held one chunk at a time, as without the read ahead. take's error stops
// read and is returned; otherwise read's, which it also records in failed (nil when
// the read ended, or take stopped it): what a sink's error may stand for, the store's
// failure rather than the sink's. read's sends and take run in chunk order.
func ReadAhead(ctx context.Context, large int, read func(context.Context, func([]Row) error) error, take func([]Row) error, failed *error) error {
	*failed = nil
	chunks := make(chan []Row)
	taken := make(chan struct{}, 1)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		defer close(chunks)
		done <- read(ctx, func(chunk []Row) error {
			big := updateBytes(chunk) >= large // before take has it
			select {
			case chunks <- chunk:
			case <-stop:
				return errStopped
			case <-ctx.Done():
				return ctx.Err()
			}
			if !big {
				return nil
			}
			select {
			case <-taken:
				return nil
			case <-stop:
				return errStopped
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	for chunk := range chunks {
		big := updateBytes(chunk) >= large // before take, which may change it
		if err := take(chunk); err != nil {
			// The read in flight ends as it would have (a canceled query can cost a
			// backend its connection, which the load's other rooms still use).
			close(stop)
			for range chunks {
			}
			<-done
			return err
		}
		if big {
			taken <- struct{}{}
		}
	}
	*failed = <-done
	return *failed
}

// errStopped is what a ReadAhead read's send returns once take has failed.
var errStopped = errors.New("read ahead stopped")

// updateBytes is the size of chunk's updates.
func updateBytes(chunk []Row) int {
	n := 0
	for _, r := range chunk {
		n += len(r.Update)
	}
	return n
}
