# JupyterHub configuration: jupyter-mcp-sidecar as a Hub-managed service in hub mode.
#
# The Hub starts the sidecar, gives it JUPYTERHUB_API_URL, JUPYTERHUB_API_TOKEN,
# JUPYTERHUB_SERVICE_NAME and JUPYTERHUB_SERVICE_PREFIX (which fill the hub.* keys left
# empty), and its proxy forwards https://hub.example.org/services/mcp/… to the sidecar's
# listen address with the /services/mcp/ prefix kept. A user's MCP client connects to
#
#     https://hub.example.org/services/mcp/mcp
#
# with their JupyterHub API token (Authorization: Bearer <token>, or token <token>), made
# on the Hub's token page (/hub/token). See docs/HUB.md.
#
# Merge this into your jupyterhub_config.py (or drop it into a jupyterhub_config.d/
# directory); adjust the store templates to where your users' Jupyter servers write.

# Where the sidecar listens: the service's url below. The Hub gives it to the sidecar as
# JUPYTERHUB_SERVICE_URL, which sets server.listen; JUPYTER_MCP_SIDECAR_SERVER_LISTEN below
# says the same explicitly (and wins if they ever differ).
MCP_LISTEN = "127.0.0.1:10101"

c.JupyterHub.services = [
    {
        "name": "mcp",
        "url": "http://" + MCP_LISTEN,
        "command": [
            "/usr/local/bin/jupyter-mcp-sidecar",
            "serve",
            # The rest of the configuration: a file, or the environment below.
            # "--config", "/etc/jupyter-mcp-sidecar/jupyter-mcp-sidecar.yaml",
        ],
        "environment": {
            "JUPYTER_MCP_SIDECAR_HUB_ENABLED": "true",
            "JUPYTER_MCP_SIDECAR_SERVER_LISTEN": MCP_LISTEN,
            # Each user's files, {username} being the Hub user's name. These are the
            # defaults (LocalProcessSpawner with system users whose home is
            # /home/{username}); The Littlest JupyterHub uses /home/jupyter-{username}.
            "JUPYTER_MCP_SIDECAR_HUB_STORES_SQLITE_PATH": "/home/{username}/.jupyter_ystore.db",
            "JUPYTER_MCP_SIDECAR_HUB_STORES_FILEID_DB": "/home/{username}/.local/share/jupyter/file_id_manager.db",
            "JUPYTER_MCP_SIDECAR_HUB_STORES_ROOT_DIR": "/home/{username}",
            # Each user's use_notebook bindings, one file a user.
            "JUPYTER_MCP_SIDECAR_HUB_STATE_DIR": "/var/lib/jupyter-mcp-sidecar",
            "JUPYTER_MCP_SIDECAR_LOG_FORMAT": "json",
            # Log in with the Hub (docs/HUB.md, "Log in with the Hub"): MCP clients that
            # speak OAuth (VS Code, claude.ai, the MCP Inspector) need no token; the user
            # logs in and approves at the Hub, then approves each client once on the
            # sidecar's consent page. Hub API tokens keep working.
            # "JUPYTER_MCP_SIDECAR_HUB_OAUTH_ENABLED": "true",
            # "JUPYTER_MCP_SIDECAR_HUB_OAUTH_PUBLIC_URL": "https://hub.example.org",
            # Proxies in front appending to X-Forwarded-For (the login's per-source rate
            # limits): the Hub's own, 1; 2 behind a reverse proxy or load balancer.
            # "JUPYTER_MCP_SIDECAR_HUB_OAUTH_PROXY_HOPS": "2",
            # Whose X-Forwarded-For is believed: the Hub's proxy, here on this host.
            # "JUPYTER_MCP_SIDECAR_HUB_OAUTH_TRUSTED_PROXIES": "127.0.0.1/32",
            # Short redirect schemes clients may use (Cursor's cursor://).
            # "JUPYTER_MCP_SIDECAR_HUB_OAUTH_ALLOWED_REDIRECT_SCHEMES": "cursor",
            # The MCP Inspector runs in a browser page: let that origin use the endpoint.
            # "JUPYTER_MCP_SIDECAR_SERVER_ALLOWED_ORIGINS": "http://localhost:6274",
            # The Go runtime's soft memory limit: the heap stays near what is live
            # (docs/HUB.md, "Memory"); size it for the users active at once.
            "GOMEMLIMIT": "1800MiB",
        },
        # A managed service runs as the Hub's user (root with LocalProcessSpawner). The
        # sidecar only reads the users' stores; to run it unprivileged instead, run it as
        # an external service (configs/systemd/jupyter-mcp-sidecar-hub.service): drop
        # "command" and "environment", keep "url" and set "api_token".
    },
]

c.JupyterHub.load_roles = [
    # Who may use the service: the token a user's MCP client sends must carry
    # access:services!service=mcp. Here every user (the default "user" role, extended);
    # to admit only some, give a role like this one to a group instead:
    #   {"name": "mcp-users", "scopes": ["access:services!service=mcp"], "groups": ["mcp"]},
    {"name": "user", "scopes": ["self", "access:services!service=mcp"]},
    # The service itself needs no role: it resolves a user's token by asking the Hub with
    # that token (GET /hub/api/user).
]
