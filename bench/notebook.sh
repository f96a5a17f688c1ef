#!/usr/bin/env bash
# notebook.sh compares the notebook layer (ystore/ynotebook) with the Go engine under it, yjs,
# @jupyter/ydoc's YNotebook and ywasm on the workloads of testdata/ynbench/gen.mjs: structural
# edits and typing at 10/100/1000/5000 cells, and a corpus of 20 two-person notebooks
# (~54k updates, testdata/ysessions/gen.mjs --bench). Prints a markdown report and writes
# bench/out/notebook.{jsonl,md}. The workloads (~25 MB) are generated once into
# $YNBENCH_DIR (default: a directory under $TMPDIR).
#
#   bench/notebook.sh            # seed 1, 3 repetitions (the fastest counts)
#   SEED=2 REPS=5 bench/notebook.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=${SEED:-1}
REPS=${REPS:-3}
DIR=${YNBENCH_DIR:-${TMPDIR:-/tmp}/ynbench-$SEED}
OUT=bench/out
mkdir -p "$OUT"
[ -d testdata/ysessions/node_modules ] || (cd testdata/ysessions && npm ci --no-audit --no-fund)

source bench/corpus.sh
if [ ! -f "$DIR/done" ]; then
	echo "generating workloads into $DIR" >&2
	rm -rf "$DIR"
	node testdata/ynbench/gen.mjs --out "$DIR" --seed "$SEED"
	touch "$DIR/done"
fi
rooms_corpus "$DIR" "$SEED"

go test -c -o "$OUT/bench.test" ./bench
YNBENCH="$DIR" YNBENCH_REPS="$REPS" YNBENCH_OUT="$PWD/$OUT/notebook-go.jsonl" \
	"$OUT/bench.test" -test.run '^TestNotebookLayer$' -test.count 1 >/dev/null
cp "$OUT/notebook-go.jsonl" "$OUT/notebook.jsonl"
for e in yjs ydoc ywasm; do
	node --expose-gc bench/notebook.mjs --engine "$e" --dir "$DIR" --reps "$REPS" >>"$OUT/notebook.jsonl"
done
node bench/notebook-report.mjs "$OUT/notebook.jsonl" | tee "$OUT/notebook.md"
