"""What one frame of the feed means for this server's subscribers.

The sidecar says *which notebook* (its ``path``) changed and *what* changed; this server's
sessions bound their own names to paths with ``use_notebook``. :class:`Announcer` turns
each event into ``(name, cells)`` pairs, ``cells`` in the form jupyter-mcp-server's
``publish_notebook_updated(server, name, cells)`` takes them: a cell id, or
``"<id>/outputs/<i>"`` for an output, which that function turns into
``notebook://<name>/cells/<id>/outputs/<i>``. A pair with no cells is the whole notebook.

The bindings are read from the server's own state at each event (``bindings()``), never
copied, so a name unbound with ``unuse_notebook`` or dropped with its session is gone
from the next event on.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Callable, Iterable

from jupyter_mcp_sidecar_feed.sse import Frame

logger = logging.getLogger(__name__)

#: The event schema versions understood (docs/EVENTS.md: "v").
VERSIONS = frozenset({1})

#: One announcement: a name and the cells (and "<id>/outputs/<i>") that changed; () is
#: the whole notebook.
Announcement = tuple[str, tuple[str, ...]]


def normalize(path: str) -> str:
    """A notebook path as the sidecar writes it: relative to the root, ``/``-separated."""
    path = (path or "").strip().replace("\\", "/")
    path = posixpath.normpath("/" + path).lstrip("/")
    return "" if path == "." else path


def cells_of(changes: dict) -> tuple[str, ...]:
    """The cell ids and outputs an event's ``changes`` names, each once, in order."""
    found: list[str] = []
    for key in ("added", "removed", "moved"):
        found.extend(str(one) for one in changes.get(key) or () if one)
    for cell, change in (changes.get("cells") or {}).items():
        found.append(str(cell))
        for index in (change or {}).get("output_indexes") or ():
            found.append(f"{cell}/outputs/{int(index)}")
    return tuple(dict.fromkeys(found))


class Announcer:
    """Turns frames into announcements for the names bound to their paths."""

    def __init__(self, bindings: Callable[[], Iterable[tuple[str, str]]]) -> None:
        #: (name, path) of every notebook this server has bound now.
        self._bindings = bindings
        #: The last seq seen per path, to drop a repeated event and see a lost one.
        self._seq: dict[str, int] = {}
        self.gaps = 0

    def names(self) -> dict[str, list[str]]:
        """path → names, from the server's state now."""
        table: dict[str, list[str]] = {}
        for name, path in self._bindings():
            if name and path:
                table.setdefault(normalize(path), []).append(name)
        return table

    def whole(self, paths: Iterable[str] | None = None) -> list[Announcement]:
        """Every bound notebook (or those of paths) as changed in full."""
        table = self.names()
        chosen = table if paths is None else {p: table.get(p, []) for p in paths}
        return [(name, ()) for names in chosen.values() for name in names]

    def handle(self, frame: Frame) -> list[Announcement]:
        """The announcements one frame calls for."""
        if frame.event == "gap":
            # Lost events of unknown notebooks: every bound one changed, in full. The
            # per-path numbering starts again with the stream.
            self.gaps += 1
            self._seq.clear()
            logger.warning("sidecar feed: events lost (%s); announcing every bound notebook", frame.data)
            return self.whole()
        if frame.event != "change":
            return []
        try:
            event = json.loads(frame.data)
        except ValueError:
            logger.warning("sidecar feed: an event that is not JSON: %.200s", frame.data)
            return []
        if not isinstance(event, dict) or event.get("v") not in VERSIONS:
            return []
        path = normalize(str(event.get("path") or ""))
        old = normalize(str(event.get("renamed_from") or ""))
        seq = event.get("seq")
        if isinstance(seq, int) and not event.get("part"):
            last = self._seq.get(path)
            self._seq[path] = seq
            if last is not None and seq == last:
                return []  # a repeat
            if last is not None and seq != last + 1:
                return self.whole([path])  # lost (or a restart): the whole notebook
        if old:
            self._seq.pop(old, None)
            return self.whole([old, path])
        changes = event.get("changes") or {}
        if changes.get("incomplete"):
            return self.whole([path])
        cells = cells_of(changes)
        return [(name, cells) for name in self.names().get(path, [])]
