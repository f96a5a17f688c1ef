package resources

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// TestReadsHoldTheirMemoryUntilAnswered: what a read builds is held from the budget of
// reads in flight (MaxReadBytes) until its answer is written, not only while its handler
// runs; a read past the budget waits for others to end, and one larger than the whole
// runs alone. One user reading her notebook of 60 MB eight times at once built 1.5 GB.
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
	release, err := s.holdRead(ctx, 6<<20)
	if err != nil {
		t.Fatal(err)
	}
	release() // the handler returned; its answer is not written yet
	if _, err := s.holdRead(short(), 6<<20); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second read of 6 MB with 18 MB of 30 held: %v, want it to wait", err)
	}
	answered()
	release, err = s.holdRead(short(), 6<<20)
	if err != nil {
		t.Fatalf("a read once the first was answered: %v", err)
	}
	release() // without a transport that says when: given back as the handler returns

	// A read larger than the budget takes it whole and runs alone.
	release, err = s.holdRead(t.Context(), 100<<20)
	if err != nil {
		t.Fatalf("a read larger than the budget: %v", err)
	}
	if _, err := s.holdRead(short(), 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read beside one larger than the budget: %v, want it to wait", err)
	}
	release()
	if _, err := s.holdRead(short(), 1); err != nil {
		t.Fatalf("a read once the large one ended: %v", err)
	}
}

// TestJSONBytesBoundsTheEncoding: the bytes a read's JSON is counted at are no fewer than
// encoding/json writes, escapes included: a source of control characters encodes to six
// times its size.
func TestJSONBytesBoundsTheEncoding(t *testing.T) {
	for _, v := range []any{
		strings.Repeat("\x01", 1000), strings.Repeat("<&>", 100), `"\"\\`, "plain text", "\u2028\u2029",
		map[string]any{"a\x01": []any{1.5, true, nil, "x<"}, "b": map[string]any{}},
		[]map[string]any{{"k": strings.Repeat("\"", 50)}},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if n := jsonBytes(v); n < int64(len(b)) {
			t.Errorf("%.40q: counted %d bytes, encodes to %d", b, n, len(b))
		}
	}
}
