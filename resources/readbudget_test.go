package resources

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// TestReadsHoldTheirMemoryUntilAnswered: what a read builds is held from the budget of
// reads in flight (MaxReadBytes) until its answer is written, not only while its handler
// runs; a read past the budget waits for others to end, and one larger than the whole is
// refused (it ran alone, and held 5 times its notebook of 60 MB past its user's bound).
// One user reading her notebook of 60 MB eight times at once built 1.5 GB.
func TestReadsHoldTheirMemoryUntilAnswered(t *testing.T) {
	const budget = 30 << 20
	s := &Server{cfg: Config{Limits: Limits{MaxReadBytes: budget}}, reads: semaphore.NewWeighted(budget)}
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}

	// A read of 6 MB answered through a transport: held until its answer is written.
	ctx, answered := WithAnswered(t.Context())
	release, err := s.holdRead(ctx, 6<<20, "nb")
	if err != nil {
		t.Fatal(err)
	}
	release() // the handler returned; its answer is not written yet
	if _, err := s.holdRead(short(), 6<<20, "nb"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second read of 6 MB with 18 MB of 30 held: %v, want it to wait", err)
	}
	answered()
	release, err = s.holdRead(short(), 6<<20, "nb")
	if err != nil {
		t.Fatalf("a read once the first was answered: %v", err)
	}
	release() // without a transport that says when: given back as the handler returns

	// A read larger than the budget is refused, and holds nothing.
	if _, err := s.holdRead(t.Context(), budget/readCopies+1, "nb"); !errors.Is(err, ErrReadTooLarge) {
		t.Fatalf("a read larger than the budget: %v, want ErrReadTooLarge", err)
	}
	release, err = s.holdRead(short(), budget/readCopies, "nb")
	if err != nil {
		t.Fatalf("a read of the whole budget: %v", err)
	}
	release()
}
