//go:build !linux

package sqlitevfs

import (
	"errors"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/ystore/confine"
)

// HookErr: outside Linux, SQLite's system calls are left as they are (see
// vfs_linux.go): a named pipe put at a store path between the check of the path and
// SQLite's open can still block that open, and no database can be confined.
var HookErr = errors.ErrUnsupported

// Confined: see vfs_linux.go.
type Confined struct{}

// Confine needs Linux.
func Confine(l *confine.Located) (*Confined, error) { return nil, HookErr }

// Name is never called: Confine fails.
func (c *Confined) Name() string { return "" }

// Close does nothing.
func (c *Confined) Close() error { return nil }
