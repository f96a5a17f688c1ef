//go:build unix

package conns

import "golang.org/x/sys/unix"

// openFilesLimit is the process's RLIMIT_NOFILE soft limit; ok false when it cannot be read.
func openFilesLimit() (limit uint64, ok bool) {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return 0, false
	}
	return l.Cur, true
}
