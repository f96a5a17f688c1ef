package sqlite

import (
	"context"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore"
)

// readAhead runs read on a goroutine of its own, one chunk ahead of take: while take
// has one chunk (a room's load decoding it), read reads the next from the store, so
// that a load uses a core for each. It holds at most two chunks at once, and only one
// of 2×chunkBytes or more (large): after handing over such a chunk, read waits until
// take is done with it, so that a store of large rows holds no more than it did without
// the read ahead, and one of small rows at most 2×chunkBytes more. take's error stops
// read and is returned; otherwise read's.
func readAhead(ctx context.Context, read func(context.Context, func([]ystore.Row) error) error, take func([]ystore.Row) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := make(chan []ystore.Row)
	taken := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		defer close(chunks)
		done <- read(ctx, func(chunk []ystore.Row) error {
			select {
			case chunks <- chunk:
			case <-ctx.Done():
				return ctx.Err()
			}
			if !large(chunk) {
				return nil
			}
			select {
			case <-taken:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	for chunk := range chunks {
		if err := take(chunk); err != nil {
			cancel()
			for range chunks {
			}
			<-done
			return err
		}
		if large(chunk) {
			taken <- struct{}{}
		}
	}
	return <-done
}

// large reports whether chunk holds 2×chunkBytes or more: a chunk of rows smaller than
// chunkBytes ends at the row that brings it past chunkBytes, so only a larger row (or
// checkpoint, or what it decompressed to) makes a chunk large.
func large(chunk []ystore.Row) bool {
	n := 0
	for _, r := range chunk {
		n += len(r.Update)
	}
	return n >= 2*chunkBytes
}
