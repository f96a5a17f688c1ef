package extensions

import "context"

// Worker is the one goroutine an extension runs from Start to Stop. Keep it as a field,
// call Go in Start, and return its Stop from the extension's Stop.
type Worker struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Go runs run in a goroutine whose context ends with ctx or with Stop. Call it once.
func (w *Worker) Go(ctx context.Context, run func(context.Context)) {
	ctx, w.cancel = context.WithCancel(ctx)
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		run(ctx)
	}()
}

// Stop cancels the goroutine Go started and waits until it returns or ctx ends. Without
// a Go it returns at once.
func (w *Worker) Stop(ctx context.Context) error {
	if w.cancel == nil {
		return nil
	}
	w.cancel()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
