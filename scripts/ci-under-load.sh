#!/usr/bin/env bash
# Runs the whole CI (.ci/run) RUNS times in a row, each on a fresh clone at HEAD, while
# LOADERS busy loops keep the machine's cores busy: a suite that passes here does not
# depend on an idle machine. Prints one line a run and exits non-zero if any failed.
#
#   scripts/ci-under-load.sh [RUNS] [LOADERS]    # defaults: 5 runs, 2 busy loops
#
# The busy loops are this script's own children, ended by PID when it exits. Each run's
# log is kept in the printed directory, and a failed run's clone too.
set -euo pipefail
runs=${1:-5}
loaders=${2:-2}
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse HEAD) # every run tests this commit, whatever lands meanwhile
out=$(mktemp -d /tmp/ci-under-load.XXXXXX)
pids=()
cleanup() { [ "${#pids[@]}" -gt 0 ] && kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq "$loaders"); do
	yes >/dev/null &
	pids+=($!)
done
echo "commit ${commit:0:7}, $runs runs, $loaders busy loops (PIDs ${pids[*]}), logs in $out"
failures=0
for i in $(seq "$runs"); do
	clone=$out/clone-$i
	git clone -q "$repo" "$clone"
	git -C "$clone" checkout -q --detach "$commit"
	t0=$(date +%s)
	if (cd "$clone" && CI=true bash .ci/run </dev/null >"$out/run-$i.log" 2>&1); then
		result=PASS
	else
		result=FAIL
		failures=$((failures + 1))
	fi
	echo "run $i: $result in $(($(date +%s) - t0))s (load average $(cut -d' ' -f1-3 /proc/loadavg); $(grep -E '^packages:' "$out/run-$i.log" || true))"
	# A failed run's clone stays (a fuzz target's failing input is written into it).
	[ "$result" = FAIL ] || rm -rf "$clone"
done
echo "$((runs - failures)) passed, $failures failed"
[ "$failures" = 0 ]
