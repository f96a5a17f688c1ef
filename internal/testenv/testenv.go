// Package testenv is the test harness every package's tests share: waiting for a
// condition (Eventually, Within, Receive), the one buffer safe for concurrent writers
// (LockedBuffer), the one reader of metrics (Metric and Gather from a registry;
// ParseMetrics and Scrape from a /metrics body; Sum on either, Series for a failure
// message), the one launcher of a helper process the test drives through pipes
// (StartChild), the one reader of /proc (ProcStatus, ReadProcStat, ProcCPU, MachineCPU,
// OpenFiles, LoadAvg), a free loopback port, the code blocks of the documents
// (DocBlocks), and the rule that a missing test dependency skips a test on a
// developer's machine but fails it on CI (Need).
//
// It imports nothing of the module, so that the tests of every package, the lowest
// layers' included, can import it. Its subpackages start the real things the
// integration tests run: jupytertest (a Jupyter server with jupyter-collaboration and
// its Python clients), browser (people in JupyterLab or at a JupyterHub's login in
// Chromium, the Go side of testdata/browser), jhubtest (a JupyterHub) and sidecartest
// (the built sidecar binary, its one launcher, its store writer and MCP clients).
// Nothing outside tests imports any of them.
package testenv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Wait is the deadline tests use when they have no reason to choose another: long
// enough for a loaded 2-core CI machine running -race, and only ever reached when a
// test is failing, since a wait returns as soon as its condition holds.
const Wait = 30 * time.Second

// poll is how often Eventually evaluates its condition.
const poll = 5 * time.Millisecond

// Eventually waits until cond holds and fails the test (naming what it waited for) if
// it does not within d. state, if given, adds the situation at the deadline to the
// failure message.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool, state ...func() string) {
	t.Helper()
	if err := Within(d, cond); err != nil {
		msg := fmt.Sprintf("%s: %v", what, err)
		for _, s := range state {
			msg += ": " + s()
		}
		t.Fatal(msg)
	}
}

// Within waits until cond holds and returns an error if it does not within d; for the
// goroutines of a test, where t.Fatal must not be called.
func Within(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", d)
		}
		time.Sleep(poll)
	}
	return nil
}

// Receive waits for a value from ch and fails the test if none arrives within d or ch
// is closed.
func Receive[T any](t testing.TB, d time.Duration, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing within %v", what, d)
	}
	var zero T
	return zero
}

// OnCI reports whether the tests run on CI (CI=true), where every dependency of the
// suite is installed and a missing one is a failure.
func OnCI() bool { return os.Getenv("CI") == "true" }

// Need skips the test when err (a missing dependency) is not nil, or fails it on CI.
// how says how to install it.
func Need(t testing.TB, err error, how string) {
	t.Helper()
	if err == nil {
		return
	}
	if OnCI() {
		t.Fatalf("%v: required on CI (%s)", err, how)
		return
	}
	t.Skipf("%v (%s)", err, how)
}

// LockedBuffer is a bytes.Buffer safe for concurrent use, e.g. as a logger's output
// that a test reads while the code under test writes.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Contains reports whether what was written so far contains s.
func (b *LockedBuffer) Contains(s string) bool { return strings.Contains(b.String(), s) }

// Testdata is the path of elem under the repository's testdata directory.
func Testdata(elem ...string) string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(self), "..", "..", "testdata"}, elem...)...)
}

// FreeAddr returns a loopback host:port nothing listens on right now.
//
// The port is below the kernel's ephemeral range, which bind(0) draws from, so no
// process binding port 0 meanwhile (a Jupyter server, a proxy the test starts) can take
// it before the test's own listener binds it; ports handed out before in this process
// are not handed out again.
func FreeAddr(t testing.TB) string {
	t.Helper()
	low := ephemeralLow()
	for range 1000 {
		port := freeFloor + rand.IntN(low-freeFloor)
		if _, dup := handedOut.LoadOrStore(port, true); dup {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		return addr
	}
	t.Fatalf("no free loopback port in [%d, %d)", freeFloor, low)
	return ""
}

// freeFloor is the lowest port FreeAddr hands out.
const freeFloor = 20000

// handedOut holds the ports FreeAddr handed out in this process.
var handedOut sync.Map

// ephemeralLow is the start of the kernel's ephemeral port range (Linux's
// ip_local_port_range; 32768 where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	if n, err := strconv.Atoi(f[0]); err == nil && n > freeFloor+1000 {
		return n
	}
	return 32768
}

// FreePort is the port of FreeAddr.
func FreePort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(FreeAddr(t))
	n, _ := strconv.Atoi(port)
	return n
}

// Stranger is the uid and gid GiveAway gives a file: no user of the test's machine.
const Stranger = 4242

// Homes makes a directory (mode 0700, as users' homes are) for each name under a new
// temporary directory and returns their paths, in the order of names: the users of a
// confinement test.
func Homes(t testing.TB, names ...string) []string {
	t.Helper()
	top := t.TempDir()
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(top, n)
		if err := os.Mkdir(out[i], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// GiveAway makes path owned by Stranger, a file that is not the test user's; it skips
// the test unless it runs as root, the only user who may give a file away.
func GiveAway(t testing.TB, path string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("a file of another owner needs root to make (chown)")
	}
	if err := os.Chown(path, Stranger, Stranger); err != nil {
		t.Fatal(err)
	}
}

// Flood is a client without a token holding as many connections to addr as it can:
// n goroutines each keep one connection open that sends send ("" : nothing) and then
// nothing more, or, with trickle > 0, one more byte of a header line every trickle,
// opening a new one as soon as the server closes it, until the test ends. It returns
// the number of connections opened so far, and waits for the first n.
func Flood(t testing.TB, addr string, n int, send string, trickle time.Duration) (opened func() int64) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var count atomic.Int64
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				c, err := net.Dial("tcp", addr)
				if err != nil {
					continue
				}
				count.Add(1)
				if send != "" {
					_, _ = c.Write([]byte(send))
				}
				stop := make(chan struct{})
				go func() {
					defer c.Close()
					var tick <-chan time.Time
					if trickle > 0 {
						tk := time.NewTicker(trickle)
						defer tk.Stop()
						tick = tk.C
					}
					for {
						select {
						case <-done:
							return
						case <-stop:
							return
						case <-tick:
							_, _ = c.Write([]byte("a"))
						}
					}
				}()
				var b [1]byte
				for { // until the server closes it
					if _, err := c.Read(b[:]); err != nil {
						break
					}
				}
				close(stop)
			}
		})
	}
	t.Cleanup(func() { close(done); wg.Wait() })
	Eventually(t, Wait, fmt.Sprintf("a flood of %d connections under way", n), func() bool { return count.Load() >= int64(n) })
	return count.Load
}

// Mallocs returns how many heap allocations f made (runtime.MemStats.Mallocs): a measure
// of work that, unlike time, hardly depends on how busy the machine is.
func Mallocs(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}
