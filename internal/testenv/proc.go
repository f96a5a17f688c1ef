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

// ProcStat is what the harness reads of /proc/pid/stat.
type ProcStat struct {
	PPid int           // the parent's pid
	CPU  time.Duration // user and system time the process has used
	// Children is the user and system time of its children that exited and were
	// waited for.
	Children time.Duration
}

// ReadProcStat reads /proc/pid/stat (clock ticks of 10 ms): the harness's one reader of it.
func ReadProcStat(pid int) (ProcStat, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcStat{}, err
	}
	// The fields after the command name, which is in parentheses and may hold spaces:
	// ppid is the 4th of the line, utime, stime, cutime and cstime the 14th to 17th.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	if len(f) < 15 {
		return ProcStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	n := make([]int64, 0, 5)
	for _, i := range []int{1, 11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return ProcStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		n = append(n, v)
	}
	tick := 10 * time.Millisecond // USER_HZ 100
	return ProcStat{PPid: int(n[0]), CPU: time.Duration(n[1]+n[2]) * tick, Children: time.Duration(n[3]+n[4]) * tick}, nil
}

// ProcCPU is the user and system CPU time process pid has used so far (ReadProcStat);
// it fails the test when it cannot be read.
func ProcCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	st, err := ReadProcStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.CPU
}

// MachineCPU is the time the machine's CPUs have been busy since boot (all but idle and
// waiting for I/O), summed over the CPUs, from /proc/stat.
func MachineCPU() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: %q", line)
	}
	var busy int64
	for i, v := range f[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond, nil
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
