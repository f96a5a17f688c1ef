//go:build !linux

package sqlite

// openHookErr: outside Linux, SQLite's open system call is left as it is (see
// nonblock_linux.go): a named pipe put at the store path between the tailer's check of
// the path and SQLite's open can still block that open.
var openHookErr error
