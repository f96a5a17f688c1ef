#!/usr/bin/env bash
# run.sh compares the Go engine (ystore/yjs, and ystore/ynotebook on top of it) with yjs and
# ywasm in Node on one corpus, prints a table and writes bench/out/results.{md,json}.
#
#   bench/run.sh            # corpus: 100000 updates (seed 7) and one ~10 MB state
#   UPDATES=200000 SEED=3 bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
SEED=${SEED:-7}
UPDATES=${UPDATES:-100000}
NODE_PROJECT=testdata/ysessions
mkdir -p "$OUT"

[ -d "$NODE_PROJECT/node_modules" ] || (cd "$NODE_PROJECT" && npm ci --no-audit --no-fund)
stamp="$OUT/corpus-$SEED-$UPDATES"
if [ ! -f "$stamp" ]; then
	echo "generating corpus: $UPDATES updates, seed $SEED" >&2
	rm -f "$OUT"/corpus-*
	node "$NODE_PROJECT/gen.mjs" --bench --seed "$SEED" --updates "$UPDATES" --out "$OUT"
	touch "$stamp"
fi

go test -c -o "$OUT/bench.test" ./bench
: >"$OUT/go.txt"
for w in History State; do
	for e in yjs ynotebook; do
		# one process per run so that peak RSS is this engine's alone
		(cd bench && BENCH_CORPUS=out "$PWD/out/bench.test" -test.run '^$' -test.bench "^Benchmark$w\$/^$e\$" \
			-test.benchtime 1x -test.count 3 -test.v) >>"$OUT/go.txt"
	done
done

: >"$OUT/node.jsonl"
for w in history state; do
	for e in yjs yjs+YNotebook ywasm; do
		node bench/node.mjs --engine "$e" --workload "$w" --corpus "$OUT" >>"$OUT/node.jsonl"
	done
done

node bench/report.mjs "$OUT"
