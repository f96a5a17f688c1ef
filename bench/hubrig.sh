#!/usr/bin/env bash
# hubrig.sh runs the Postgres hub rig of issue 42 big (TestHubRigBench,
# sidecar/e2e/hub/hubrigbench_test.go; docs/BENCHMARKS.md "Hub mode on Postgres"): N
# users' stores written by the real pycrdt-store writer, a `ship` each into a throwaway
# Postgres (.ci/postgres.sh), two hub-mode replicas behind the rig's balancer, the real
# JupyterHub for tokens. The users type by batched COPYs straight into Postgres, as
# ship appends, at each hub-wide rate. It measures replica 0: whether it follows each
# rate (its tail lag and backlog, how long it takes to catch up), commit → notification
# p50/p99, the CPU per 1,000 rows of both replicas, Postgres, the test and the machine,
# its memory per active user and the first read of an idle user's notebook. Without
# -race.
#
#   bench/hubrig.sh                                     # 40 active + 20 idle users, 2 notebooks
#   E2E_HUBRIG_USERS=100 E2E_HUBRIG_RATES=100,200,400,800 E2E_HUBRIG_SECONDS=20 bench/hubrig.sh
#   E2E_HUBRIG_COLD=100 bench/hubrig.sh                 # more first reads (p99 of 100)
#   # the follow capacity: a ladder past it (each room has about 1,200 steps to type)
#   E2E_HUBRIG_USERS=70 E2E_HUBRIG_NOTEBOOKS=5 E2E_HUBRIG_COLD=10 E2E_HUBRIG_RATES=3000,4800,6000,7000,8000 bench/hubrig.sh
#
# The failover (SIGKILL of a replica under typing: detection, re-listen, told on resume)
# is TestHubRig, sized the same way: E2E_HUBRIG_USERS=40 bench/hubrig.sh failover
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SIDECAR_TEST_JUPYTER_VENV:=$(scripts/jupyter-venv.sh)}"
export SIDECAR_TEST_JUPYTER_VENV
run='^TestHubRigBench$'
if [ "${1:-}" = failover ]; then
	run='^TestHubRig$'
fi
E2E_HUBRIG_BENCH=1 .ci/postgres.sh go test ./sidecar/e2e/hub -run "$run" -count=1 -v -timeout 60m |
	grep -E 'HUBRIG|_test.go:[0-9]+: |^(--- |ok|FAIL)'
