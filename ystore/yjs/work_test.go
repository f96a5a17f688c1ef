package yjs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/yjs/yjstest"
	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/ynotebook/ysessions"
)

// TestWorkBound: structs inserted concurrently at one place, a client each (a crafted
// store: the conflict scan of each walks all the earlier ones), fail the document once
// their scans pass the work bound, before the quadratic cost of the rest is paid: every
// later update is refused with the same *WorkError, cheaply.
func TestWorkBound(t *testing.T) {
	const n = 40_000
	for _, tt := range []struct {
		name   string
		update func(client uint64) []byte
	}{
		{"text", func(c uint64) []byte { return yjstest.TextAt(c, 0, "source", "x") }},
		{"map key", func(c uint64) []byte { return yjstest.MapSet(c, "meta", "k", "v") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDoc()
			failedAt := -1
			var first error
			for i := range n {
				_, err := d.ApplyUpdate(tt.update(uint64(i + 1))) // each client higher: scans go to the end
				if err == nil {
					continue
				}
				var we *WorkError
				if !errors.As(err, &we) || !errors.Is(err, ErrWork) {
					t.Fatalf("update %d: %v, want a *WorkError", i, err)
				}
				if failedAt < 0 {
					failedAt, first = i, err
				} else if err != first {
					t.Fatalf("update %d: %v, want the document's failure %v again", i, err, first)
				}
			}
			// n²/2 steps in all; the bound is passed where i²/2 > workBase + workPerStruct·i.
			if failedAt < 0 || failedAt > 12_000 {
				t.Fatalf("failed at update %d of %d", failedAt, n)
			}
			t.Logf("failed at update %d", failedAt)
		})
	}
}

// TestWorkOfRealSessions: the recorded notebook sessions (replicas typing, moving cells,
// outputs), delivered in order and shuffled, take no more work than the bound gives for
// their structs alone: the document's base is left whole.
func TestWorkOfRealSessions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range ysessions.All(t) {
		ups := s.UpdateBytes()
		for _, order := range [][][]byte{ups, shuffledCopy(rng, ups)} {
			d := NewDoc()
			for i, u := range order {
				if _, err := d.ApplyUpdate(u); err != nil {
					t.Fatalf("%s update %d: %v", s.Name, i, err)
				}
			}
			if d.work < workBase {
				t.Fatalf("%s: work left %d, below the base %d", s.Name, d.work, workBase)
			}
		}
	}
}

func shuffledCopy(rng *rand.Rand, ups [][]byte) [][]byte {
	out := append([][]byte(nil), ups...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestPendingDeletesCostTheirClient: a row deleting 300,000 ranges of a client the
// document does not have yet (held pending, as in yrs) is not tried again by every later
// row of other clients (each row cost 14.5 ms, all 300,000 ranges, before), and is
// applied once its client's structs come.
func TestPendingDeletesCostTheirClient(t *testing.T) {
	d := NewDoc()
	if _, err := d.ApplyUpdate(yjstest.Deletes(1, 0, 2, 300_000)); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for clock := range uint64(100) {
		if _, err := d.ApplyUpdate(yjstest.Char(2, "source", clock)); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 10<<20 {
		t.Fatalf("100 keystrokes allocated %d B: the pending deletes were tried again", n)
	}
	if _, err := d.ApplyUpdate(yjstest.Text(1, "other", "abcdef")); err != nil {
		t.Fatal(err)
	}
	if got := d.Text("other").String(); got != "bdf" {
		t.Fatalf("client 1's text %q, want %q: its pending deletes applied", got, "bdf")
	}
	if got := d.Text("source").String(); got != strings.Repeat("x", 100) {
		t.Fatalf("client 2's text %q", got)
	}

	// Deletes of a client's own clocks ahead of its typing wait until its state reaches
	// them, not tried at each keystroke before (red team pass 18b, N1: 36 s for 5,000
	// keystrokes), and apply as it types through them.
	d = NewDoc()
	if _, err := d.ApplyUpdate(yjstest.Deletes(2, 10_000, 2, 100_000)); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&before)
	for clock := range uint64(12_000) {
		if _, err := d.ApplyUpdate(yjstest.Char(2, "source", clock)); err != nil {
			t.Fatalf("keystroke %d: %v", clock, err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Fatalf("12,000 keystrokes allocated %d B: the deletes ahead were tried again", n)
	}
	if got := d.Text("source").String(); got != strings.Repeat("x", 11_000) {
		t.Fatalf("text of %d characters, want 11,000: clocks 10,000 to 11,998 deleted", len(got))
	}
}

// TestStackOfClients: one update of 200,000 clients, each struct after the one of the
// client below it, is integrated from the highest client down, each waiting on the
// stack for the next (Yjs's order): asking whether a client is on the stack walked it,
// and the update took 33 s to minutes. It reads in time linear in its clients, as one text.
func TestStackOfClients(t *testing.T) {
	const n = 200_000
	d := NewDoc()
	start := time.Now()
	if _, err := d.ApplyUpdate(yjstest.Clients(1, "source", n)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("%d clients in one update took %v", n, took)
	}
	if got := d.Text("source").String(); got != strings.Repeat("x", n) {
		t.Fatalf("text of %d characters, want %d", len(got), n)
	}
}

// TestPendingStructsCostTheirClock: a row of 20,000 structs, a client each, that wait
// for clocks of a typing client (red team pass 18c, N5). Before, each keystroke tried
// them all again (yrs's retry, at every move of the client's state): 2,000 keystrokes
// took minutes. Structs waiting for clocks the client never reaches are not tried again
// (a retry before them integrates nothing); structs it reaches one after another are,
// as in yrs, and each try is work: the document fails at the bound.
func TestPendingStructsCostTheirClock(t *testing.T) {
	const r, n = 20_000, 2_000
	type2 := func(d *Doc, from, to uint64) error {
		for clock := from; clock < to; clock++ {
			if _, err := d.ApplyUpdate(yjstest.Char(2, "source", clock)); err != nil {
				return fmt.Errorf("keystroke %d: %w", clock, err)
			}
		}
		return nil
	}

	d := NewDoc()
	if err := type2(d, 0, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ApplyUpdate(yjstest.Waiting(100, r, 2, 10_000_000, 1)); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := type2(d, 10, n); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if a := after.TotalAlloc - before.TotalAlloc; a > 16<<20 {
		t.Fatalf("%d keystrokes allocated %d B: the waiting structs were tried again", n, a)
	}
	if got := d.Text("source").String(); got != strings.Repeat("x", n) {
		t.Fatalf("text of %d characters, want %d", len(got), n)
	}
	if len(d.pending) != r {
		t.Fatalf("%d clients pending, want %d", len(d.pending), r)
	}

	// Waits the typing reaches, one every other keystroke: each is a retry of all.
	d = NewDoc()
	if err := type2(d, 0, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ApplyUpdate(yjstest.Waiting(100, r, 2, 10, 2)); err != nil {
		t.Fatal(err)
	}
	err := type2(d, 10, n)
	var we *WorkError
	if !errors.As(err, &we) || we.What != "pending structs" {
		t.Fatalf("%v, want the pending structs past the work bound", err)
	}
	t.Log(err)
}

// TestWorkOfOfflinePrepends: two writers each put 12,000 lines, one struct of 40
// characters each, at the start of one text while apart, then merge: each line of the
// second is scanned past every line of the first (YATA, as in yrs), 144 million steps.
// That history is not crafted (red team pass 18c, N4: scripts or agents each adding a
// line at a cell's top offline); a share per struct alone failed it, one that grows with
// the content a struct brings reads it whole.
func TestWorkOfOfflinePrepends(t *testing.T) {
	const n = 12_000
	line := strings.Repeat("#", 39) + "\n"
	d := NewDoc()
	for _, c := range []uint64{1, 2} {
		for i := range uint64(n) {
			u := yjstest.TextAt(c, 0, "source", line)
			if i > 0 {
				u = yjstest.Before(c, i*40, c, (i-1)*40, line)
			}
			if _, err := d.ApplyUpdate(u); err != nil {
				t.Fatalf("writer %d, line %d: %v", c, i, err)
			}
		}
	}
	if got := d.Text("source").Len(); got != 2*n*40 {
		t.Fatalf("text of %d characters, want %d", got, 2*n*40)
	}
}

// TestPendingDeletesInSkips: deletes inside a Skip of a typing client (its struct far
// ahead, its keystrokes filling the gap from below) are tried again only when the clocks
// they delete come: before, every keystroke tried all of them and the crafted row failed
// the document at the bound (red team pass 18c, N6; pycrdt reads it whole).
func TestPendingDeletesInSkips(t *testing.T) {
	const r, n = 100_000, 5_000
	d := NewDoc()
	for _, u := range [][]byte{
		yjstest.Text(2, "source", "0123456789"),
		yjstest.After(2, 10_000_000, 2, 9, "Z"), // a Skip of clocks 10 to 9,999,999
		yjstest.Deletes(2, 1_000_000, 2, r),     // in it, never filled here
		yjstest.Deletes(2, 15, 1, 1),            // in it, filled by the sixth keystroke
	} {
		if _, err := d.ApplyUpdate(u); err != nil {
			t.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for clock := uint64(10); clock < 10+n; clock++ {
		if _, err := d.ApplyUpdate(yjstest.Char(2, "source", clock)); err != nil {
			t.Fatalf("keystroke %d: %v", clock, err)
		}
	}
	runtime.ReadMemStats(&after)
	if a := after.TotalAlloc - before.TotalAlloc; a > 16<<20 {
		t.Fatalf("%d keystrokes allocated %d B: the deletes in the Skip were tried again", n, a)
	}
	if got, want := d.Text("source").Len(), 10+n+1-1; got != want {
		t.Fatalf("text of %d characters, want %d: the delete of clock 15 applied once filled", got, want)
	}
	if got := len(d.pendingDS[2]); got != r {
		t.Fatalf("%d delete ranges pending, want %d", got, r)
	}
}
