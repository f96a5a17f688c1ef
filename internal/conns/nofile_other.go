//go:build !unix

package conns

// openFilesLimit reports no limit where the platform has no RLIMIT_NOFILE.
func openFilesLimit() (limit uint64, ok bool) { return 0, false }
