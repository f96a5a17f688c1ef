// Package hub holds the end-to-end tests of hub mode against a real JupyterHub
// (internal/testenv/jhubtest) and its users' real single-user servers: each user sees
// only their own notebooks (hub_test.go), confined to their home (hubconfine_test.go),
// through hard links (hubconfine_links_test.go) and a root swapped under them
// (hubconfine_swap_test.go), within a bound of rooms and memory (hubbound_test.go), with
// PostgreSQL as the store (hubpg_test.go); people logging in with the Hub in Chromium
// through the MCP authorization flow (hubauth_test.go), attacks on the login's approvals
// and tokens (hublogin_tokens_test.go) and on client registration
// (hubregister_test.go), and the MCP conformance suite's authorization scenarios
// (hubconformance_test.go); each user's fair share of connections, straight and through
// the Hub's proxy (hubshare_test.go); replicas behind a load balancer (rig_test.go), one
// of them lost (hubrig_test.go) and measured (hubrigbench_test.go, E2E_HUBRIG_BENCH=1);
// hub mode at scale (hubscale_test.go, E2E_HUBSCALE=1). main_test.go builds the binary
// once and holds the one hand-built MCP request (mcpPost); race_test.go and
// norace_test.go say whether the race detector is on.
package hub
