# syntax=docker/dockerfile:1
# jupyter-mcp-sidecar: static binary (pure-Go SQLite, no cgo) on distroless, non-root.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#                --build-arg COMMIT=$(git rev-parse HEAD) -t jupyter-mcp-sidecar .
#   docker run --rm -v /srv/jupyter:/srv/jupyter:ro -p 127.0.0.1:4040:4040 \
#     -e JUPYTER_MCP_SIDECAR_STORE_SQLITE_PATH=/srv/jupyter/.jupyter_ystore.db \
#     -e JUPYTER_MCP_SIDECAR_SERVER_LISTEN=0.0.0.0:4040 \
#     -e JUPYTER_MCP_SIDECAR_SERVER_TOKEN=… jupyter-mcp-sidecar
#
# scripts/docker-build-check.sh runs the builder stage's commands without Docker.

FROM golang:1.26 AS build
# Unset, the binary's version says that no commit was recorded (the context has no .git).
ARG VERSION=
ARG COMMIT=
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN VERSION=${VERSION} COMMIT=${COMMIT} scripts/build.sh /out/jupyter-mcp-sidecar
RUN /out/jupyter-mcp-sidecar version

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/jupyter-mcp-sidecar /jupyter-mcp-sidecar
USER nonroot:nonroot
EXPOSE 4040
ENTRYPOINT ["/jupyter-mcp-sidecar", "serve"]
