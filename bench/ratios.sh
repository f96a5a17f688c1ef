#!/usr/bin/env bash
# ratios.sh measures, in one run on the same bytes, the ratios the engine and the notebook
# layer are held to, and fails (exit 1) when one is short of its guard:
#
#   engine (ystore/yjs), one notebook's history of 100,000 updates:
#     ≥ 2.5× pycrdt (the Jupyter server's engine, from the pinned Jupyter venv),
#     ≥ 2× ywasm; yjs reported
#   notebook layer (ynotebook.Apply), 20 rooms (~54k updates):
#     ≥ 3× @jupyter/ydoc's YNotebook; the engine against pycrdt, yjs and ywasm reported
#   engine, real editing sessions: the 200 recorded sessions of testdata/ysessions merged
#   into 20 rooms (bench/sessions.mjs; ~17k updates of two to four replicas typing emoji
#   and CJK, cutting surrogate pairs, moving cells, metadata, stream, image and error
#   outputs), each update applied alone as a follower applies it:
#     ≥ 2.5× pycrdt; yjs reported
#     ≥ 2× ywasm on the sessions ywasm reads (it panics on a cut surrogate pair)
#
# Each engine's timed work ends with reading every document's content (the JSON of the
# roots cells, meta and state): the Go engine decodes Any values only when they are read,
# so what it defers is counted; the notebook layers read what each update changes instead.
#
# Every engine runs ROUNDS times, the rounds interleaved (a round runs each engine once,
# in a process of its own, REPS repetitions); the fastest CPU time of all counts, so that
# a busy moment of the machine slows one sample, not one engine. Prints a markdown table
# with the load average and writes bench/out/ratios.{jsonl,md}.
#
#   bench/ratios.sh                  # ROUNDS=4 REPS=2 SEED=1
#   ROUNDS=8 bench/ratios.sh
#
# Python: $SIDECAR_TEST_JUPYTER_VENV, else the venv of scripts/jupyter-venv.sh (pycrdt
# pinned in testdata/jupyter/requirements.txt). Workloads are generated once into
# $YNBENCH_DIR (default: a directory under $TMPDIR).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-4}
REPS=${REPS:-2}
SEED=${SEED:-1}
DIR=${YNBENCH_DIR:-${TMPDIR:-/tmp}/ynbench-ratios-$SEED}
OUT=bench/out
mkdir -p "$OUT" "$DIR"
[ -d testdata/ysessions/node_modules ] || (cd testdata/ysessions && npm ci --no-audit --no-fund)
venv=${SIDECAR_TEST_JUPYTER_VENV:-$(scripts/jupyter-venv.sh)}
source bench/corpus.sh
rooms_corpus "$DIR" "$SEED"
history_corpus "$DIR" 7 100000
sessions_corpus "$DIR"

go test -c -o "$OUT/bench.test" ./bench
res=$OUT/ratios.jsonl
echo "{\"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}" >"$res"
for r in $(seq 1 "$ROUNDS"); do
	echo "round $r of $ROUNDS" >&2
	YNBENCH="$DIR" YNBENCH_REPS="$REPS" YNBENCH_OUT="$PWD/$OUT/ratios-go.jsonl" \
		"$OUT/bench.test" -test.run '^TestNotebookLayer$' -test.count 1 >/dev/null
	cat "$OUT/ratios-go.jsonl" >>"$res"
	"$venv/bin/python" bench/speed.py "$DIR" "$REPS" >>"$res"
	for e in yjs ywasm; do
		node bench/node.mjs --engine "$e" --workload history --corpus "$DIR/history" --reps "$REPS" >>"$res"
	done
	# a process per workload: ywasm's live heap is only right in a fresh one
	for w in yjs:corpus ydoc:corpus ywasm:corpus yjs:sessions yjs:sessions-ywasm ywasm:sessions-ywasm; do
		node --expose-gc bench/notebook.mjs --engine "${w%%:*}" --rooms "${w#*:}" --dir "$DIR" --reps "$REPS" >>"$res"
	done
done
echo "{\"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}" >>"$res"
node bench/ratios-report.mjs "$res" "$ROUNDS" "$REPS" | tee "$OUT/ratios.md"
