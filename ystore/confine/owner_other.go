//go:build !unix

package confine

import (
	"errors"
	"io/fs"
)

// OwnerUID: without unix owners, only "" (no check) is supported.
func (d Dir) OwnerUID() (int, error) {
	if d.Owner == "" {
		return -1, nil
	}
	return 0, errors.ErrUnsupported
}

// Owned checks nothing but that no owner is asked for.
func Owned(fi fs.FileInfo, uid int) error {
	if uid < 0 {
		return nil
	}
	return errors.ErrUnsupported
}
