// Package hub holds the end-to-end tests of hub mode against a real JupyterHub
// (internal/testenv/jhubtest) and its users' real single-user servers: each user sees
// only their own notebooks (hub_test.go), confined to their home (hubconfine_test.go),
// with PostgreSQL as the store (hubpg_test.go); people logging in with the Hub in
// Chromium through the MCP authorization flow (hubauth_test.go) and the MCP conformance
// suite's authorization scenarios (hubconformance_test.go); hub mode at scale
// (hubscale_test.go, E2E_HUBSCALE=1).
package hub
