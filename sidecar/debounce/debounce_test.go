package debounce

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type flushRec struct {
	key string
	at  time.Duration
	val []int
}

func TestDebouncer(t *testing.T) {
	type add struct {
		at  time.Duration
		key string
		v   int
		ago time.Duration // the change happened this long before it was added (its commit time); 0: now
	}
	steady := func(key string, every, until time.Duration) []add {
		var out []add
		for at := time.Duration(0); at < until; at += every {
			out = append(out, add{at, key, int(at / every), 0})
		}
		return out
	}
	tests := []struct {
		name           string
		quiet, ceiling time.Duration
		adds           []add
		want           []flushRec
	}{
		{
			name: "single change flushes after the quiet period", quiet: 250 * time.Millisecond, ceiling: 2 * time.Second,
			adds: []add{{0, "a", 1, 0}},
			want: []flushRec{{"a", 250 * time.Millisecond, []int{1}}},
		},
		{
			name: "a burst is one flush after it pauses", quiet: 250 * time.Millisecond, ceiling: 2 * time.Second,
			adds: []add{{0, "a", 1, 0}, {100 * time.Millisecond, "a", 2, 0}, {300 * time.Millisecond, "a", 3, 0}},
			want: []flushRec{{"a", 550 * time.Millisecond, []int{1, 2, 3}}},
		},
		{
			name: "continuous edits flush at the ceiling", quiet: 250 * time.Millisecond, ceiling: 2 * time.Second,
			adds: steady("a", 90*time.Millisecond, 4500*time.Millisecond),
			want: []flushRec{
				{"a", 2000 * time.Millisecond, seq(0, 23)},
				{"a", 4070 * time.Millisecond, seq(23, 46)},
				{"a", 4660 * time.Millisecond, seq(46, 50)},
			},
		},
		{
			name: "keys are independent", quiet: 250 * time.Millisecond, ceiling: 2 * time.Second,
			adds: []add{{0, "a", 1, 0}, {100 * time.Millisecond, "b", 2, 0}, {200 * time.Millisecond, "a", 3, 0}},
			want: []flushRec{{"b", 350 * time.Millisecond, []int{2}}, {"a", 450 * time.Millisecond, []int{1, 3}}},
		},
		{
			name: "the quiet period counts from the change's time", quiet: 250 * time.Millisecond, ceiling: 2 * time.Second,
			adds: []add{{100 * time.Millisecond, "a", 1, 40 * time.Millisecond}},
			want: []flushRec{{"a", 310 * time.Millisecond, []int{1}}},
		},
		{
			name: "and from the latest change's, not from an older one added after it", quiet: 250 * time.Millisecond, ceiling: 2 * time.Second,
			adds: []add{{100 * time.Millisecond, "a", 1, 10 * time.Millisecond}, {150 * time.Millisecond, "a", 2, 200 * time.Millisecond}},
			want: []flushRec{{"a", 340 * time.Millisecond, []int{1, 2}}},
		},
		{
			name: "the ceiling counts from the first change's time", quiet: 250 * time.Millisecond, ceiling: 2 * time.Second,
			adds: append([]add{{0, "a", 0, 50 * time.Millisecond}}, steady("a", 90*time.Millisecond, 2100*time.Millisecond)[1:]...),
			want: []flushRec{{"a", 1950 * time.Millisecond, seq(0, 22)}, {"a", 2320 * time.Millisecond, seq(22, 24)}},
		},
		{
			name: "a change added a quiet period or more after its time counts from now", quiet: 250 * time.Millisecond, ceiling: 2 * time.Second,
			adds: []add{{100 * time.Millisecond, "a", 1, 250 * time.Millisecond}, {1000 * time.Millisecond, "b", 2, 5 * time.Second}},
			want: []flushRec{{"a", 350 * time.Millisecond, []int{1}}, {"b", 1250 * time.Millisecond, []int{2}}},
		},
		{
			name: "a change's time after now counts as now", quiet: 250 * time.Millisecond, ceiling: 2 * time.Second,
			adds: []add{{100 * time.Millisecond, "a", 1, -time.Second}},
			want: []flushRec{{"a", 350 * time.Millisecond, []int{1}}},
		},
		{
			name: "zero quiet flushes every change", quiet: 0, ceiling: 0,
			adds: []add{{0, "a", 1, 0}, {10 * time.Millisecond, "a", 2, 0}},
			want: []flushRec{{"a", 0, []int{1}}, {"a", 10 * time.Millisecond, []int{2}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var mu sync.Mutex
				var got []flushRec
				d := New(tt.quiet, tt.ceiling,
					func(old, add []int) []int { return append(old, add...) },
					func(k string, v []int) {
						mu.Lock()
						got = append(got, flushRec{k, time.Since(start), v})
						mu.Unlock()
					})
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { _ = d.Run(ctx); close(done) }()
				// In the bubble, time.Sleep advances the fake clock once every goroutine is
				// blocked: the adds land at exactly a.at, and no real time passes.
				for _, a := range tt.adds {
					time.Sleep(a.at - time.Since(start))
					at := time.Time{}
					if a.ago != 0 {
						at = time.Now().Add(-a.ago)
					}
					d.Add(a.key, []int{a.v}, at)
				}
				time.Sleep(tt.ceiling + time.Second) // past every timer (fake clock)
				synctest.Wait()
				cancel()
				<-done
				mu.Lock()
				defer mu.Unlock()
				if !slices.EqualFunc(got, tt.want, func(a, b flushRec) bool {
					return a.key == b.key && a.at == b.at && slices.Equal(a.val, b.val)
				}) {
					t.Fatalf("flushes:\n got %v\nwant %v", got, tt.want)
				}
				if n := d.Pending(); n != 0 {
					t.Fatalf("pending after flush = %d", n)
				}
			})
		})
	}
}

func TestStopDropsPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flushed := 0
		d := New(time.Second, 2*time.Second, func(a, b int) int { return a + b }, func(string, int) { flushed++ })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = d.Run(ctx); close(done) }()
		d.Add("a", 1, time.Now())
		cancel()
		<-done
		time.Sleep(3 * time.Second) // past the ceiling (fake clock): the stopped timers would have fired
		synctest.Wait()
		if flushed != 0 || d.Pending() != 0 {
			t.Fatalf("flushed=%d pending=%d after stop", flushed, d.Pending())
		}
	})
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// Without a quiet period an Add is handed to Run as it is: never pending, flushed in the
// order of the Adds (keys interleaved), and dropped without blocking once Run returned.
func TestZeroQuietIsDirect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		d := New(0, 0, func(a, b int) int { return a + b }, func(k string, v int) { got = append(got, k+strconv.Itoa(v)) })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = d.Run(ctx); close(done) }()
		var want []string
		for i := range 200 { // more than the channel holds: Add waits for Run, never drops
			k := string(rune('a' + i%3))
			d.Add(k, i, time.Now())
			if n := d.Pending(); n != 0 {
				t.Fatalf("after Add %d: %d pending bursts, want none", i, n)
			}
			want = append(want, k+strconv.Itoa(i))
		}
		synctest.Wait()
		if !slices.Equal(got, want) {
			t.Fatalf("flushed %v\nwant %v", got, want)
		}
		cancel()
		<-done
		d.Add("late", 1, time.Now()) // returns: Run is gone
		if len(got) != len(want) {
			t.Fatalf("flushed after Run returned: %v", got[len(want):])
		}
	})
}
