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

Every event is validated (:func:`parse`) before anything is read from it: one that is not
JSON, nests too deep, or whose fields have the wrong types is logged and skipped.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass

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


class BadEvent(ValueError):
    """A change frame whose data is not an event: skipped."""


@dataclass(frozen=True)
class Event:
    """What the announcer reads of a valid event (docs/EVENTS.md, "The event")."""

    path: str  # normalized
    seq: int
    renamed_from: str  # normalized; "" unless a rename
    part: bool  # one part of a split event
    incomplete: bool
    cells: tuple[str, ...]  # what changed, as cells_of gives it


def _integer(value: object) -> bool:
    return type(value) is int  # not a bool


def _ids(changes: dict, key: str) -> list[str]:
    ids = changes.get(key, [])
    if not isinstance(ids, list) or not all(isinstance(one, str) and one for one in ids):
        raise BadEvent(f"changes.{key} is not a list of cell ids")
    return ids


def cells_of(changes: dict) -> tuple[str, ...]:
    """The cell ids and outputs an event's ``changes`` names, each once, in order.

    Raises :class:`BadEvent` when ``changes`` does not have the event's shape.
    """
    if not isinstance(changes, dict):
        raise BadEvent("changes is not an object")
    found: list[str] = []
    for key in ("added", "removed", "moved"):
        found.extend(_ids(changes, key))
    cells = changes.get("cells", {})
    if not isinstance(cells, dict):
        raise BadEvent("changes.cells is not an object")
    for cell, change in cells.items():
        indexes = change.get("output_indexes", []) if isinstance(change, dict) else None
        if not cell or not isinstance(indexes, list) or not all(_integer(i) and i >= 0 for i in indexes):
            raise BadEvent(f"changes.cells[{cell[:64]!r}] is not a cell change")
        found.append(cell)
        found.extend(f"{cell}/outputs/{index}" for index in indexes)
    return tuple(dict.fromkeys(found))


def parse(data: str) -> Event | None:
    """The event a change frame carries, or None for a version not understood (ignored).

    Raises :class:`BadEvent` for anything else that is not a valid event.
    """
    try:
        event = json.loads(data)
    except (ValueError, RecursionError) as error:  # RecursionError: nested too deep
        raise BadEvent(f"not JSON ({type(error).__name__})") from None
    if not isinstance(event, dict):
        raise BadEvent("not an object")
    version = event.get("v")
    if not _integer(version):
        raise BadEvent("v is not an integer")
    if version not in VERSIONS:
        return None
    seq, path, old = event.get("seq"), event.get("path"), event.get("renamed_from", "")
    if not _integer(seq) or seq < 1:
        raise BadEvent("seq is not a positive integer")
    if not isinstance(path, str) or not normalize(path):
        raise BadEvent("path is not a notebook path")
    if not isinstance(old, str):
        raise BadEvent("renamed_from is not a path")
    part, changes = event.get("part"), event.get("changes", {})
    if part is not None and not isinstance(part, dict):
        raise BadEvent("part is not an object")
    cells = cells_of(changes)
    incomplete = changes.get("incomplete", False)
    if not isinstance(incomplete, bool):
        raise BadEvent("changes.incomplete is not a boolean")
    return Event(normalize(path), seq, normalize(old), part is not None, incomplete, cells)


class Announcer:
    """Turns frames into announcements for the names bound to their paths."""

    def __init__(self, bindings: Callable[[], Iterable[tuple[str, str]]]) -> None:
        #: (name, path) of every notebook this server has bound now.
        self._bindings = bindings
        #: The last seq seen per path, to drop a repeated event and see a lost one.
        self._seq: dict[str, int] = {}
        self.gaps = 0
        #: Change frames skipped as not valid events.
        self.bad = 0

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
            event = parse(frame.data)
        except BadEvent as bad:
            self.bad += 1
            logger.warning("sidecar feed: event %.80s skipped: %s: %.200s", frame.id, bad, frame.data)
            return []
        if event is None:
            return []
        path, old, seq = event.path, event.renamed_from, event.seq
        if not event.part:
            last = self._seq.get(path)
            self._seq[path] = seq
            if last is not None and seq == last:
                return []  # a repeat
            if last is not None and seq != last + 1:
                return self.whole([path])  # lost (or a restart): the whole notebook
        if old:
            self._seq.pop(old, None)
            return self.whole([old, path])
        if event.incomplete:
            return self.whole([path])
        return [(name, event.cells) for name in self.names().get(path, [])]
