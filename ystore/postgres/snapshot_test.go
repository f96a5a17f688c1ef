package postgres

import (
	"errors"
	"slices"
	"testing"
)

func TestParseSnapshot(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Snapshot
		ok   bool
	}{
		{"10:10:", Snapshot{Xmin: 10, Xmax: 10}, true},
		{"10:20:10,15,19", Snapshot{Xmin: 10, Xmax: 20, Xip: []uint64{10, 15, 19}}, true},
		{"18446744073709551614:18446744073709551615:", Snapshot{Xmin: 1<<64 - 2, Xmax: 1<<64 - 1}, true},
		{"", Snapshot{}, false},
		{"10:20", Snapshot{}, false},
		{"10:20:5", Snapshot{}, false},                 // xip below xmin
		{"10:20:20", Snapshot{}, false},                // xip at xmax
		{"10:20:15,12", Snapshot{}, false},             // unordered
		{"10:20:15,15", Snapshot{}, false},             // duplicate
		{"20:10:", Snapshot{}, false},                  // xmax below xmin
		{"+1:2:", Snapshot{}, false},                   // sign
		{"1:2:,", Snapshot{}, false},                   // empty xid
		{"1:18446744073709551616:", Snapshot{}, false}, // overflow
		{"a:2:", Snapshot{}, false},
	} {
		got, err := ParseSnapshot(tc.in)
		if tc.ok != (err == nil) {
			t.Errorf("ParseSnapshot(%q) error %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if !tc.ok {
			if !errors.Is(err, ErrSnapshot) {
				t.Errorf("ParseSnapshot(%q) error %v does not wrap ErrSnapshot", tc.in, err)
			}
			continue
		}
		if got.Xmin != tc.want.Xmin || got.Xmax != tc.want.Xmax || !slices.Equal(got.Xip, tc.want.Xip) {
			t.Errorf("ParseSnapshot(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("String() = %q, want %q", got.String(), tc.in)
		}
	}
}

func TestSnapshotPrecedes(t *testing.T) {
	a := Snapshot{Xmin: 10, Xmax: 20, Xip: []uint64{10}}
	for _, tc := range []struct {
		later Snapshot
		want  bool
	}{
		{Snapshot{Xmin: 10, Xmax: 20}, true},
		{Snapshot{Xmin: 25, Xmax: 25}, true},
		{Snapshot{Xmin: 5, Xmax: 25}, false},
		{Snapshot{Xmin: 3, Xmax: 3}, false},
	} {
		if got := a.Precedes(tc.later); got != tc.want {
			t.Errorf("%v.Precedes(%v) = %v, want %v", a, tc.later, got, tc.want)
		}
	}
}

func FuzzParseSnapshot(f *testing.F) {
	for _, s := range []string{"10:10:", "10:20:10,15,19", "1:2:", "", "::", "1:2:1,", "5:3:4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		snap, err := ParseSnapshot(s)
		if err != nil {
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("ParseSnapshot(%q): %v does not wrap ErrSnapshot", s, err)
			}
			return
		}
		again, err := ParseSnapshot(snap.String())
		if err != nil || again.String() != snap.String() {
			t.Fatalf("round trip of %q: %q, %v", s, again.String(), err)
		}
		if !snap.Precedes(snap) {
			t.Fatalf("%q does not precede itself", s)
		}
	})
}
