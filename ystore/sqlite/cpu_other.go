//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package sqlite

import "time"

// threadCPU reports no thread CPU time where the platform offers no per-thread clock;
// the CPU histogram then stays at zero and the wall-clock one remains.
func threadCPU() time.Duration { return 0 }
