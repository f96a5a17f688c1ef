//go:build unix

package confine

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// OwnerUID is the user's uid: the owner of d.Owner (-1 when d.Owner is "").
func (d Dir) OwnerUID() (int, error) {
	if d.Owner == "" {
		return -1, nil
	}
	fi, err := os.Stat(d.Owner)
	if err != nil {
		return 0, fmt.Errorf("the user's directory: %w", err)
	}
	return uidOf(fi), nil
}

// Owned checks that fi belongs to uid (any owner when uid is negative).
func Owned(fi fs.FileInfo, uid int) error {
	if uid < 0 {
		return nil
	}
	if got := uidOf(fi); got != uid {
		return fmt.Errorf("%s (owner uid %d, the user is uid %d): %w", fi.Name(), got, uid, ErrNotOwned)
	}
	return nil
}

// uidOf is fi's owner, -1 if unknown.
func uidOf(fi fs.FileInfo) int {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1
	}
	return int(st.Uid)
}
