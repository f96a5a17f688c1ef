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
// files. c is nil for another name, one no longer registered, or a file SQLite has no
// business opening. The caller holds registry read-locked.
func lookup(name string) (c *Confined, file string) {
	rest, ok := strings.CutPrefix(name, prefix)
	id, file, found := strings.Cut(rest, "/")
	n, err := strconv.ParseUint(id, 10, 64)
	if !ok || !found || err != nil || registry.m[n] == nil {
		return nil, ""
	}
	c = registry.m[n]
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		if file == c.base+suffix {
			return c, file
		}
	}
	return nil, ""
}
