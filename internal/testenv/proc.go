package testenv

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ReadProcStatus is a size field of /proc/pid/status (VmRSS, VmHWM, RssAnon, RssFile)
// in kB: the harness's one reader of it.
func ReadProcStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// ProcStatus is ReadProcStatus in MB (10^6 bytes); it fails the test when the field
// cannot be read.
func ProcStatus(t testing.TB, pid int, field string) float64 {
	t.Helper()
	kb, err := ReadProcStatus(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return float64(kb) * 1024 / 1e6
}

// ProcCPU is the user and system CPU time process pid has used so far, from
// /proc/pid/stat (clock ticks of 10 ms); it fails the test when it cannot be read.
func ProcCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name, which is in parentheses and may hold spaces:
	// utime and stime are the 14th and 15th of the line.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ 100
}

// ReadOpenFiles counts the open files of process pid whose target contains what (""
// : all of them): ".db" for SQLite files, "inotify" for inotify instances.
func ReadOpenFiles(pid int, what string) (int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.Contains(target, what) {
			n++
		}
	}
	return n, nil
}

// OpenFiles is ReadOpenFiles; it fails the test when /proc/pid/fd cannot be read.
func OpenFiles(t testing.TB, pid int, what string) int {
	t.Helper()
	n, err := ReadOpenFiles(pid, what)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// LoadAvg is the machine's load average, as /proc/loadavg says it ("?" when unknown).
func LoadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
