// Package pgtest locates, for the tests of any package, the throwaway PostgreSQL clusters
// that .ci/postgres.sh starts: a shared one, and one that tests may stop and restart.
package pgtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/internal/testenv"
)

// The environment variables .ci/postgres.sh exports.
const (
	DSNEnv      = "SIDECAR_TEST_PG_DSN"       // the shared cluster; never stop it
	CrashDSNEnv = "SIDECAR_TEST_PG_CRASH_DSN" // a cluster tests may stop
	CrashCtlEnv = "SIDECAR_TEST_PG_CRASH_CTL" // pg_ctl on the crash cluster
)

// Env returns the named variable; without it the test is skipped, or fails on CI
// (CI=true), where .ci/run always starts the clusters.
func Env(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		testenv.Need(t, fmt.Errorf("%s is not set", name), "run the tests under .ci/postgres.sh")
	}
	return v
}

// DSN returns the shared cluster's connection string (see Env).
func DSN(t testing.TB) string {
	t.Helper()
	return Env(t, DSNEnv)
}

// Schema returns a schema name no other test uses: prefix and 12 random hex digits.
func Schema(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
