//go:build !unix

package confine

import (
	"errors"
	"io/fs"
)

// Owned: without unix owners nothing can be confined.
func Owned(fs.FileInfo, int) error { return errors.ErrUnsupported }

// CheckOwner: see Owned.
func CheckOwner(string, int, uint64, bool, int) error { return errors.ErrUnsupported }
