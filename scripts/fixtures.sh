#!/usr/bin/env bash
# Regenerates the fixtures made by the real Yjs, @jupyter/ydoc and MCP SDKs (Node 20; the
# generators are seeded, so their output is byte-identical run after run) and lists the
# fixture paths on stdout, for a caller to compare with the committed ones:
#   scripts/fixtures.sh && git status --short -- $(scripts/fixtures.sh --paths)
# The npm packages must be installed (npm ci in each testdata/*/ with a package-lock.json).
set -euo pipefail
cd "$(dirname "$0")/.."
paths=(ystore/yjs/testdata/golden ystore/yjs/testdata/sessions.json.gz testdata/ysessions/fixtures
	ystore/ynotebook/testdata/cases.json sidecar/demo/session.jsonl.gz resources/testdata sidecar/e2e/testdata)
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
