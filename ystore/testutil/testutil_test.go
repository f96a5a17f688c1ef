package testutil

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatal and Skip record instead of stopping the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Fatal(args ...any)            { r.fatal = fmt.Sprint(args...) }
func (r *recorder) Fatalf(f string, args ...any) { r.fatal = fmt.Sprintf(f, args...) }
func (r *recorder) Skipf(f string, args ...any)  { r.skip = fmt.Sprintf(f, args...) }

func TestEventually(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	Eventually(t, Wait, "three increments", func() bool { return n.Load() == 3 })

	r := &recorder{TB: t}
	start := time.Now()
	Eventually(r, 50*time.Millisecond, "never", func() bool { return false }, func() string { return "state" })
	if !strings.Contains(r.fatal, "never: not within 50ms: state") {
		t.Fatalf("a condition that never holds failed the test with %q", r.fatal)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before its deadline", el)
	}
}

func TestReceive(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if v := Receive(t, Wait, "a value", ch); v != 7 {
		t.Fatalf("got %d", v)
	}
	r := &recorder{TB: t}
	Receive(r, 20*time.Millisecond, "nothing", ch)
	if r.fatal == "" {
		t.Fatal("an empty channel did not fail the test")
	}
	close(ch)
	r = &recorder{TB: t}
	Receive(r, Wait, "closed", ch)
	if r.fatal == "" {
		t.Fatal("a closed channel did not fail the test")
	}
}

func TestNeed(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		Need(r, errors.New("node missing"), "npm ci")
		if got := r.fatal != ""; got != (ci == "true") {
			t.Errorf("CI=%q: failed %v, skipped %v", ci, r.fatal != "", r.skip != "")
		}
		if got := r.skip != ""; got != (ci != "true") {
			t.Errorf("CI=%q: skipped %v", ci, got)
		}
		r = &recorder{TB: t}
		Need(r, nil, "npm ci")
		if r.fatal != "" || r.skip != "" {
			t.Errorf("CI=%q: nothing missing, yet %q %q", ci, r.fatal, r.skip)
		}
	}
}

func TestLockedBuffer(t *testing.T) {
	var b LockedBuffer
	done := make(chan struct{})
	go func() { defer close(done); _, _ = b.Write([]byte("a")) }()
	_, _ = b.Write([]byte("b"))
	<-done
	if s := b.String(); len(s) != 2 || !b.Contains("a") || !b.Contains("b") {
		t.Fatalf("buffer %q", s)
	}
}
