#!/usr/bin/env bash
# inspect.sh measures the peak memory of `inspect` reading a whole pycrdt-store SQLite file
# against the rows of the store and against its live content, beside a yjs and a pycrdt
# reader of the same rooms, in one run (TestInspectMemory, bench/inspect_test.go;
# docs/BENCHMARKS.md "inspect: memory against history"). Three stores of two-person
# notebook sessions (testdata/ysessions/gen.mjs --bench), each room one session:
#   54k        20 rooms of 2,700 updates
#   540k       the same 20 rooms edited ten times as long: 27,000 updates each
#   540k-wide  200 rooms of 2,700 updates (the 54k rooms ten times over)
# The corpora are generated once into $YINSPECT_DIR (default: a directory under $TMPDIR).
# It fails (exit 1) when the build under test (the last of YINSPECT_BIN, else this tree's)
# reads a SQLite store less than twice as fast as the pycrdt reader, or with more peak RSS:
# the fastest wall time and least peak RSS of the rounds count, side by side in one run.
#
#   bench/inspect.sh                                   # this tree's build, 3 rounds
#   YINSPECT_BIN="before=/path/a,after=/path/b" YINSPECT_ROUNDS=5 bench/inspect.sh
#   YINSPECT_PG="$SIDECAR_TEST_PG_DSN" bench/inspect.sh  # each store copied into Postgres
#                                                        # too (schema yinspect_NAME), and
#                                                        # `inspect --backend postgres` measured
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${YINSPECT_DIR:-${TMPDIR:-/tmp}/yinspect}
[ -d testdata/ysessions/node_modules ] || (cd testdata/ysessions && npm ci --no-audit --no-fund)
: "${SIDECAR_TEST_JUPYTER_VENV:?the pinned Jupyter venv (scripts/jupyter-venv.sh) holds pycrdt}"

if [ ! -f "$DIR/done" ]; then
	echo "generating the stores' rooms into $DIR" >&2
	rm -rf "$DIR"
	mkdir -p "$DIR/54k" "$DIR/540k" "$DIR/540k-wide" "$DIR/gen"
	for i in $(seq -w 1 20); do
		for n in 2700 27000; do
			node testdata/ysessions/gen.mjs --bench --seed $((100 + 10#$i)) --updates $n --out "$DIR/gen" --no-state
			mv "$DIR/gen/updates.bin" "$DIR/gen/$n-$i.bin"
		done
		cp "$DIR/gen/2700-$i.bin" "$DIR/54k/room-$i.bin"
		cp "$DIR/gen/27000-$i.bin" "$DIR/540k/room-$i.bin"
		for k in $(seq 0 9); do ln -s "../gen/2700-$i.bin" "$DIR/540k-wide/room-$k$i.bin"; done
	done
	touch "$DIR/done"
fi
YINSPECT="$DIR" go test ./bench -run '^TestInspectMemory$' -count=1 -v -timeout 60m | grep -E '\||in process|guard|FAIL|^ok'
