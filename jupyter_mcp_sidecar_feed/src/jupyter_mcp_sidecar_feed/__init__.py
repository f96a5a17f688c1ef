"""jupyter-mcp-server fed by jupyter-mcp-sidecar's change feed (JUPYTER_MCP_WATCH_NOTEBOOKS=false).

See README.md: pip install it beside jupyter-mcp-server and set JUPYTER_MCP_SIDECAR_FEED_URL,
JUPYTER_MCP_SIDECAR_FEED_TOKEN and JUPYTER_MCP_WATCH_NOTEBOOKS=false.
"""
