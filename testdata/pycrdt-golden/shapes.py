#!/usr/bin/env python3
"""Notebook shapes jupyter_ydoc's YNotebook.get() reads its own way (issue 40).

Run with the pinned stack (testdata/jupyter/requirements.txt):

    python shapes.py fixtures --out ystore/ynotebook/testdata/shapes
        One JSON file per class of issue 40 (and a few more shapes): {"name", "note",
        "cases": [{"what", "rows": [base64 update, ...], "get": json.dumps of get() (text:
        numbers exactly as Python writes them), "made_ids": indexes of get()'s cells whose
        id the server made up}]} for documents written by pycrdt, and {"what", "file":
        .ipynb text, "get", "made_ids"} for files: get() after YNotebook.set() of
        nbformat.reads(file) on a fresh Doc, as the server loads a file into a room.

    python shapes.py histories --seed 1 --count 300
        Random histories over the same shapes (in-place cell type changes, extra and
        missing keys, unknown cell types, partial maps from concurrent creation,
        attachments on every cell type, whole numbers at and beyond 2^53 and 1e21,
        negative zero, list-form values, a reload of a file with an integer beyond int64)
        written by 2-3 pycrdt clients: one line per history {"seed", "rows", "get",
        "made_ids"}, and every tenth history a file case as well ({"seed", "file", "get",
        "made_ids"}) made from the history's notebook.

    python shapes.py cases ystore/ynotebook/testdata/cases.json
        get() of each table case (written by yjs clients): [{"name", "get", "made_ids"}],
        for ystore/ynotebook/testdata/cases-get.json.

Everything is seeded and client ids are fixed: the output is the same run after run,
except the updates' bytes (yrs orders map entries at random).
"""

import argparse
import base64
import copy
import json
import os
import random
import sys
import uuid
import warnings

import nbformat
import jupyter_ydoc.ynotebook as ynotebook_module
from jupyter_ydoc import YNotebook
from pycrdt import Array, Doc, Map, Text

from differential import Client, byte_offset  # differential.py beside this file
from gen import Counter  # gen.py beside this file

HUGE = 2**64 + 5  # beyond int64: pycrdt panics converting it


def dumps(v):
    """get() as the server's save writes it (nbformat.writes: json.dumps, ensure_ascii off)."""
    return json.dumps(v, ensure_ascii=False, sort_keys=True)


def read_get(doc, uuid_prefix=0xFFFF, stored=None):
    """YNotebook.get() of doc as JSON text (None where get() raises or json.dumps refuses
    it: the server cannot save it either), and the indexes of its cells with a made-up id
    (one not among stored, by default the document's ids)."""
    if stored is None:
        stored = {c.get("id") for c in doc.get("cells", type=Array).to_py() or []}
    ynotebook_module.uuid4 = Counter(uuid_prefix)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = YNotebook(doc).get()
        text = dumps(got)
    except (TypeError, ValueError, OverflowError, KeyError):
        # json.dumps refuses bytes; cast_all raises on NaN and infinities; _cell_to_py
        # on attachments in a cell without cell_type
        return None, []
    made = [i for i, c in enumerate(got["cells"]) if c.get("id") is not None and c.get("id") not in stored]
    return text, made


def load_file(text):
    """get() of a fresh room the server loads the .ipynb text into: nbformat.reads, then
    YNotebook.set on a Doc of client id 0 whose update the room applies (jupyter_server_ydoc's
    _apply_deterministic_source_content; a panic in pycrdt keeps what it committed);
    "refused" when nbformat.reads raises."""
    try:
        nb = nbformat.reads(text, as_version=4, capture_validation_error={})
    except Exception as e:  # the server answers 400 Unreadable Notebook: no room
        return {"file": text, "refused": type(e).__name__}
    doc = Doc(client_id=0)
    ynotebook_module.uuid4 = Counter(0xEEEE)
    try:
        YNotebook(doc).set(nb)
    except BaseException:  # pyo3's PanicException is a BaseException
        pass
    room = Doc()  # the room receives the source document's update, as the server does
    room.apply_update(doc.get_update())
    in_file = {c.get("id") for c in json.loads(text).get("cells", []) if isinstance(c, dict)}
    got, made = read_get(room, stored=in_file)
    return {"file": text, "get": got, "made_ids": made}


class Writer:
    """pycrdt docs whose updates, one per transaction, are the rows of a store."""

    def __init__(self, n=1, base=1):
        self.docs = [Doc(client_id=base + i) for i in range(n)]
        self.rows = []
        for d in self.docs:
            d.observe(lambda e, d=d: self._made(d, bytes(e.update)))
        self.applying = False

    def _made(self, d, u):
        if self.applying:
            return
        self.rows.append(u)

    def sync(self):
        """Every doc receives every row (not recorded again)."""
        self.applying = True
        try:
            for d in self.docs:
                for u in self.rows:
                    d.apply_update(u)
        finally:
            self.applying = False

    def cells(self, i=0):
        return self.docs[i].get("cells", type=Array)

    def meta(self, i=0):
        return self.docs[i].get("meta", type=Map)

    def case(self, what):
        ref = Doc()
        for u in self.rows:
            ref.apply_update(u)
        got, made = read_get(ref)
        return {"what": what, "rows": [base64.b64encode(u).decode() for u in self.rows], "get": got, "made_ids": made}


def notebook(w, cells, meta=None):
    """One transaction: nbformat 4.5 meta, then the cell maps given (plain dicts, the
    values of source, metadata and outputs made shared types where they are lists,
    dicts and strings as jupyter_ydoc writes them)."""
    d = w.docs[0]
    with d.transaction():
        m = w.meta()
        m["nbformat"] = 4
        m["nbformat_minor"] = 5
        m["metadata"] = Map(meta if meta is not None else {"kernelspec": {"name": "python3", "display_name": "Python 3"}})
        for c in cells:
            w.cells().append(Map(shared(c)))


def shared(c):
    c = dict(c)
    if isinstance(c.get("source"), str):
        c["source"] = Text(c["source"])
    if isinstance(c.get("metadata"), dict):
        c["metadata"] = Map(c["metadata"])
    if isinstance(c.get("outputs"), list):
        c["outputs"] = Array([Map(o) for o in c["outputs"]])
    return c


def code(i, src="x", **kw):
    c = {"id": i, "cell_type": "code", "source": src, "metadata": {}, "execution_count": None, "outputs": []}
    c.update(kw)
    return c


def md(i, src="# t", kind="markdown", **kw):
    c = {"id": i, "cell_type": kind, "source": src, "metadata": {}}
    c.update(kw)
    return c


PNG = {"image/png": "iVBORw0KGgo="}
RESULT = {"output_type": "execute_result", "execution_count": 2, "metadata": {}, "data": {"text/plain": "42"}}


def one(cells, what, meta=None, edit=None):
    """A case: a notebook of cells in one row, and edit (on the written doc) in a second."""
    w = Writer()
    notebook(w, cells, meta)
    if edit is not None:
        with w.docs[0].transaction():
            edit(w)
    return w.case(what)


def class1():
    cases = []
    for kind in ("markdown", "raw"):
        for att in ({}, None, {"a.png": PNG}):
            cases.append(one([md("a", kind=kind, attachments=att)], f"{kind} cell, attachments {json.dumps(att)}"))
        cases.append(one([md("a", kind=kind)], f"{kind} cell, attachments set to {{}} later",
                         edit=lambda w: w.cells()[0].__setitem__("attachments", {})))
    return cases


def class2():
    return [one([code("c", attachments=att)], f"code cell, attachments {json.dumps(att)}") for att in ({}, None, {"a.png": PNG}, [])]


def retype(to):
    return lambda w: w.cells()[0].__setitem__("cell_type", to)


def class3():
    return [
        one([code("c", execution_count=3, outputs=[RESULT])], "code → markdown in place", edit=retype("markdown")),
        one([code("c", execution_count=3, outputs=[RESULT])], "code → raw in place", edit=retype("raw")),
        one([md("m", attachments={"a.png": PNG})], "markdown → code in place", edit=retype("code")),
        one([md("m")], "markdown → code in place, no attachments", edit=retype("code")),
        one([md("m", attachments={})], "raw → markdown, empty attachments", edit=retype("raw")),
    ]


def class4():
    return [
        one([code("c", custom={"k": [1, 2.5]}, trusted=True, collapsed=False)], "code cell with custom, trusted, collapsed"),
        one([md("m", custom="x", execution_state="busy")], "markdown cell with custom and execution_state"),
        one([md("m")], "a key set later", edit=lambda w: w.cells()[0].__setitem__("custom", {"n": 7})),
        one([code("c", execution_state="busy")], "code cell, execution_state (get() drops it)"),
    ]


def class5():
    return [
        one([code("a"), md("h", kind="heading", level=2), md("z")], "heading between two cells"),
        one([code("a"), {"id": "n", "source": "s", "metadata": {}}, md("z")], "no cell_type"),
        one([code("a"), {"id": "n", "cell_type": 3, "source": "s", "metadata": {}}], "cell_type 3"),
        one([code("a"), md("z")], "code → heading in place", edit=retype("heading")),
    ]


def class6():
    cases = [
        one([{"id": "s", "cell_type": "markdown", "metadata": {}}], "no source"),
        one([{"id": "s", "cell_type": "code", "metadata": {}, "source": "x"}], "code cell without outputs nor execution_count"),
        one([md("m", metadata="x")], "metadata a string"),
        one([md("m", metadata=None)], "metadata null"),
        one([{"cell_type": "markdown", "source": "x", "metadata": {}}], "no id"),
        one([{"id": 5, "cell_type": "markdown", "source": "x", "metadata": {}}], "id a number"),
        one([md(5, "a"), md(5, "b"), md(5.0, "a"), md(1, "c"), md(True, "d"), md(0, "e"), md(0, "e"), md("5", "a")],
            "numeric ids deduplicated as get() does (5 == 5.0, True == 1, 0 is no id)"),
        one([{"id": "m", "cell_type": "markdown", "source": ["a\n", "b"], "metadata": {}}], "source a list"),
        one([code("c")], "source deleted later", edit=lambda w: w.cells()[0].pop("source")),
    ]
    # two replicas create and fill one cell map concurrently
    w = Writer(2)
    notebook(w, [code("a")])
    w.sync()
    w.cells(0).append(Map())
    w.sync()
    w.cells(0)[1]["source"] = Text("from 0")
    w.cells(1)[1]["metadata"] = Map({"tags": ["t"]})
    w.cells(1)[1]["id"] = "p"
    w.sync()
    cases.append(w.case("cell map filled by two replicas (source, metadata, id)"))
    w = Writer(2)
    notebook(w, [code("a")])
    w.sync()
    w.cells(0).append(Map({"source": Text("s")}))
    w.cells(1).append(Map({"metadata": Map({"k": 1})}))
    w.sync()
    cases.append(w.case("two replicas append partial cell maps"))
    return cases


def class7():
    """The server reloads a file holding an integer beyond int64: set() panics mid-cell."""
    cases = []
    for where, cell in [
        ("cell metadata", {"id": "b", "cell_type": "code", "source": "y", "metadata": {"a": 1, "big": HUGE, "z": 2}, "execution_count": 1, "outputs": []}),
        ("an output", {"id": "b", "cell_type": "code", "source": "y", "metadata": {}, "execution_count": 1,
                       "outputs": [RESULT, {"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {"text/plain": str(HUGE), "application/json": {"n": HUGE}}}]}),
        ("execution_count", {"id": "b", "cell_type": "code", "source": "y", "metadata": {}, "execution_count": HUGE, "outputs": []}),
    ]:
        nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [code("a", "first"), cell, md("c")]}
        doc = Doc(client_id=0)
        rows = []
        doc.observe(lambda e: rows.append(bytes(e.update)))
        try:
            YNotebook(doc).set(nb)
        except BaseException:
            pass
        got, made = read_get(doc)
        cases.append({"what": "set() panics on an integer beyond int64 in " + where, "rows": [base64.b64encode(u).decode() for u in rows],
                      "get": got, "made_ids": made})
    return cases


NUMBERS = [2**53 - 1, 2**53, 2**53 + 1, 2**62, 2**63 - 1, -(2**63), 1e21, 1e300, 1e16, 123456789.125, 0.1, 1e-05, 1.5e-07,
           -0.0, 0.0, 3.0, -7, 1.7976931348623157e308, 5e-324, 2.5]


def class8():
    md_numbers = {"n": NUMBERS, "nested": {"x": -0.0, "y": [1e21, [2**62]]}}
    return [
        one([code("c", metadata=md_numbers, execution_count=3.0,
                  outputs=[{"output_type": "execute_result", "execution_count": 3.0, "metadata": {"v": 1e21}, "data": {"application/json": {"n": NUMBERS}}}])],
            "numbers in cell metadata, execution_count and an output", meta={"n": NUMBERS}),
        one([code("c", execution_count=-0.0), code("d", execution_count=2**62), code("e", execution_count=1e21)], "execution counts"),
    ]


def ipynb(cells, nbformat_minor=5, metadata=None, **top):
    nb = {"cells": cells, "metadata": metadata if metadata is not None else {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": nbformat_minor}
    nb.update(top)
    return json.dumps(nb, ensure_ascii=False, indent=1)


def class9():
    out_list = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
                "data": {"text/plain": ["line 1\n", "日本 🎉"], "text/html": ["<b>", "x</b>"], "application/json": ["a", "b"], "image/png": "iVBORw0KGgo=\n"}}
    stream = {"output_type": "stream", "name": "stdout", "text": ["a\n", "b"]}
    files = [
        ("list-form text/plain, html, json and a stream", ipynb([code("a", ["x = 1\n", "x"], outputs=[out_list, stream], execution_count=1)])),
        ("markdown with list-form source and attachments", ipynb([md("m", ["# a\n", "b"], attachments={"a.png": {"image/png": ["iVBOR", "w0KGgo="], "text/plain": ["a", "b"]}})])),
        ("empty attachments, trusted, custom keys", ipynb([md("m", attachments={}), code("c", metadata={"trusted": True, "collapsed": True}, custom=1)])),
        ("nbformat 4.4 without ids", ipynb([{"cell_type": "code", "source": "x", "metadata": {}, "execution_count": None, "outputs": []},
                                            {"cell_type": "markdown", "source": "y", "metadata": {}}], nbformat_minor=4)),
        ("nbformat 4.5 without ids", ipynb([{"cell_type": "code", "source": "x", "metadata": {}, "execution_count": None, "outputs": []},
                                            {"cell_type": "markdown", "source": "y", "metadata": {}}])),
        ("no cells", ipynb([])),
        ("no metadata", json.dumps({"cells": [md("m")], "nbformat": 4, "nbformat_minor": 5})),
        ("metadata with language_info", ipynb([md("m")], metadata={"language_info": {"name": "python"}, "orig_nbformat": 3, "signature": "x"})),
        ("numbers", ipynb([code("c", metadata={"n": NUMBERS}, execution_count=2.0, outputs=[RESULT])], metadata={"n": NUMBERS, "w": 1e21})),
        ("an integer beyond int64 in a cell's metadata", ipynb([code("a"), code("b", metadata={"a": 1, "big": HUGE}), md("c")])),
        ("an integer beyond int64 in the notebook metadata", ipynb([code("a")], metadata={"a": 1, "big": HUGE})),
        ("a heading cell and a code cell without outputs", ipynb([md("h", kind="heading", level=1), {"id": "c", "cell_type": "code", "source": "x", "metadata": {}}])),
        ("duplicate ids", ipynb([md("d", "a"), md("d", "a"), md("d", "b")])),
        ("duplicate ids, no nbformat_minor (nbformat does not repair them, get() does)",
         json.dumps({"cells": [md("d", "a"), md("d", "a"), md("d", "b"), md(5, "x"), md(5.0, "y")], "metadata": {}, "nbformat": 4})),
        ("duplicate ids, nbformat_minor 4", ipynb([md("d", "a"), md("d", "a"), md("d", "b")], nbformat_minor=4)),
        ("code cell execution_count 0, stream text list", ipynb([code("c", execution_count=0, outputs=[stream])])),
        ("CRLF line endings in source", ipynb([md("m", "a\r\nb")])),
        ("list-form text/plain in a markdown cell's outputs (nbformat joins code cells' only)",
         ipynb([md("m", outputs=[out_list, stream], execution_count=1)])),
        ("a list text/plain holding a number, an output without output_type",
         ipynb([code("a", outputs=[{"output_type": "display_data", "metadata": {}, "data": {"text/plain": ["a", 1]}},
                                   {"text": ["x", "y"]}, {"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["t"], "text": ["a", "b"]}])])),
        ("attachments null", ipynb([md("m", attachments=None)])),
        ("a cell without metadata", ipynb([{"id": "x", "cell_type": "code", "source": "x", "outputs": [], "execution_count": None}])),
        ("a cell without source", ipynb([code("a"), {"id": "x", "cell_type": "markdown", "metadata": {}}, md("z")])),
        ("a cell without cell_type", ipynb([code("a"), {"id": "x", "source": "s", "metadata": {}}, md("z")])),
        ("no nbformat", json.dumps({"cells": [md("m")], "metadata": {}})),
        ("nbformat_minor 4 with ids, nbformat_minor absent", ipynb([md("m")], nbformat_minor=4)),
        ("a stream without text, markdown attachments list", ipynb([code("a", outputs=[{"output_type": "stream", "name": "stdout"}]), md("m", attachments=[])])),
        ("integers at the edges of int64 and 2^64 in the notebook metadata",
         ipynb([code("a", metadata={"e": [2**63 - 1, 2**63 - 2, -(2**63), 2**53 - 1, -(2**53) - 1]})], metadata={"e": [2**64, 2**63 - 1, 2**63 + 1]})),
    ]
    return [dict(load_file(text), what=what) for what, text in files]


CLASSES = [
    ("1-attachments-raw-markdown", "empty, null and full attachments on markdown and raw cells", class1),
    ("2-attachments-code", "attachments on a code cell", class2),
    ("3-cell-type-in-place", "a cell's cell_type changed in place", class3),
    ("4-extra-keys", "keys outside nbformat in a cell map", class4),
    ("5-unknown-cell-type", "cell types outside code, markdown, raw", class5),
    ("6-missing-keys", "cell maps missing keys, partial maps from concurrent creation", class6),
    ("7-half-built", "a reload that panics mid-cell", class7),
    ("8-numbers", "whole numbers at and beyond 2^53, 1e21, negative zero", class8),
    ("9-from-file", "notebooks served from their files", class9),
]


SHAPE_NUMBERS = [0, -0.0, 1.5, 7.0, 2**53 - 1, 2**53, 2**53 + 1, 2**62, 2**63 - 1, -(2**63), 1e21, 1e16, 1e-05, 0.1, 3]
CELL_TYPES = ["code", "markdown", "raw", "code", "markdown", "heading", None, 3]
EXTRA = ["custom", "trusted", "collapsed", "execution_state", "level"]


def rnum(rng):
    return rng.choice(SHAPE_NUMBERS)


def rvalue(rng, depth=0):
    r = rng.random()
    if depth < 2 and r < 0.2:
        return [rvalue(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 2 and r < 0.35:
        return {rng.choice("abk"): rvalue(rng, depth + 1) for _ in range(rng.randint(0, 2))}
    if r < 0.7:
        return rnum(rng)
    return rng.choice([None, True, False, "", "v🎉", ["l1\n", "日本 🎉"]])


def rattachments(rng):
    return rng.choice([{}, None, [], {"a.png": PNG}, {"b.txt": {"text/plain": ["a\n", "b"]}}])


def routputs(rng):
    outs = []
    for _ in range(rng.randint(0, 2)):
        if rng.random() < 0.5:
            outs.append(Map({"output_type": "stream", "name": "stdout", "text": Text(random_text(rng))}))
        else:
            outs.append(Map({"output_type": "execute_result", "execution_count": rnum(rng), "metadata": {"n": rnum(rng)},
                             "data": {"text/plain": rng.choice(["42", ["line 1\n", "日本 🎉"]]), "application/json": {"n": rnum(rng)}}}))
    return outs


def random_cell(rng):
    """A cell map of a random shape: any cell type or none, keys left out or added."""
    c = {}
    ct = rng.choice(CELL_TYPES)
    if ct is not None:
        c["cell_type"] = ct
    if rng.random() < 0.93:
        c["id"] = "c%d" % rng.randrange(10**6)
    if rng.random() < 0.9:
        c["source"] = Text(random_text(rng)) if rng.random() < 0.85 else ["a\n", random_text(rng)]
    if rng.random() < 0.9:
        c["metadata"] = Map({"n": rnum(rng)} if rng.random() < 0.5 else {}) if rng.random() < 0.9 else rng.choice(["x", None])
    if ct == "code" and rng.random() < 0.9 or rng.random() < 0.15:
        c["outputs"] = Array(routputs(rng))
        c["execution_count"] = rng.choice([None, 0, 1, 2**62, -0.0, 1e21, 3.0])
    if rng.random() < 0.3:
        c["attachments"] = rattachments(rng)
    if rng.random() < 0.2:
        c[rng.choice(EXTRA)] = rvalue(rng)
    return Map(c)


def random_text(rng):
    return "".join(rng.choice(["x", "é", "日本", "🎉", " ", "\n", "a"]) for _ in range(rng.randint(1, 3)))


def shape_edit(c, rng):
    """One random edit of client c's notebook over issue 40's shapes, in one transaction."""
    cells = c.nb.ycells
    n = len(cells)
    op = rng.random()
    if op < 0.03 and n:
        # the server reloads a file whose cell metadata holds an integer beyond int64:
        # YNotebook.set panics in the middle of a cell and keeps what it wrote
        try:
            got = c.nb.get()
        except KeyError:
            return
        got["cells"] = [dict(x) for x in got["cells"] if isinstance(x.get("cell_type"), str) and "source" in x]
        if got["cells"]:
            k = rng.randrange(len(got["cells"]))
            cell = dict(got["cells"][k])
            md = cell.get("metadata")
            cell["metadata"] = dict(md if isinstance(md, dict) else {}, a=1, big=HUGE)
            cell["id"] = "reload%d" % rng.randrange(10**6)
            got["cells"].insert(k, cell)
            try:
                c.nb.set(got)
            except BaseException:
                pass
            return
    with c.doc.transaction():
        if n == 0 or op < 0.15:
            cells.insert(rng.randint(0, n), random_cell(rng))
            return
        if op < 0.2:
            cells.insert(rng.randint(0, n), Map())  # to be filled by others: a partial map
            return
        i = rng.randrange(n)
        cell = cells[i]
        if op < 0.27:
            del cells[i]
        elif op < 0.37:
            cell["cell_type"] = rng.choice(CELL_TYPES[:-2] + ["code", "raw"])
        elif op < 0.5:
            key = rng.choice(["source", "metadata", "outputs", "execution_count", "attachments", "id"] + EXTRA)
            if rng.random() < 0.3 and key in cell:
                del cell[key]
            elif key == "source":
                cell[key] = Text(random_text(rng))
            elif key == "metadata":
                cell[key] = Map({"n": rnum(rng), "v": rvalue(rng)})
            elif key == "outputs":
                cell[key] = Array(routputs(rng))
            elif key == "execution_count":
                cell[key] = rng.choice([None, 0, 5, 2**53 + 1, -0.0, 1e21, 2.5])
            elif key == "attachments":
                cell[key] = rattachments(rng)
            elif key == "id":
                cell[key] = rng.choice(["c%d" % rng.randrange(10**6), "dup", 5])
            else:
                cell[key] = rvalue(rng)
        elif op < 0.6:
            md = cell.get("metadata")
            if isinstance(md, Map):
                md[rng.choice(["n", "tags", "k"])] = rvalue(rng)
        elif op < 0.65:
            c.nb._ymeta["metadata"] = Map({"n": rnum(rng), "kernelspec": {"name": "python3", "display_name": "Py 🎉"}})
        else:
            src = cell.get("source")
            if isinstance(src, Text):
                src.insert(byte_offset(str(src), rng.randint(0, len(str(src)))), random_text(rng))
            elif src is None:
                cell["source"] = Text(random_text(rng))


def file_text(got, rng):
    """get() written as a file, with multi-line strings split into lists here and there
    (as nbformat's writer splits them), sometimes with a list nbformat does not join."""
    def split(v):
        if isinstance(v, str) and "\n" in v and rng.random() < 0.5:
            return v.splitlines(True)
        return v
    nb = copy.deepcopy(got)
    for cell in nb["cells"]:
        if "source" in cell:
            cell["source"] = split(cell["source"])
        for out in cell.get("outputs") or [] if isinstance(cell.get("outputs"), list) else []:
            if isinstance(out, dict):
                if isinstance(out.get("data"), dict):
                    for k in out["data"]:
                        out["data"][k] = split(out["data"][k])
                if "text" in out:
                    out["text"] = split(out["text"])
    if nb["cells"] and rng.random() < 0.2:
        md = nb["cells"][rng.randrange(len(nb["cells"]))].get("metadata")
        if isinstance(md, dict):
            md["big"] = HUGE
    return json.dumps(nb, ensure_ascii=False, indent=1)


def histories(seed):
    """One random history over issue 40's shapes: its rows and get(); every fifth, the
    file of its notebook too."""
    rng = random.Random(seed)
    clients = [Client(1000 * seed + i + 1) for i in range(rng.randint(2, 3))]
    rows = []

    def publish(c, ups):
        for u in ups:
            rows.append(u)
            for o in clients:
                if o is not c:
                    o.inbox.append(u)

    first = clients[0]
    cells = []
    for i in range(rng.randint(1, 4)):
        kind = rng.choice(["code", "markdown", "raw"])
        cell = {"id": "s%d" % i, "cell_type": kind, "source": random_text(rng), "metadata": {"n": rnum(rng)}}
        if kind == "code":
            cell.update(execution_count=rng.choice([None, 1]), outputs=[])
        elif rng.random() < 0.5:
            cell["attachments"] = rattachments(rng) or {}
        cells.append(cell)
    first.nb.set({"cells": cells, "metadata": {"n": rnum(rng)}, "nbformat": 4, "nbformat_minor": 5})
    publish(first, first.take())
    for c in clients[1:]:
        c.receive(rng)
    for _ in range(rng.randint(5, 30)):
        c = rng.choice(clients)
        if rng.random() < 0.4:
            c.receive(rng)
        shape_edit(c, rng)
        publish(c, c.take())
    while any(c.inbox for c in clients):
        for c in clients:
            c.receive(rng)
    ref = Doc()
    for u in rows:
        ref.apply_update(u)
    got, made = read_get(ref)
    out = [{"seed": seed, "rows": [base64.b64encode(u).decode() for u in rows], "get": got, "made_ids": made}]
    if got is not None and seed % 5 == 0:
        case = load_file(file_text(json.loads(got), rng))
        case["seed"] = seed
        out.append(case)
    return out


def table_cases(path):
    with open(path) as f:
        cases = json.load(f)
    out = []
    for c in cases:
        doc = Doc()
        for u in c["updates"]:
            doc.apply_update(base64.b64decode(u))
        got, made = read_get(doc)
        out.append({"name": c["name"], "get": got, "made_ids": made})
    print(json.dumps(out, ensure_ascii=False, indent=1))


def fixtures(out):
    os.makedirs(out, exist_ok=True)
    for name, note, make in CLASSES:
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({"name": name, "note": note, "cases": make()}, f, ensure_ascii=False, indent=1, sort_keys=True)
            f.write("\n")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fixtures").add_argument("--out", required=True)
    sub.add_parser("cases").add_argument("file")
    h = sub.add_parser("histories")
    h.add_argument("--seed", type=int, default=1)
    h.add_argument("--count", type=int, default=300)
    a = p.parse_args()
    if a.cmd == "fixtures":
        fixtures(a.out)
    elif a.cmd == "cases":
        table_cases(a.file)
    else:
        for seed in range(a.seed, a.seed + a.count):
            for line in histories(seed):
                print(json.dumps(line, ensure_ascii=False, sort_keys=True), flush=True)


if __name__ == "__main__":
    sys.exit(main())
