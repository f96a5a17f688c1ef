"""The sidecar's change feed, read as a Server-Sent Events stream.

One thread holds one HTTP connection to the sidecar's ``sse`` publisher (docs/EVENTS.md,
"The sse feed") and hands every frame to a callback: ``hello`` (the stream starts, or
resumes without loss), ``change`` (one event), ``gap`` (events were lost). It resumes
with ``Last-Event-ID`` after any disconnect, waiting with exponential backoff and jitter
between attempts, never longer than ``max_backoff``; a stream silent for longer than
``read_timeout`` (the sidecar sends a heartbeat every 15 s) is treated as disconnected.
Every stream opened is logged (``stream open``), the first and each one after a
reconnect. A token the sidecar refuses is an ERROR at every attempt, saying what to fix,
and :attr:`FeedClient.state` says ``refused`` until a stream opens.

Every line is bounded as it is read: the stream's bytes are taken as each read returns
them (httpcore reads at most 64 kB), and a line (a comment too) growing past
``MAX_LINE_BYTES`` ends the connection before more of it is held; a frame's data past
``MAX_FRAME_BYTES`` as well.

Nothing here imports jupyter-mcp-server: the thread only reads and parses.
"""

from __future__ import annotations

import logging
import random
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import httpx

logger = logging.getLogger(__name__)

#: The largest frame accepted (its data lines together); a longer one ends the
#: connection (and resumes).
MAX_FRAME_BYTES = 4 << 20

#: The longest line accepted, its line end excluded: a data line of a frame of
#: MAX_FRAME_BYTES and its "data: ". A longer line of any kind ends the connection.
MAX_LINE_BYTES = MAX_FRAME_BYTES + 64

_LINE_END = re.compile(rb"\r\n|\r|\n")


class TooLarge(ValueError):
    """A line or a frame of the stream is over its bound."""


#: :attr:`FeedClient.state`: before the first stream, live, refused (401/403: the token),
#: failing (any other answer, or no answer).
CONNECTING, LIVE, REFUSED, FAILING = "connecting", "live", "refused", "failing"


def jittered(wait: float, cap: float) -> float:
    """The wait before a reconnect: ``wait`` ± 50 %, so that replicas that lost the sidecar
    together do not come back together, and never more than ``cap``."""
    return min(wait * (0.5 + random.random()), cap)  # noqa: S311 - not cryptographic


@dataclass(frozen=True)
class Frame:
    """One SSE frame: its type (``event:``), its ``id:`` and its ``data:``."""

    event: str
    id: str
    data: str


def lines(chunks: Iterable[bytes], limit: int = MAX_LINE_BYTES) -> Iterator[str]:
    """Split a byte stream into its lines (ended by CRLF, LF or CR), decoded as UTF-8.

    At most ``limit`` bytes of a line and one chunk are held: a line longer than
    ``limit`` raises :class:`TooLarge` as soon as that many bytes of it have arrived.
    An unfinished last line is dropped, as SSE drops an unfinished frame.
    """
    held = bytearray()
    after_cr = False  # the previous chunk ended with CR: an LF starting this one ends nothing
    for chunk in chunks:
        if after_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        after_cr = False
        start = 0
        for end in _LINE_END.finditer(chunk):
            if len(held) + end.start() - start > limit:
                raise TooLarge(f"an SSE line is longer than {limit} bytes")
            held += chunk[start : end.start()]
            yield held.decode("utf-8", "replace")
            held.clear()
            start = end.end()
            after_cr = end.group() == b"\r" and start == len(chunk)
        if len(held) + len(chunk) - start > limit:
            raise TooLarge(f"an SSE line is longer than {limit} bytes")
        held += chunk[start:]


def frames(stream: Iterable[str]) -> Iterator[Frame]:
    """Parse SSE lines (without their line ends) into frames; comments are skipped.

    A frame whose data lines together exceed MAX_FRAME_BYTES raises :class:`TooLarge`.
    """
    event, ident, data, size = "", "", [], 0
    for line in stream:
        if line == "":
            if data or event:
                yield Frame(event or "message", ident, "\n".join(data))
            event, ident, data, size = "", "", [], 0
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "id":
            ident = value
        elif field == "data":
            size += len(value) + 1  # and its line end: a frame of empty lines is bounded too
            if size > MAX_FRAME_BYTES:
                raise TooLarge(f"an SSE frame is larger than {MAX_FRAME_BYTES} bytes")
            data.append(value)


class FeedClient:
    """Reads the feed in a daemon thread until :meth:`stop`.

    ``on_frame`` is called in the thread for every frame; ``on_state`` with ``True``
    when a stream is open and ``False`` when it is lost.
    """

    def __init__(
        self,
        url: str,
        token: str,
        on_frame: Callable[[Frame], None],
        on_state: Callable[[bool], None] = lambda _live: None,
        *,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        read_timeout: float = 45.0,
    ) -> None:
        self.url = url
        # identity: the stream's bytes are read as they come, never inflated past a bound.
        self._headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
        }
        self._on_frame = on_frame
        self._on_state = on_state
        self._backoff, self._max_backoff = backoff, max_backoff
        self._timeout = httpx.Timeout(10.0, read=read_timeout)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: httpx.Response | None = None
        #: The id of the last frame received: where a reconnect resumes.
        self.last_event_id = ""
        #: How many streams were opened, for the logs and the tests.
        self.connections = 0
        #: CONNECTING, LIVE, REFUSED or FAILING; why, when not live.
        self.state = CONNECTING
        self.last_error = ""

    def start(self) -> None:
        """Start the thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sidecar-feed", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop reading: closes the stream and waits for the thread."""
        self._stopping.set()
        response = self._response
        if response is not None:
            try:
                response.close()
            except Exception:  # noqa: BLE001 - closing a broken stream
                pass
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        wait = self._backoff
        with httpx.Client(timeout=self._timeout) as client:
            while not self._stopping.is_set():
                opened = self._stream(client)
                if self._stopping.is_set():
                    return
                if opened:
                    wait = self._backoff
                if self.state == REFUSED:
                    wait = self._max_backoff  # retrying sooner cannot help: the token is wrong
                delay = jittered(wait, self._max_backoff)
                logger.info("sidecar feed: reconnecting in %.1fs", delay)
                self._stopping.wait(delay)
                wait = min(wait * 2, self._max_backoff)

    def _opened(self) -> None:
        """A stream is open: the first, or one after a reconnect."""
        self.connections += 1
        self.state, self.last_error = LIVE, ""
        logger.info(
            "sidecar feed: stream open (%s, connection %d%s)", self.url, self.connections,
            f", resuming after {self.last_event_id}" if self.last_event_id else "",
        )

    def _refused(self, status: int) -> None:
        """The sidecar answered something else than a stream: say what is wrong, loudly."""
        if status in (401, 403):
            self.state = REFUSED
            self.last_error = f"the sidecar refused the token (HTTP {status})"
            logger.error(
                "sidecar feed %s refused the token (HTTP %s): JUPYTER_MCP_SIDECAR_FEED_TOKEN (or _FILE) is not "
                "the sidecar's publisher.options.token. Changes made outside this server (people in JupyterLab, "
                "other agents, files on disk) are NOT announced to its subscribers until it is fixed; "
                "retrying every %.0fs", self.url, status, self._max_backoff,
            )
            return
        self.state, self.last_error = FAILING, f"HTTP {status}"
        logger.error(
            "sidecar feed %s answered HTTP %s instead of the event stream: changes made outside this server "
            "are not announced until it answers", self.url, status,
        )

    def _stream(self, client: httpx.Client) -> bool:
        """One connection; answers whether a stream was opened."""
        headers = dict(self._headers)
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        live = False
        try:
            with client.stream("GET", self.url, headers=headers) as response:
                self._response = response
                if response.status_code != 200:
                    self._refused(response.status_code)
                    return False
                encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
                if encoding not in ("", "identity"):
                    logger.error("sidecar feed %s answered with Content-Encoding %.40s", self.url, encoding)
                    return False
                self._opened()
                live = True
                self._on_state(True)
                # Each read as it returns: iter_raw with a chunk size would hold a frame
                # back until that many bytes came.
                for frame in frames(lines(response.iter_raw())):
                    if frame.id:
                        self.last_event_id = frame.id
                    try:
                        self._on_frame(frame)
                    except Exception:  # noqa: BLE001 - one bad frame must not end the feed
                        logger.exception("sidecar feed: a frame could not be handled")
        except (httpx.HTTPError, ValueError, OSError) as error:
            if not self._stopping.is_set():
                self.state, self.last_error = FAILING, str(error)
                logger.warning("sidecar feed %s: %s", self.url, error)
        finally:
            self._response = None
            if live:
                self._on_state(False)
        return live
