package resources

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/jsonenc"
)

// TestReadsHoldTheirMemoryUntilAnswered: what a read builds is held from the budget of
// reads in flight (MaxReadBytes) until its answer is written, not only while its handler
// runs; a read past the budget waits for others to end, and one larger than the whole is
// refused (it ran alone, and held 5 times its notebook of 60 MB past its user's bound).
// A read whose transport writes its text itself holds its JSON only; otherwise also the
// answer encoding it, in buffers of up to 3 times that. One user reading her notebook of
// 60 MB eight times at once built 1.5 GB.
func TestReadsHoldTheirMemoryUntilAnswered(t *testing.T) {
	const budget = 30 << 20
	s := &Server{cfg: Config{Limits: Limits{MaxReadBytes: budget}}, reads: semaphore.NewWeighted(budget)}
	short := func(ctx context.Context) context.Context {
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	mb := func(n int64) jsonenc.Size { return jsonenc.Size{JSON: n << 20, AsString: n<<20 + 2} }

	// A read of 1.5 MB answered through a transport: 1.5 + 3×1.5 = 6 MB held until its
	// answer is written.
	ctx, answered := WithAnswered(t.Context())
	release, err := s.holdRead(ctx, jsonenc.Size{JSON: 3 << 19, AsString: 3 << 19}, "nb")
	if err != nil {
		t.Fatal(err)
	}
	release() // the handler returned; its answer is not written yet
	if _, err := s.holdRead(short(ctx), mb(6), "nb"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read of 24 MB beside 6 MB held of 30: %v, want it to wait", err)
	}
	answered()
	release, err = s.holdRead(short(t.Context()), mb(6), "nb")
	if err != nil {
		t.Fatalf("a read once the first was answered: %v", err)
	}
	release() // without a transport that says when: given back as the handler returns

	// Larger than the budget: refused, and holds nothing; its text streamed, a read of
	// 20 MB holds 20.
	if _, err := s.holdRead(t.Context(), mb(8), "nb"); !errors.Is(err, ErrReadTooLarge) {
		t.Fatalf("a read of 8 MB (32 MB to answer) in a budget of 30: %v, want ErrReadTooLarge", err)
	}
	streamed, st := WithStreamedText(t.Context(), "p")
	release, err = s.holdRead(short(streamed), mb(20), "nb")
	if err != nil {
		t.Fatalf("a read of 20 MB whose text is streamed, in a budget of 30: %v", err)
	}
	if _, err := s.holdRead(short(streamed), mb(11), "nb"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read of 11 MB beside 20 MB held of 30: %v, want it to wait", err)
	}
	release()
	if text := answerText(streamed, []byte("body")); text != "p" || string(st.Text) != "body" {
		t.Fatalf("answer text %q, streamed %q", text, st.Text)
	}
}
