#!/usr/bin/env bash
# Builds the static binary stamped with its version and commit, as the Dockerfile does:
#   scripts/build.sh [OUTPUT]        (default ./jupyter-mcp-sidecar)
# VERSION and COMMIT default to git describe and git rev-parse; outside a checkout they
# stay empty and `jupyter-mcp-sidecar version` says what the build info knows.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${VERSION-$(git describe --tags --always --dirty 2>/dev/null || true)}
COMMIT=${COMMIT-$(git rev-parse HEAD 2>/dev/null || true)}
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
	-o "${1:-jupyter-mcp-sidecar}" ./cmd/jupyter-mcp-sidecar
