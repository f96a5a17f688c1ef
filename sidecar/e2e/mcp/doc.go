// Package mcp holds the end-to-end tests of the MCP surface of the built binary: MCP
// clients of both protocol eras (mcp-go's Go client, a raw JSON-RPC client and the
// official TypeScript SDK clients) bind, read and subscribe while a pycrdt-store-like
// writer edits the store (e2e_test.go); an agent's read-edit-reread loop through
// notebook://{name}/changes (changes_test.go); no change is announced silently, the gate
// holds on every surface (delivery_test.go); change events reach their consumers, the sse
// feed stays bounded and keeps the anonymous to their share (events_test.go,
// feedbounds_test.go, feedshare_test.go); extensions, the example extension module among
// them (extensions_test.go); connection, session, binding and hub-front limits, CORS,
// stdio and the state file (limits_test.go); commit-to-notification latency
// (latency_test.go, E2E_LATENCY=1), the fan-out to many streams (fanout_test.go,
// BenchmarkFanout) and the fault soak (soak_test.go, its clients soakclient_test.go and
// watcher soakwatch_test.go, SOAK=1). main_test.go builds the binary once.
//
// The binary, the writer and the clients are internal/testenv/sidecartest's.
package mcp
