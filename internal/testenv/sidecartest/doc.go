// Package sidecartest runs the built sidecar for the end-to-end tests of sidecar/e2e:
// Main builds the binary once for a test package (a -race build when the tests are);
// Launch and StartSidecar are the one process launcher (config, token, listener, logs
// shown on failure, a clean stop on SIGINT); the pycrdt-store-like writer of
// ystore/sqlite/sqlitetest with the demo session's real Yjs updates; the jupyter_server_fileid
// database (fileid.Schema); MCP clients of both protocol eras, Go (mcp-go), raw JSON-RPC
// and the official TypeScript SDKs (testdata/mcpclient), with the waits and JSON
// comparisons the tests share; the change-event consumers and fixture.
package sidecartest
