package sidecartest

import (
	"os"
	"strconv"
	"testing"
)

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
