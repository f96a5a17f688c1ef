package extensions

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestWorker(t *testing.T) {
	var idle Worker
	if err := idle.Stop(t.Context()); err != nil {
		t.Fatalf("Stop without Go: %v", err)
	}

	synctest.Test(t, func(t *testing.T) {
		var w Worker
		returned := false
		w.Go(t.Context(), func(ctx context.Context) {
			<-ctx.Done()
			time.Sleep(time.Second) // a goroutine that takes a second to wind down
			returned = true
		})
		if err := w.Stop(t.Context()); err != nil || !returned {
			t.Fatalf("Stop = %v, goroutine returned %v: Stop must wait for it", err, returned)
		}
	})

	synctest.Test(t, func(t *testing.T) {
		var w Worker
		release := make(chan struct{})
		w.Go(t.Context(), func(context.Context) { <-release }) // ignores its context
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := w.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop of a goroutine that does not return = %v, want the deadline", err)
		}
		close(release)
	})
}
