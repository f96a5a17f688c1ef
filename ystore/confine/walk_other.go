//go:build !linux

package confine

import (
	"errors"
	"os"
)

// fileID: see walk_linux.go.
type fileID struct{ dev, ino uint64 }

// openBase: confinement needs Linux (openat2 or O_NOFOLLOW walks, /proc/self/fd).
func openBase(string) (*os.File, error) { return nil, errors.ErrUnsupported }

func walk(*os.File, string) (*os.File, fileID, int, error) {
	return nil, fileID{}, 0, errors.ErrUnsupported
}

func rootOf(*os.File) (*os.Root, error) { return nil, errors.ErrUnsupported }
