package sidecartest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// ProcStatus is a size field of /proc/pid/status (VmRSS, RssAnon, RssFile) in MB.
func ProcStatus(t *testing.T, pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024 / 1e6
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// EnvInt is the integer in the environment variable name, def if unset; anything else fails the test.
func EnvInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}
