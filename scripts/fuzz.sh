#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZ_EXECS inputs (default 10000), one line a
# target; exits non-zero if any failed, after printing its output.
#   scripts/fuzz.sh            FUZZ_EXECS=100000 scripts/fuzz.sh
#
# Fuzzing is bounded by a count of inputs, not by -fuzztime in seconds: with a duration,
# go1.26's fuzz coordinator can report "context deadline exceeded" when the deadline
# lands while a worker is mid-input (golang/go#75804, fixed in go1.27). A count has no
# deadline to race. The fuzzer fails an input that hangs (after about 10 s); go test's
# -timeout does not apply to fuzzing, so `timeout` (5 minutes a target) is the backstop.
set -uo pipefail
cd "$(dirname "$0")/.."
execs=${FUZZ_EXECS:-10000}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failed=0
while read -r pkg name; do
	t0=$(date +%s)
	rc=0
	timeout -k 10s 5m go test -run '^$' -fuzz "^${name}\$" -fuzztime "${execs}x" \
		-fuzzminimizetime 100x "./$pkg" >"$out" 2>&1 || rc=$?
	if [ "$rc" = 0 ]; then
		echo "ok    fuzz $name ./$pkg (${execs} inputs, $(($(date +%s) - t0))s)"
	else
		cat "$out"
		[ "$rc" = 124 ] && echo "(timed out after 5 minutes)"
		echo "FAIL  fuzz $name ./$pkg"
		failed=$((failed + 1))
	fi
done < <(grep -rEo --include='*_test.go' --exclude-dir=node_modules --exclude-dir=testdata \
	'^func Fuzz[A-Za-z0-9_]+' . | sed -E 's|^\./(.*)/[^/]+_test\.go:func (Fuzz.*)$|\1 \2|' | sort -u)
[ "$failed" = 0 ]
