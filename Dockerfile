# syntax=docker/dockerfile:1
# jupyter-mcp-sidecar: static binary (pure-Go SQLite, no cgo) on distroless, non-root.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#                --build-arg COMMIT=$(git rev-parse HEAD) -t jupyter-mcp-sidecar .
#   docker run --rm --read-only -v /srv/jupyter:/srv/jupyter:ro -p 127.0.0.1:4040:4040 \
#     -v jupyter-mcp-sidecar-state:/var/lib/jupyter-mcp-sidecar \
#     -e JUPYTER_MCP_SIDECAR_STORE_SQLITE_PATH=/srv/jupyter/.jupyter_ystore.db \
#     -e JUPYTER_MCP_SIDECAR_SERVER_LISTEN=0.0.0.0:4040 \
#     -e JUPYTER_MCP_SIDECAR_SERVER_TOKEN=… jupyter-mcp-sidecar
#
# The store is read-only; name bindings (use_notebook) go to $STATE_DIRECTORY, the
# volume above (without it they are kept in memory, with a warning). The user is
# numeric, so Kubernetes' runAsNonRoot admits it without a runAsUser.
#
# scripts/image-check.sh builds the final stage (FROM scratch when the base image cannot
# be pulled) and runs it read-only on a read-only store; scripts/docker-build-check.sh
# runs the builder stage's commands without Docker.

FROM docker.io/library/golang:1.26 AS build
# Unset, the binary's version says that no commit was recorded (the context has no .git).
ARG VERSION=
ARG COMMIT=
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN VERSION=${VERSION} COMMIT=${COMMIT} scripts/build.sh /out/jupyter-mcp-sidecar
RUN /out/jupyter-mcp-sidecar version && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/jupyter-mcp-sidecar /jupyter-mcp-sidecar
COPY --from=build --chown=65532:65532 /out/state /var/lib/jupyter-mcp-sidecar
ENV STATE_DIRECTORY=/var/lib/jupyter-mcp-sidecar
USER 65532:65532
EXPOSE 4040
ENTRYPOINT ["/jupyter-mcp-sidecar", "serve"]
