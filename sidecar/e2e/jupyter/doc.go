// Package jupyter holds the end-to-end tests of the built binary beside a real Jupyter
// server with jupyter-collaboration (internal/testenv/jupytertest): the sidecar's view of
// every notebook equals the server's own through edits, kernels, renames and squashes
// (jupyter_test.go, on the stack of jupyterstack_test.go), a lost row served from the
// saved file (oracle_test.go); the real jupyter-mcp-server fed by the sidecar's sse feed
// through this repository's Python feed package (mcpserver_test.go,
// mcpserverbench_test.go); and people typing in real JupyterLab in headless Chromium,
// the sidecar seeing what the page renders (browser_test.go, internal/testenv/browser),
// and agents reading its changes meanwhile, on one sidecar and across replicas
// (browserchanges_test.go). main_test.go builds the binary once.
package jupyter
