//go:build !linux

package confine

import (
	"errors"
	"io/fs"
	"os"
)

// ErrMoved: see locate_linux.go.
var ErrMoved = errors.New("file moved while being located")

// Located: see locate_linux.go.
type Located struct {
	Dir  *os.File
	Name string
	Info fs.FileInfo
	UID  int
}

// Close closes the directory.
func (l *Located) Close() error { return l.Dir.Close() }

// Locate needs Linux (/proc/self/fd); elsewhere it refuses.
func (d *Dir) Locate(path string) (*Located, error) {
	return nil, errors.ErrUnsupported
}
