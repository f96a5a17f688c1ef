#!/usr/bin/env bash
# Regenerates the fixtures made by the real Yjs, @jupyter/ydoc and MCP SDKs (Node 20; the
# generators are seeded, so their output is byte-identical run after run), and pycrdt's
# readings of them (with the pinned Jupyter stack), and lists the fixture paths on stdout, for a caller to compare with the committed ones:
#   scripts/fixtures.sh && git status --short -- $(scripts/fixtures.sh --paths)
# The npm packages must be installed (npm ci in each testdata/*/ with a package-lock.json).
set -euo pipefail
cd "$(dirname "$0")/.."
paths=(ystore/yjs/testdata/golden ystore/yjs/testdata/sessions.json.gz testdata/ysessions/fixtures
	ystore/ynotebook/testdata/cases.json sidecar/demo/session.jsonl.gz resources/testdata sidecar/e2e/testdata
	ystore/yjs/testdata/sessions-pycrdt.jsonl.gz ystore/yjs/testdata/bench/notebook-pycrdt.json testdata/ysessions/pycrdt.jsonl.gz)
if [ "${1:-}" = --paths ]; then
	printf '%s\n' "${paths[@]}"
	exit 0
fi
(cd testdata/yjs-golden && node golden.mjs ../../ystore/yjs/testdata/golden \
	&& node sessions.mjs ../../ystore/yjs/testdata/sessions.json.gz 300)
(cd testdata/ysessions && node gen.mjs --seed 1 --count 200 --out fixtures \
	&& node cases.mjs >../../ystore/ynotebook/testdata/cases.json \
	&& node gen.mjs --demo --out ../../sidecar/demo/session.jsonl.gz)
(cd testdata/mcpclient && node gen-notebooks.mjs >../../resources/testdata/notebooks.json \
	&& node gen-events.mjs >../../sidecar/e2e/testdata/events.json)
# What pycrdt (yrs), the Jupyter server's engine, reads from the Yjs-written fixtures: the
# reference the engine's tests compare with (testdata/pycrdt-golden/differential.py). Needs
# the pinned Jupyter stack (scripts/jupyter-venv.sh; .ci/run exports its path).
if [ -n "${SIDECAR_TEST_JUPYTER_VENV:-}" ]; then
	py=("$SIDECAR_TEST_JUPYTER_VENV/bin/python" testdata/pycrdt-golden/differential.py)
	"${py[@]}" yjs-sessions ystore/yjs/testdata/sessions.json.gz | gzip -n -9 >ystore/yjs/testdata/sessions-pycrdt.jsonl.gz
	"${py[@]}" corpus ystore/yjs/testdata/bench/notebook.bin.gz >ystore/yjs/testdata/bench/notebook-pycrdt.json
	"${py[@]}" notebook-sessions testdata/ysessions/fixtures | gzip -n -9 >testdata/ysessions/pycrdt.jsonl.gz
else
	echo "SIDECAR_TEST_JUPYTER_VENV is not set: pycrdt's readings of the fixtures are not regenerated" >&2
fi
