package sqlitevfs

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// prefix starts the names Confine gives SQLite. They name no file (SQLite's search for
// symbolic links in a database's path finds none: every component is missing), so SQLite
// keeps them as they are and passes them to the system calls this package replaces,
// which map them to the located directory.
const prefix = "/.jupyter-mcp-sidecar-confined/"

// registry holds the confined databases by id; the hooks hold it read-locked while they
// use a directory, so that Close never closes one in use.
var registry = struct {
	sync.RWMutex
	m map[uint64]*Confined
}{m: map[uint64]*Confined{}}

var nextID atomic.Uint64

// lookup returns the confined database a name of Confine's is in, and the name of the
// file in its directory: the database itself or one of its journal, WAL or shared-memory
// files. ok is false for another name; c is nil for a name that is no longer registered
// or a file SQLite has no business opening. The caller holds registry read-locked.
func lookup(name string) (c *Confined, file string, ok bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return nil, "", false
	}
	id, file, found := strings.Cut(rest, "/")
	n, err := strconv.ParseUint(id, 10, 64)
	if !found || err != nil {
		return nil, "", true
	}
	c = registry.m[n]
	if c == nil {
		return nil, "", true
	}
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		if file == c.base+suffix {
			return c, file, true
		}
	}
	return nil, "", true
}
