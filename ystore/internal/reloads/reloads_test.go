package reloads

import (
	"maps"
	"slices"
	"testing"
)

func TestRequests(t *testing.T) {
	r := New()
	if r.Asked() || r.Take() != nil {
		t.Fatal("asked before any Ask")
	}
	r.Ask("a")
	r.Ask("b")
	r.Ask("a")
	select {
	case <-r.Wake():
	default:
		t.Fatal("Ask did not wake")
	}
	if !r.Asked() {
		t.Fatal("not asked after Ask")
	}
	if got := slices.Sorted(maps.Keys(r.Take())); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("took %v, want [a b]", got)
	}
	if r.Asked() || r.Take() != nil {
		t.Fatal("asked after Take")
	}
}
