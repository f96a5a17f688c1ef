// Package sqlitevfs adjusts the system calls of SQLite's unix VFS for every connection
// of the process (modernc.org/sqlite): no open blocks on a named pipe, and a database
// registered with Confine is opened, with its journal, WAL and shared-memory files,
// only inside the directory it was located in, never through a symbolic link, and only
// if it is still the file located there.
package sqlitevfs
