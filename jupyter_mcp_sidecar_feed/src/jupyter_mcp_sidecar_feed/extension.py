"""The jupyter-mcp-server extension that connects it to jupyter-mcp-sidecar's feed.

Installed, it is found on jupyter-mcp-server's extension entry-point group
(``reactor.mcp.extensions``) and started with the server's extensions (``on_start``).
It does nothing unless ``JUPYTER_MCP_SIDECAR_FEED_URL`` is set. Then it

* checks the jupyter-mcp-server internals it relies on (:mod:`.compat`) and that
  ``JUPYTER_MCP_WATCH_NOTEBOOKS=false``; either wrong stops the start;
* puts a :class:`FeedWatchers` where ``jupyter_mcp_server.watchers.watchers`` was: the
  object the notebook manager tells of every binding and every tool asks, before it
  publishes its own edit, whether a watcher takes the news instead;
* reads the feed in a thread (:class:`~.sse.FeedClient`) and hands each frame to the
  server's event loop, where :class:`~.announce.Announcer` finds the names bound to the
  event's path in the notebook manager and they are published with the server's own
  ``notifications.publish_notebook_updated`` — both MCP eras, or the configured
  ``JUPYTER_MCP_PUBLISHER_CLASS``.

The announcing task runs as long as the server's loop does: a frame that is not a valid
event is logged and skipped (:func:`~.announce.parse`); one whose announcement fails
(the bindings or the publish raising) is logged and skipped, the next one waiting
``FAILURE_BACKOFF`` doubled per consecutive failure up to ``MAX_FAILURE_BACKOFF``; and
should the task end all the same, it is started again after that wait.

Own edits are announced once: while the feed is live a tool's publish is suppressed
(``fold`` answers that the news is taken) and the feed's event for the same change, which
lists what the store actually got, is the announcement. While the feed is down the tool
publishes as it would without this package (and its echo may then come a second time
after the stream resumes: at least once, never none).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from reactor import PluginCompatibility, PluginManifest

from jupyter_mcp_server.extensions import JupyterMCPExtension

from jupyter_mcp_sidecar_feed import compat
from jupyter_mcp_sidecar_feed.announce import Announcer
from jupyter_mcp_sidecar_feed.sse import FeedClient, Frame

logger = logging.getLogger("jupyter_mcp_sidecar_feed")

URL_ENV = "JUPYTER_MCP_SIDECAR_FEED_URL"
TOKEN_ENV = "JUPYTER_MCP_SIDECAR_FEED_TOKEN"
TOKEN_FILE_ENV = "JUPYTER_MCP_SIDECAR_FEED_TOKEN_FILE"

#: Frames waiting for the server's loop, and their data's bytes; beyond either, those
#: waiting are replaced by a gap.
MAX_PENDING = 10_000
MAX_PENDING_BYTES = 64 << 20

#: After a frame whose announcement failed, the announcing task waits this long, doubled
#: per consecutive failure up to MAX_FAILURE_BACKOFF, before the next frame (or before it
#: is started again, had it ended).
FAILURE_BACKOFF = 0.1
MAX_FAILURE_BACKOFF = 30.0


class StartRefused(SystemExit):
    """The server must not start: configured delivery that cannot work."""


class Bridge:
    """The feed, this server's bindings, and its publishing path, joined."""

    def __init__(self, url: str, token: str, server_module: Any, notifications: Any) -> None:
        self._server = server_module
        self._notifications = notifications
        manager = server_module.notebook_manager
        self.announcer = Announcer(
            lambda: [(name, manager.get_notebook_path(name) or "") for name, _ in list(manager)]
        )
        self.client = FeedClient(url, token, self._from_thread, self._state)
        self.live = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Frame] | None = None
        self._pending_bytes = 0  # of the frames in _queue
        self._drain: asyncio.Task | None = None
        self._restart: asyncio.TimerHandle | None = None  # _ended's pending start
        #: Announcements published, tool publishes suppressed, frames dropped for want
        #: of a loop (nothing was bound yet), frames whose announcement failed, restarts
        #: of the announcing task: for the logs and the tests.
        self.published = 0
        self.suppressed = 0
        self.unheard = 0
        self.failed = 0
        self.restarts = 0
        self._failures = 0  # consecutive: the backoff's exponent
        self._stopping = False

    def start(self) -> None:
        self.client.start()

    def stop(self) -> None:
        self._stopping = True
        self.client.stop()
        if self._drain is not None and self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._drain.cancel)

    # --- the thread's side ---------------------------------------------------

    def _state(self, live: bool) -> None:
        self.live = live
        logger.info("sidecar feed %s: %s", self.client.url, "connected" if live else "disconnected")

    def _from_thread(self, frame: Frame) -> None:
        loop, queue = self.loop, self._queue
        if loop is None or queue is None or loop.is_closed():
            # No call has run on the server's loop yet, so nothing is bound to announce.
            self.unheard += 1
            return
        loop.call_soon_threadsafe(self._enqueue, frame)

    # --- the server loop's side ----------------------------------------------

    def _enqueue(self, frame: Frame) -> None:
        assert self._queue is not None
        if self._queue.qsize() >= MAX_PENDING or self._pending_bytes + len(frame.data) > MAX_PENDING_BYTES:
            while not self._queue.empty():
                self._queue.get_nowait()
            frame = Frame("gap", "", '{"v":1,"reason":"overflow"}')
            self._pending_bytes = 0
        self._pending_bytes += len(frame.data)
        self._queue.put_nowait(frame)

    def attach(self) -> None:
        """Take the running loop as the server's (called from its calls)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if loop is self.loop and self._drain is not None and (not self._drain.done() or self._restart is not None):
            return  # running, or to be started again by _ended
        if self._restart is not None:
            self._restart.cancel()
        self.loop = loop
        self._queue, self._pending_bytes = asyncio.Queue(), 0
        self._start_drain()

    def _start_drain(self) -> None:
        """Start the announcing task on the server's loop, supervised by :meth:`_ended`."""
        assert self.loop is not None
        self._restart = None
        if self._stopping:
            return
        self._drain = self.loop.create_task(self._run(), name="sidecar-feed-announce")
        self._drain.add_done_callback(self._ended)

    def _backoff(self) -> float:
        """The wait after one more consecutive failure."""
        self._failures += 1
        return min(FAILURE_BACKOFF * 2 ** min(self._failures - 1, 30), MAX_FAILURE_BACKOFF)

    def _ended(self, task: asyncio.Task) -> None:
        """The announcing task ended: unless the server is stopping, start it again."""
        if self._stopping or task is not self._drain or self.loop is None or self.loop.is_closed():
            return
        if task.cancelled():
            return  # the loop's own shutdown (its tasks are cancelled): nothing to announce to
        delay = self._backoff()
        self.restarts += 1
        logger.error(
            "sidecar feed: the announcing task ended; starting it again in %.1fs",
            delay,
            exc_info=task.exception(),
        )
        self._restart = self.loop.call_later(delay, self._start_drain)

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            frame = await queue.get()
            self._pending_bytes -= len(frame.data)
            try:
                for name, cells in self.announcer.handle(frame):
                    await self.publish(name, cells)
            except Exception:  # noqa: BLE001 - the task outlives any one frame
                self.failed += 1
                delay = self._backoff()
                logger.exception("sidecar feed: frame %.80s not announced; the next in %.1fs", frame.id, delay)
                await asyncio.sleep(delay)
            else:
                self._failures = 0

    async def publish(self, name: str, cells: tuple[str, ...]) -> None:
        """Through the server's own path: its bus and legacy subscribers, or its publisher."""
        told = await self._notifications.publish_notebook_updated(self._server.mcp, name, list(cells))
        self.published += 1
        logger.debug("sidecar feed: announced %s %s (told: %s)", name, cells, told)

    def status(self) -> dict[str, Any]:
        """The feed's health: ``state`` is live, connecting, refused (the token) or failing."""
        client = self.client
        return {
            "state": client.state,
            "url": client.url,
            "last_error": client.last_error,
            "connections": client.connections,
            "published": self.published,
            "suppressed": self.suppressed,
        }

    def own_edit(self, name: str) -> bool:
        """Whether the feed takes the news of a tool's edit of name."""
        self.attach()
        if not self.live or name not in self._server.notebook_manager:
            return False
        self.suppressed += 1
        return True


class FeedWatchers:
    """In place of ``jupyter_mcp_server.watchers.watchers``: no connection per notebook.

    ``watch`` (a binding) and ``fold`` (a tool about to publish its edit) are the two
    calls the server makes into it; both run on the server's loop, which is how the
    feed learns which loop to publish on.
    """

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge

    def serve(self, server: Any) -> None:
        """Unused: publishing goes through jupyter_mcp_server.server.mcp."""

    def watching(self) -> list[str]:
        return []

    def watch(self, name: str, manager: Any) -> bool:
        self.bridge.attach()
        return False

    def unwatch(self, name: str) -> bool:
        return False

    def stop_all(self) -> None:
        """Nothing held per notebook."""

    def fold(self, name: str, cells: Any = ()) -> bool:
        return self.bridge.own_edit(name)


_bridge: Bridge | None = None

#: The status route, on jupyter-mcp-server's own listener (no MCP token needed, as its
#: /api/healthz): 200 with the feed live, else 503; the body is Bridge.status().
STATUS_PATH = "/api/sidecar-feed"
_status_served = False


def bridge() -> Bridge | None:
    """The running bridge, if the feed is configured."""
    return _bridge


def _serve_status(mcp: Any) -> None:
    """Add STATUS_PATH to the server's routes, once (the app is built after on_start)."""
    global _status_served
    route = getattr(mcp, "custom_route", None)
    if _status_served or route is None:
        return
    from starlette.responses import JSONResponse  # noqa: PLC0415 - the server's own dependency

    async def feed_status(_request: Any) -> JSONResponse:
        running = bridge()
        body = running.status() if running else {"state": "off"}
        return JSONResponse(body, status_code=200 if body["state"] == "live" else 503)

    route(STATUS_PATH, ["GET"])(feed_status)
    _status_served = True


def _token() -> str:
    path = (os.environ.get(TOKEN_FILE_ENV) or "").strip()
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().strip()
        except OSError as error:
            raise StartRefused(f"{TOKEN_FILE_ENV}: {error}") from error
    return (os.environ.get(TOKEN_ENV) or "").strip()


def start_feed() -> Bridge | None:
    """Check, install and start the feed if configured; refuse to start if it cannot work."""
    global _bridge
    url = (os.environ.get(URL_ENV) or "").strip()
    if not url:
        logger.info("jupyter-mcp-sidecar-feed installed but off: %s is not set", URL_ENV)
        return None
    if _bridge is not None:
        return _bridge
    problems = compat.check()
    if problems:
        raise StartRefused(compat.mismatch(problems))
    from jupyter_mcp_server import notifications, watchers  # noqa: PLC0415
    from jupyter_mcp_server import server as server_module  # noqa: PLC0415

    if watchers.enabled():
        raise StartRefused(
            f"{URL_ENV} is set but {watchers.ENABLED_ENV} is not false: the sidecar feed "
            "replaces the per-notebook watchers; set JUPYTER_MCP_WATCH_NOTEBOOKS=false"
        )
    token = _token()
    if not token:
        raise StartRefused(f"{URL_ENV} is set but neither {TOKEN_ENV} nor {TOKEN_FILE_ENV} is")
    _bridge = Bridge(url, token, server_module, notifications)
    watchers.watchers = FeedWatchers(_bridge)
    _serve_status(server_module.mcp)
    _bridge.start()
    logger.info("jupyter-mcp-sidecar-feed %s: reading %s", compat.own_version(), url)
    return _bridge


def stop_feed() -> None:
    global _bridge
    if _bridge is not None:
        _bridge.stop()
        _bridge = None


class SidecarFeedExtension(JupyterMCPExtension):
    """The entry point: starts the feed with the server's extensions."""

    def manifest(self) -> PluginManifest:
        return PluginManifest(
            name="jupyter-mcp-sidecar-feed",
            version=compat.own_version(),
            description="Announces changes from jupyter-mcp-sidecar's feed to this server's subscribers.",
            author="jupyter-mcp-sidecar",
            compatibility=PluginCompatibility(api_version="v1"),
        )

    def on_start(self) -> None:
        try:
            start_feed()
        except StartRefused as refusal:
            logger.critical("%s", refusal)
            raise

    def on_stop(self) -> None:
        stop_feed()
