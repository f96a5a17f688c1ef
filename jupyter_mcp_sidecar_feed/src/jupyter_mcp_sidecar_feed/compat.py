"""The jupyter-mcp-server internals this package relies on, checked at start-up.

jupyter-mcp-server documents the seams an environment variable names
(``JUPYTER_MCP_PUBLISHER_CLASS``, ``JUPYTER_MCP_WATCH_NOTEBOOKS``) and its extension
entry points, but the two things a feed has to do — know which names this process bound
to which paths, and keep a tool's own edit from being announced twice — go through
module-level internals. They were read in jupyter-mcp-server 2.2.4 and are checked here,
so a version that moved them stops the server at start with both versions named instead
of running with subscribers silently untold. See the README, "What it relies on".
"""

from __future__ import annotations

import inspect
from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.version import Version

#: The jupyter-mcp-server versions this package was built and tested against.
SUPPORTED = SpecifierSet(">=2.2.4,<2.3")


def own_version() -> str:
    """This package's version."""
    try:
        return metadata.version("jupyter-mcp-sidecar-feed")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _source(obj: object) -> str:
    try:
        return inspect.getsource(obj)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return ""


def check(installed: str | None = None) -> list[str]:
    """What is missing from the installed jupyter-mcp-server; [] when it all fits."""
    try:
        installed = installed or metadata.version("jupyter-mcp-server")
    except metadata.PackageNotFoundError:
        return ["jupyter-mcp-server is not installed"]
    problems: list[str] = []
    if Version(installed) not in SUPPORTED:
        problems.append(f"version {installed} is outside {SUPPORTED}")
    try:
        from jupyter_mcp_server import notebook_manager, notifications, results, watchers
        from jupyter_mcp_server import server as server_module
    except Exception as error:  # noqa: BLE001 - any import failure is a mismatch
        return problems + [f"its modules cannot be imported: {error}"]
    needs = [
        # The object every binding and every tool's publish goes through.
        (watchers, "watchers", ("watch", "unwatch", "fold", "stop_all", "serve")),
        (watchers, "enabled", ()),
        (notifications, "publish_notebook_updated", ()),
        (notifications, "cell_uri", ()),
        (server_module, "mcp", ()),
        (server_module, "notebook_manager", ("get_notebook_path", "__iter__", "__contains__")),
    ]
    for module, name, methods in needs:
        found = getattr(module, name, None)
        if found is None:
            problems.append(f"{module.__name__}.{name} is missing")
            continue
        problems.extend(
            f"{module.__name__}.{name}.{method} is missing" for method in methods if not hasattr(found, method)
        )
    publish = getattr(notifications, "publish_notebook_updated", None)
    if publish is not None and (
        not inspect.iscoroutinefunction(publish)
        or list(inspect.signature(publish).parameters)[:3] != ["server", "name", "cells"]
    ):
        problems.append("notifications.publish_notebook_updated is not async (server, name, cells)")
    cell_uri = getattr(notifications, "cell_uri", None)
    if cell_uri is not None and cell_uri("n", "c/outputs/0") != "notebook://n/cells/c/outputs/0":
        problems.append("notifications.cell_uri no longer builds notebook://{name}/cells/{id}")
    # Looked up at call time by name, which is what lets a replacement take their place.
    if "watchers.fold(" not in _source(getattr(results, "_announce", None)):
        problems.append("results._announce no longer asks watchers.fold before publishing")
    manager_class = getattr(notebook_manager, "NotebookManager", None)
    if "watchers.watch(" not in _source(getattr(manager_class, "add_notebook", None)):
        problems.append("NotebookManager.add_notebook no longer calls watchers.watch")
    return problems


def mismatch(problems: list[str], installed: str | None = None) -> str:
    """The start-up refusal, naming both versions."""
    try:
        installed = installed or metadata.version("jupyter-mcp-server")
    except metadata.PackageNotFoundError:
        installed = "none"
    return (
        f"jupyter-mcp-sidecar-feed {own_version()} supports jupyter-mcp-server {SUPPORTED}; "
        f"installed is jupyter-mcp-server {installed}: " + "; ".join(problems)
    )
