// Package e2e holds the end-to-end tests of jupyter-mcp-sidecar: the real binary, built
// by the tests, tails a real SQLite Y-store written by a pycrdt-store-like writer
// (testdata/pycrdt_writer) and serves MCP clients of both protocol eras — mcp-go's Go
// client and the official TypeScript SDK clients (testdata/mcpclient).
package e2e
