// Package mcp holds the end-to-end tests of the MCP surface of the built binary: MCP
// clients of both protocol eras (mcp-go's Go client, a raw JSON-RPC client and the
// official TypeScript SDK clients) bind, read and subscribe while a pycrdt-store-like
// writer edits the store (e2e_test.go); no change is announced silently, the gate holds
// on every surface (delivery_test.go); change events reach their consumers, the sse feed
// stays bounded (events_test.go, feedbounds_test.go); extensions, the example extension
// module among them (extensions_test.go); connection, session, binding and hub-front
// limits, CORS, stdio and the state file (limits_test.go); commit-to-notification
// latency (latency_test.go, E2E_LATENCY=1) and the fault soak (soak_test.go, SOAK=1).
//
// The binary, the writer and the clients are internal/testenv/sidecartest's.
package mcp
