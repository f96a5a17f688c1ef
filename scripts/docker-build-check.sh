#!/usr/bin/env bash
# Runs the builder stage of the Dockerfile without Docker (no engine runs on CI machines):
# the same commands, from a copy of the build context filtered by .dockerignore, then
# checks that the binary is static, stripped of cgo, carries the version, and runs.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${VERSION:-check}
COMMIT=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

# The build context: the tree minus what .dockerignore excludes.
tar --exclude-vcs --exclude=node_modules --exclude=./bench/out --exclude=./jupyter-mcp-sidecar \
	--exclude='*.test' --exclude='*.prof' -cf - . | tar -xf - -C "$ctx"

# The Dockerfile's RUN lines, in order (WORKDIR /src is $ctx, /out is $ctx/out).
want_run=$(grep -c '^RUN ' Dockerfile)
[ "$want_run" = 3 ] || { echo "docker-build-check: Dockerfile has $want_run RUN lines; update this script" >&2; exit 1; }
(
	cd "$ctx"
	go mod download
	VERSION=${VERSION} COMMIT=${COMMIT} scripts/build.sh out/jupyter-mcp-sidecar
	out/jupyter-mcp-sidecar version && mkdir -p out/state
)
bin=$ctx/out/jupyter-mcp-sidecar

info=$(go version -m "$bin")
grep -q $'\tCGO_ENABLED=0' <<<"$info" || { echo "docker-build-check: built with cgo" >&2; exit 1; }
grep -q $'\t-trimpath=true' <<<"$info" || { echo "docker-build-check: not built with -trimpath" >&2; exit 1; }
if command -v file >/dev/null; then
	desc=$(file -b "$bin")
	case $desc in
	*"statically linked"*) ;;
	*) echo "docker-build-check: not a static binary: $desc" >&2; exit 1 ;;
	esac
elif command -v ldd >/dev/null && ldd "$bin" >/dev/null 2>&1; then
	echo "docker-build-check: ldd finds dynamic dependencies" >&2
	exit 1
fi
"$bin" version | grep -q "jupyter-mcp-sidecar ${VERSION} (commit ${COMMIT}," || { echo "docker-build-check: version not stamped" >&2; exit 1; }
"$bin" --help >/dev/null
echo "docker-build-check: OK ($(du -h "$bin" | cut -f1) static binary, $("$bin" version))"
