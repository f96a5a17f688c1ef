package postgres

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrSnapshot is wrapped by errors decoding a pg_snapshot.
var ErrSnapshot = errors.New("invalid pg_snapshot")

// Snapshot is a decoded pg_snapshot ("xmin:xmax:xip,…"): transactions below Xmin are
// finished, those at or above Xmax had not started, and Xip lists those in progress
// between them. The tailer's cursor is the snapshot of its last read: every row visible in
// it has been delivered, so the next read asks for the rows not visible in it.
type Snapshot struct {
	Xmin, Xmax uint64
	Xip        []uint64
}

// ParseSnapshot decodes the text form of a pg_snapshot.
func ParseSnapshot(s string) (Snapshot, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Snapshot{}, fmt.Errorf("%q: want xmin:xmax:xip: %w", s, ErrSnapshot)
	}
	var snap Snapshot
	var err error
	if snap.Xmin, err = parseXid(parts[0]); err != nil {
		return Snapshot{}, fmt.Errorf("%q: xmin: %w", s, err)
	}
	if snap.Xmax, err = parseXid(parts[1]); err != nil {
		return Snapshot{}, fmt.Errorf("%q: xmax: %w", s, err)
	}
	if snap.Xmax < snap.Xmin {
		return Snapshot{}, fmt.Errorf("%q: xmax below xmin: %w", s, ErrSnapshot)
	}
	if parts[2] == "" {
		return snap, nil
	}
	prev := snap.Xmin
	for i, f := range strings.Split(parts[2], ",") {
		x, err := parseXid(f)
		if err != nil {
			return Snapshot{}, fmt.Errorf("%q: xip %d: %w", s, i, err)
		}
		if x < prev || x >= snap.Xmax || (i > 0 && x == prev) {
			return Snapshot{}, fmt.Errorf("%q: xip %d out of order or range: %w", s, i, ErrSnapshot)
		}
		snap.Xip = append(snap.Xip, x)
		prev = x
	}
	return snap, nil
}

// parseXid decodes one decimal xid8.
func parseXid(s string) (uint64, error) {
	if s == "" || s[0] == '+' {
		return 0, fmt.Errorf("xid %q: %w", s, ErrSnapshot)
	}
	x, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("xid %q: %w: %w", s, ErrSnapshot, err)
	}
	return x, nil
}

// String encodes the snapshot in the text form PostgreSQL reads back as pg_snapshot.
func (s Snapshot) String() string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(s.Xmin, 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatUint(s.Xmax, 10))
	b.WriteByte(':')
	for i, x := range s.Xip {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(x, 10))
	}
	return b.String()
}

// Precedes reports whether every transaction visible in s is visible in later: false when
// later comes from a server whose transaction ids went backwards (a restore from backup,
// a different cluster), which voids a cursor.
func (s Snapshot) Precedes(later Snapshot) bool {
	return later.Xmin >= s.Xmin && later.Xmax >= s.Xmax
}
