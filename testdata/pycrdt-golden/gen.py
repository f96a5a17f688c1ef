#!/usr/bin/env python3
"""Fixtures from the real writer: Yjs updates made by pycrdt (yrs) through jupyter_ydoc's
YNotebook and pycrdt-store's SQLiteYStore, with what the Python side reads from them.

Run with the pinned stack (testdata/jupyter/requirements.txt):

    $SIDECAR_TEST_JUPYTER_VENV/bin/python testdata/pycrdt-golden/gen.py \
        --out ystore/ynotebook/testdata/pycrdt

Each case is one JSON file: a list of steps, each a row of the store (one update, base64)
and, after applying every row so far to a fresh pycrdt Doc, what pycrdt and jupyter_ydoc
read: "doc" (to_py of the roots cells, meta and state; bytes as {"$bytes": base64}) and
"get" (YNotebook.get(), run on a copy so that its re-id write-back stays out of the rows),
with "reid" the indexes of the get() cells it gave a new uuid4. The output is
deterministic (fixed client ids, uuid4 replaced by a counter) so that a test can
regenerate it and compare.
"""

import argparse
import base64
import json
import os
import sqlite3
import sys
import tempfile
import uuid
import warnings

import anyio
import jupyter_ydoc.ynotebook as ynotebook_module
from jupyter_ydoc import YNotebook
from pycrdt import Array, Doc, Map, Text
from pycrdt.store import SQLiteYStore


class Counter:
    """A deterministic stand-in for uuid4."""

    def __init__(self, prefix):
        self.prefix, self.n = prefix, 0

    def __call__(self):
        self.n += 1
        return uuid.UUID(int=(self.prefix << 64) | self.n, version=4)


def py(v):
    """to_py values as JSON: bytes become {"$bytes": base64}."""
    if isinstance(v, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, dict):
        return {k: py(x) for k, x in v.items()}
    if isinstance(v, list):
        return [py(x) for x in v]
    return v


def read(updates, get_uuid):
    """What pycrdt and jupyter_ydoc read from the rows so far, on a fresh document."""
    doc = Doc()
    for u in updates:
        doc.apply_update(u)
    roots = {
        "cells": doc.get("cells", type=Array).to_py(),
        "meta": doc.get("meta", type=Map).to_py(),
        "state": doc.get("state", type=Map).to_py(),
    }
    stored = {c.get("id") for c in roots["cells"] or []}
    ynotebook_module.uuid4 = get_uuid
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = YNotebook(doc).get()
    reid = [i for i, c in enumerate(got["cells"]) if c.get("id") is not None and c.get("id") not in stored]
    return py(roots), py(got), reid


class Case:
    """The rows of one case, read back after each."""

    def __init__(self, name, doc_note):
        self.name, self.note, self.rows, self.steps = name, doc_note, [], []
        self.get_uuid = Counter(0xFFFF)

    def refused(self, update, what):
        """A row pycrdt refuses: its error is recorded, and it ends the case."""
        try:
            read(self.rows + [bytes(update)], self.get_uuid)
        except Exception as e:  # pycrdt raises a bare Exception
            self.steps.append({"what": what, "update": base64.b64encode(bytes(update)).decode(), "refused": str(e)})
            return
        raise AssertionError(what + ": pycrdt accepted the row")

    def row(self, update, what):
        self.rows.append(bytes(update))
        roots, got, reid = read(self.rows, self.get_uuid)
        self.steps.append({
            "what": what,
            "update": base64.b64encode(bytes(update)).decode(),
            "doc": roots,
            "get": got,
            "reid": reid,
        })

    def dump(self, out):
        path = os.path.join(out, self.name + ".json")
        with open(path, "w") as f:
            json.dump({"name": self.name, "note": self.note, "steps": self.steps}, f, indent=1, sort_keys=True)
            f.write("\n")


class Recorder:
    """Collects the updates a document emits, one per transaction."""

    def __init__(self, doc):
        self.updates = []
        self.sub = doc.observe(lambda e: self.updates.append(bytes(e.update)))

    def take(self):
        out, self.updates = self.updates, []
        return out


BIG = 2**60 + 1  # yrs writes integers a float cannot hold as BigInt (tag 122)

CONTENT = {
    "nbformat": 4,
    "nbformat_minor": 5,
    "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python", "version": "3.11.7"},
        "big": [BIG, -(2**62) - 3, 2**53 + 1, 2**31, 1.5, 0.1, -7],
        "nested": {"flag": True, "none": None, "empty": {}, "list": []},
    },
    "cells": [
        {"id": "c-md", "cell_type": "markdown", "source": "# Title\nSome *text*, été 😀",
         "metadata": {"tags": ["intro"]},
         "attachments": {"a.png": {"image/png": "iVBORw0KGgo="}}},
        {"id": "c-code", "cell_type": "code", "source": "import numpy as np\nprint(np.pi)",
         "metadata": {"collapsed": False, "scrolled": True}, "execution_count": 3,
         "outputs": [
             {"output_type": "stream", "name": "stdout", "text": "3.141592653589793\n"},
             {"output_type": "execute_result", "execution_count": 3, "metadata": {},
              "data": {"text/plain": "42", "text/html": "<b>42</b>"}},
             {"output_type": "display_data", "metadata": {"image/png": {"width": 640, "height": 480}},
              "data": {"image/png": "iVBORw0KGgoAAAANSUhEUg==", "text/plain": "<Figure size 640x480 with 1 Axes>"}},
             {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": ["Traceback", "ValueError: bad"]},
         ]},
        {"id": "c-raw", "cell_type": "raw", "source": "raw text", "metadata": {}},
        {"id": "c-empty", "cell_type": "code", "source": "", "metadata": {}, "execution_count": None, "outputs": []},
    ],
}


def edits(nb, rec, case):
    """A session of edits as a client (or the server on behalf of a kernel) makes them."""
    doc = nb.ydoc
    cells = nb.ycells

    def step(what, fn):
        fn()
        for u in rec.take():
            case.row(u, what)

    src = cells[1]["source"]
    step("type into a source", lambda: src.insert(len(src), "\nx = 1"))
    step("type more", lambda: src.insert(0, "# é😀\n"))
    step("delete a range of a source", lambda: src.__delitem__(slice(0, 3)))
    step("insert a cell at the top", lambda: nb.ycells.insert(0, nb.create_ycell(
        {"id": "c-new", "cell_type": "code", "source": "y = 2", "metadata": {}, "outputs": [], "execution_count": None})))
    step("append a cell", lambda: nb.append_cell({"id": "c-end", "cell_type": "markdown", "source": "end", "metadata": {}}))
    step("delete a cell", lambda: cells.__delitem__(3))
    step("set a cell metadata key", lambda: cells[1]["metadata"].__setitem__("tags", ["a", "b"]))
    step("delete a cell metadata key", lambda: cells[1]["metadata"].__delitem__("tags"))

    def run():
        with doc.transaction():
            cells[0]["execution_count"] = 7
            cells[0]["execution_state"] = "busy"
            cells[0]["outputs"].append(Map({"output_type": "stream", "name": "stdout", "text": Text("hello")}))

    step("a kernel starts writing outputs", run)
    step("stream text grows", lambda: cells[0]["outputs"][0]["text"].insert(5, " world\n"))
    step("execution finishes", lambda: cells[0].__setitem__("execution_state", "idle"))
    step("outputs cleared", lambda: cells[0]["outputs"].clear())
    step("notebook metadata", lambda: nb._ymeta["metadata"].__setitem__("big2", BIG + 2))
    step("replace a cell", lambda: nb.set_cell(2, {"id": "c-repl", "cell_type": "raw", "source": "replaced", "metadata": {"x": 1}}))
    step("state", lambda: (nb._ystate.__setitem__("path", "sub/a.ipynb"), nb._ystate.__setitem__("dirty", True)))
    step("set source granularly", lambda: nb.set_cell(1, source="all new source"))


def case_edits(out):
    case = Case("edits", "YNotebook.set then edits by one pycrdt client (client id 101), one row per transaction")
    doc = Doc(client_id=101)
    rec = Recorder(doc)
    nb = YNotebook(doc)
    ynotebook_module.uuid4 = Counter(1)
    nb.set(CONTENT)
    for u in rec.take():
        case.row(u, "set the notebook")
    edits(nb, rec, case)
    case.dump(out)
    return doc, case.rows


def case_full_state(out, doc):
    case = Case("full-state", "the whole state of the edits case as one update (get_update: GC structs for what was deleted), as a checkpoint or squash row holds it")
    case.row(doc.get_update(), "full state")
    case.dump(out)


def load_from_disk(content, uuid_prefix):
    """The update a room loads from disk with (jupyter_server_ydoc rooms.py: client id 0)."""
    src = Doc(client_id=0)
    ynotebook_module.uuid4 = Counter(uuid_prefix)
    YNotebook(src).set(content)
    return src.get_update()


def case_empty_block(out):
    """yrs splits a string block at its end when a deletion by UTF-8 offsets ends inside
    a character: the full state then holds an item of no length, and an insert next to it
    names it, by the id the insert itself takes, as its right origin."""
    case = Case("yrs-empty-block", "an empty string item in yrs's full state, and an insert whose right origin is its own id")
    doc = Doc(client_id=101)
    rec = Recorder(doc)
    nb = YNotebook(doc)
    ynotebook_module.uuid4 = Counter(5)
    nb.set({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"id": "c", "cell_type": "code", "source": "ab", "metadata": {}, "outputs": [], "execution_count": None}]})
    for u in rec.take():
        case.row(u, "set")
    src = nb.ycells[0]["source"]
    src.insert(0, "# é😀\n")
    del src[0:3]
    for u in rec.take():
        case.row(u, "insert, then delete by UTF-8 offsets inside a character")
    case.row(doc.get_update(), "the full state: an empty item")
    src.insert(0, "Z")
    for u in rec.take():
        case.row(u, "insert at the empty item")
    case.row(doc.get_update(), "the full state again")
    case.dump(out)


def case_load(out):
    case = Case("load-from-disk", "a room loaded from disk twice (client id 0, the deterministic update), then a client edits")
    load = load_from_disk(CONTENT, 2)
    case.row(load, "load from disk")
    case.row(load_from_disk(CONTENT, 2), "loaded again after a restart: the same structs")
    client = Doc(client_id=202)
    client.apply_update(load)
    rec = Recorder(client)
    nb = YNotebook(client)
    nb.ycells[1]["source"].insert(0, "# edited\n")
    for u in rec.take():
        case.row(u, "client edits")
    case.dump(out)


def case_rebuilt_over_itself(out):
    """A store pycrdt-store cannot open (the older layout without ycheckpoints) makes the
    server rebuild the room from the file, with client id 0, over the client-0 history
    the store already holds: the two histories share ids for different structs, and
    pycrdt refuses the store's rows from then on."""
    case = Case("rebuilt-over-itself", "two loads from disk (client id 0) of different files in one room: pycrdt refuses the second")
    changed = json.loads(json.dumps(CONTENT))
    changed["cells"][1]["source"], changed["cells"][1]["outputs"] = "changed on disk", []
    case.row(load_from_disk(changed, 6), "load from disk")
    case.refused(load_from_disk(CONTENT, 6), "loaded again from another file")
    case.dump(out)


def case_duplicates(out, name, content, note):
    """A stale client reconnects to a room rebuilt with another history: its cells come
    back next to the room's, with the same ids."""
    case = Case(name, note)
    old = Doc(client_id=500)  # the room before the restart, as an older server wrote it
    ynotebook_module.uuid4 = Counter(3)
    YNotebook(old).set(content)
    stale = Doc(client_id=301)
    stale.apply_update(old.get_update())
    stale_nb = YNotebook(stale)
    # offline, the stale client edits one cell: its copy will differ
    stale_nb.ycells[1]["source"].insert(0, "# offline\n")

    server = Doc(client_id=1)
    srec = Recorder(server)
    server.apply_update(load_from_disk(content, 3))
    for u in srec.take():
        case.row(u, "room rebuilt from disk")
    server.apply_update(stale.get_update(server.get_state()))
    for u in srec.take():
        case.row(u, "the stale client syncs: every cell twice")

    # the server saves: get() re-ids the differing duplicate and writes the id back
    server_nb = YNotebook(server)
    ynotebook_module.uuid4 = Counter(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server_nb.get()
    for u in srec.take():
        case.row(u, "the server saves: the re-id written back")

    # the stale client edits the hidden copy of an exact duplicate
    stale.apply_update(server.get_update(stale.get_state()))
    srec2 = Recorder(stale)
    n = len(stale_nb.ycells)
    hidden = [i for i in range(n) if stale_nb.ycells[i].get("id") == "c-raw"][-1]
    stale_nb.ycells[hidden]["source"].insert(0, "changed ")
    for u in srec2.take():
        server.apply_update(u)
    for u in srec.take():
        case.row(u, "a hidden exact duplicate is edited: it differs now")

    # the first copy of an id is deleted: the other one is served in its place
    first = [i for i in range(len(server_nb.ycells)) if server_nb.ycells[i].get("id") == "c-code"][0]
    del server_nb.ycells[first]
    for u in srec.take():
        case.row(u, "the first copy of a duplicate deleted")
    case.dump(out)


def case_store(out, set_rows):
    """Rows as pycrdt-store's SQLiteYStore writes them: checkpoints every 4 updates, the
    squash of the cleanup by size, and the inactivity squash (no compression)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "y.db")

        class Store(SQLiteYStore):
            db_path = db
            checkpoint_interval = 4

        async def write(store_cls, rows):
            async with store_cls("json:notebook:f") as store:
                for u in rows:
                    await store.write(u)

        anyio.run(write, Store, set_rows)
        con = sqlite3.connect(db)
        ckpt, ts = con.execute("SELECT checkpoint, timestamp FROM ycheckpoints").fetchone()
        after = [r[0] for r in con.execute(
            "SELECT yupdate FROM yupdates WHERE timestamp >= ? ORDER BY timestamp", (ts,))]
        case = Case("store-checkpoint", "the checkpoint row SQLiteYStore wrote (a full state) and the rows after it, as the room is loaded")
        case.row(ckpt, "checkpoint")
        for u in after:
            case.row(u, "row after the checkpoint")
        case.dump(out)

        class Squash(SQLiteYStore):
            db_path = db

        async def squash():
            async with Squash("json:notebook:f") as store:
                await store.db_initialized.wait()
                async with store._db:
                    cursor = await store._db.cursor()
                    await store._squash_document_history(cursor, "json:notebook:f")
                    await store._db.commit()

        anyio.run(squash)
        rows = [r[0] for r in con.execute("SELECT yupdate FROM yupdates ORDER BY timestamp")]
        case = Case("store-squash", "the one row the cleanup by size leaves (_squash_document_history)")
        for u in rows:
            case.row(u, "squashed row")
        case.dump(out)
        con.close()

        db2 = os.path.join(tmp, "y2.db")

        class Inactive(SQLiteYStore):
            db_path = db2
            checkpoint_interval = None
            squash_after_inactivity_of = 0

        anyio.run(write, Inactive, set_rows[:3])
        con = sqlite3.connect(db2)
        rows = [r[0] for r in con.execute("SELECT yupdate FROM yupdates ORDER BY timestamp")]
        con.close()
        case = Case("store-inactivity-squash", "pycrdt-store 0.1.5's inactivity squash without compression: the merged row is an empty document (the updates it replaces are not applied), so the rows left lose the history")
        for u in rows:
            case.row(u, "row left")
        case.dump(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    doc, rows = case_edits(args.out)
    case_full_state(args.out, doc)
    case_load(args.out)
    case_empty_block(args.out)
    case_rebuilt_over_itself(args.out)
    case_duplicates(args.out, "duplicates", CONTENT,
                    "a stale client reconnects to a room rebuilt with another history: exact duplicates, one differing copy, the server's re-id, a hidden copy edited, a first copy deleted")
    legacy = dict(CONTENT, nbformat_minor=4)
    case_duplicates(args.out, "duplicates-nbformat-4.4", legacy,
                    "the same for nbformat 4.4: get() drops the ids first and deduplicates nothing")
    case_store(args.out, rows)


if __name__ == "__main__":
    sys.exit(main())
