package registry

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := New[int]("widget")
	r.Register("b", 2)
	r.Register("a", 1)
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Names = %v", got)
	}
	if f, err := r.Lookup("b"); err != nil || f != 2 {
		t.Fatalf("Lookup(b) = %v, %v", f, err)
	}
	_, err := r.Lookup("c")
	if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), `unknown widget "c" (registered: [a b])`) {
		t.Fatalf("Lookup(c) error = %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate Register did not panic")
		}
	}()
	r.Register("a", 3)
}
