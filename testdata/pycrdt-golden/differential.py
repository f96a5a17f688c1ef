#!/usr/bin/env python3
"""The reference for the differential tests against pycrdt (yrs), the Jupyter server's engine.

Run with the pinned stack (testdata/jupyter/requirements.txt); writes JSON lines on stdout.

    python differential.py histories --seed 1 --count 300
        Concurrent notebook histories written by pycrdt: 2-4 jupyter_ydoc YNotebook clients
        edit at once (multi-byte text inserted and deleted at random offsets, cells
        inserted, moved as jupyter_ydoc clients move them (a copy inserted, the original
        deleted) and deleted, metadata, outputs, execution counts) and exchange their
        updates late, in random orders and groupings. One line per history:
        {"seed", "rows": [base64 update, ...] (the order a store receives them),
        "doc": to_py of the roots, "get": YNotebook.get(), "reid": the indexes of get()'s
        cells it gave a new id} read by a fresh pycrdt Doc
        that applied every row in that order, as the Jupyter server does, and
        "clients_diverged": how many of the writing clients read otherwise once they have
        every update (yrs's result depends on the order a document receives updates in:
        the clients' orders differ from the store's).

    python differential.py yjs-sessions FILE
        For ystore/yjs/testdata/sessions.json.gz (written by yjs clients, which cut
        surrogate pairs): {"seed", "checkpoints": [{"after", "json"}], "final",
        "shuffled", "shuffled_twice", "merged"} with pycrdt's to_py of the roots t, a and m
        after the first `after` updates, after all of them, after all in the session's
        shuffled order, after all in that order twice, and after its merged update.

    python differential.py corpus FILE
        For ystore/yjs/testdata/bench/notebook.bin.gz (varuint-length-prefixed updates,
        gzipped): {"cells", "meta"}, pycrdt's to_py after applying them in order.

    python differential.py orders < REQUESTS
        Each stdin line {"name", "updates": [base64 update, ...]}: {"name", "doc", "get",
        "reid"} as for histories, read by a fresh pycrdt Doc that applied them in that order.

    python differential.py notebook-sessions DIR
        For testdata/ysessions/fixtures (yjs and @jupyter/ydoc clients): {"name",
        "checkpoints": [{"after", "doc", "get", "reid", "yjs_same"}], "merged": {"doc",
        "get", "reid"}} with pycrdt's to_py of the roots cells, meta and state,
        YNotebook.get() and the indexes of the cells it gave a new id, after the first
        `after` updates and after the session's merged update, and whether the session's
        Yjs checkpoint holds the same texts.

    python differential.py outputs --count N [--at end|front|middle|deleted|freed]
        One cell whose outputs grow by one display_data output a row, N rows, each
        appended (as a loop that calls display() writes them), inserted at the front or
        in the middle; or appended, then deleted from the middle one a row down to 100
        (deleted); or N times an output of 1 MB appended as a plain value, a small one
        after it, and the large one deleted (freed); then a stream output whose text
        grows a row and one display output edited inside: {"rows": [base64 update, ...],
        "get"}.

Everything is seeded and client ids are fixed, so the output is the same run after run.
"""

import argparse
import base64
import glob
import gzip
import json
import os
import random
import sys
import uuid
import warnings

import jupyter_ydoc.ynotebook as ynotebook_module
from jupyter_ydoc import YNotebook
from pycrdt import Array, Doc, Map, Text, merge_updates

from gen import Counter, py  # gen.py beside this file: the fixtures from the real writer

WORDS = ["x", "é", "日本", "🎉", " ", "\n", "a", "👨‍👩‍👧", "e\u0301", "Ωμέγα", "𝔘𝔫", "print(", "🇫🇷", "ñ"]


def read_notebook(doc):
    """to_py of the notebook roots, YNotebook.get() (run on the same doc: it writes new
    ids back only for cells whose ids repeat) and the indexes of get()'s cells it gave a
    new id."""
    roots = {
        "cells": doc.get("cells", type=Array).to_py(),
        "meta": doc.get("meta", type=Map).to_py(),
        "state": doc.get("state", type=Map).to_py(),
    }
    stored = {c.get("id") for c in roots["cells"] or []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = YNotebook(doc).get()
    reid = [i for i, c in enumerate(got["cells"]) if c.get("id") is not None and c.get("id") not in stored]
    return py(roots), py(got), reid


def byte_offset(s, chars):
    """pycrdt's Text indexes are UTF-8 byte offsets: the offset of the first chars characters."""
    return len(s[:chars].encode())


class Client:
    """One pycrdt client: a Doc, its YNotebook and the updates it has not applied yet."""

    def __init__(self, client_id):
        self.doc = Doc(client_id=client_id)
        self.nb = YNotebook(self.doc)
        self.inbox = []
        self.made = []
        self.doc.observe(lambda e: self.made.append(bytes(e.update)))

    def take(self):
        out, self.made = self.made, []
        return out

    def receive(self, rng):
        """Applies some of the waiting updates, in a random order, some merged."""
        if not self.inbox:
            return
        k = rng.randint(1, len(self.inbox))
        rng.shuffle(self.inbox)
        batch, self.inbox = self.inbox[:k], self.inbox[k:]
        if len(batch) > 1 and rng.random() < 0.3:
            batch = [merge_updates(*batch)]
        for u in batch:
            self.doc.apply_update(u)
        self.take()  # remote updates are not this client's rows


def random_text(rng):
    return "".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def edit_outputs(outputs, rng):
    """One random edit of a cell's outputs: one deleted, edited inside, or inserted (a
    shared map with a text, or a plain value) anywhere."""
    m = len(outputs)
    r = rng.random()
    o = outputs[rng.randrange(m)] if m else None
    if m and r < 0.25:
        del outputs[rng.randrange(m)]
    elif isinstance(o, Map) and r < 0.45:
        t = o["text"]
        s = str(t)
        t.insert(byte_offset(s, rng.randint(0, len(s))), random_text(rng))
    elif isinstance(o, Map) and r < 0.55:
        o["name"] = rng.choice(["stdout", "stderr"])
    elif r < 0.7:
        outputs.insert(rng.randint(0, m), {"output_type": "stream", "name": "stdout", "text": random_text(rng)})
    else:
        outputs.insert(rng.randint(0, m), Map({"output_type": "stream", "name": "stdout", "text": Text(random_text(rng))}))


def edit(c, rng):
    """One random edit of c's notebook, in one transaction."""
    cells = c.nb.ycells
    n = len(cells)
    op = rng.random()
    with c.doc.transaction():
        if n == 0 or op < 0.08:
            kind = rng.choice(["code", "markdown", "raw"])
            cell = {"cell_type": kind, "source": random_text(rng), "metadata": {}, "id": str(uuid.UUID(int=rng.getrandbits(128), version=4))}
            if kind == "code":
                cell["execution_count"] = rng.choice([None, 0, 1, 7])
                cell["outputs"] = []
            cells.insert(rng.randint(0, n), c.nb.create_ycell(cell))
            return
        i = rng.randrange(n)
        cell = cells[i]
        if op < 0.13:
            del cells[i]
        elif op < 0.2:
            # jupyter_ydoc clients move a cell by inserting a copy and deleting the original
            copy = c.nb.create_ycell(cell.to_py())
            j = rng.randint(0, n - 1)
            del cells[i]
            cells.insert(j, copy)
        elif op < 0.27:
            cell["metadata"][rng.choice(["tags", "collapsed", "k"])] = rng.choice([True, ["t", "é"], 0, "v🎉"])
        elif op < 0.32 and cell.get("cell_type") == "code":
            cell["execution_count"] = rng.choice([None, 0, 3])
            outputs = cell.get("outputs")
            if outputs is not None:
                edit_outputs(outputs, rng)
        elif op < 0.35:
            c.nb._ymeta["metadata"] = Map({"kernelspec": {"name": "python3", "display_name": rng.choice(["Python 3", "Py 🎉"])}})
        else:
            src = cell["source"]
            s = str(src)
            chars = len(s)
            if chars and rng.random() < 0.35:
                a = rng.randrange(chars)
                b = min(chars, a + rng.randint(1, 4))
                start = byte_offset(s, a)
                del src[start:byte_offset(s, b)]
            else:
                src.insert(byte_offset(s, rng.randint(0, chars)), random_text(rng))


def history(seed):
    rng = random.Random(seed)
    k = rng.randint(2, 4)
    clients = [Client(1000 * seed + i + 1) for i in range(k)]
    rows = []

    def publish(c, ups):
        for u in ups:
            rows.append(u)
            for o in clients:
                if o is not c:
                    o.inbox.append(u)

    first = clients[0]
    first.nb.set({"cells": [{"cell_type": "code", "source": "import 🎉", "metadata": {}, "outputs": [], "execution_count": 0, "id": "c0"}],
                  "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}}, "nbformat": 4, "nbformat_minor": 5})
    publish(first, first.take())
    for c in clients[1:]:
        c.receive(rng)
    for _ in range(rng.randint(10, 60)):
        c = rng.choice(clients)
        if rng.random() < 0.4:
            c.receive(rng)
        edit(c, rng)
        publish(c, c.take())
    while any(c.inbox for c in clients):
        for c in clients:
            c.receive(rng)
    ref = Doc()
    for u in rows:
        ref.apply_update(u)
    doc, got, reid = read_notebook(ref)
    diverged = 0
    for c in clients:
        # A client whose remote updates arrived out of order may hold some as pending for
        # good (yrs retries pending updates only when their missing client's next update
        # arrives); the sync step a provider does on reconnection completes it.
        c.doc.apply_update(ref.get_update(c.doc.get_state()))
        if read_notebook(c.doc)[:2] != (doc, got):
            diverged += 1
    # Rows lost from the store (pycrdt-store drops a write after a 5 s lock wait): a fresh
    # document reads the others in order, then the lost ones arrive late, as when a
    # client syncs them again. yrs integrates a struct whose own client's earlier clocks
    # are missing when nothing it depends on is, holding the gap as a Skip.
    lossy = random.Random(seed * 7919 + 1)
    lost = [i for i in range(1, len(rows)) if lossy.random() < 0.08]
    kept = [u for i, u in enumerate(rows) if i not in lost]
    gapped = Doc()
    for u in kept:
        gapped.apply_update(u)
    g_sv = sorted(decode_state(gapped.get_state()).items())  # before YNotebook writes its own
    g_doc, g_get, g_reid = read_notebook(gapped)
    refilled = Doc()  # read only at the end: reading writes the reader's own updates
    for u in kept + [rows[i] for i in lost]:
        refilled.apply_update(u)
    f_doc, f_get, f_reid = read_notebook(refilled)
    return {"seed": seed, "rows": [base64.b64encode(u).decode() for u in rows], "doc": doc, "get": got, "reid": reid,
            "clients_diverged": diverged,
            "lost": lost, "gapped": {"doc": g_doc, "get": g_get, "reid": g_reid, "sv": g_sv},
            "refilled": {"doc": f_doc, "get": f_get, "reid": f_reid}}


def orders():
    """Each stdin line {"name", "updates": [base64, ...]}: what a fresh document reads
    after applying them in that order, one line out each: {"name", "doc", "get", "reid"}."""
    for line in sys.stdin:
        req = json.loads(line)
        doc = Doc()
        for u in req["updates"]:
            doc.apply_update(base64.b64decode(u))
        d, got, reid = read_notebook(doc)
        print(json.dumps({"name": req["name"], "doc": d, "get": got, "reid": reid}, ensure_ascii=False, sort_keys=True), flush=True)


def decode_state(b):
    """The state vector pycrdt encodes: {client: clock}."""
    n, i = read_varuint(b, 0)
    out = {}
    for _ in range(n):
        c, i = read_varuint(b, i)
        k, i = read_varuint(b, i)
        out[c] = k
    return out


def yjs_sessions(path):
    with gzip.open(path, "rt") as f:
        sessions = json.load(f)
    for s in sessions:
        ups = [base64.b64decode(u) for u in s["updates"]]
        cps = [{"after": cp["after"], "json": read_roots(ups[:cp["after"]])} for cp in s["checkpoints"]]
        out = {"seed": s["seed"], "checkpoints": cps, "final": read_roots(ups)}
        if s["shuffled"]["order"]:
            out["shuffled"] = read_roots([ups[i] for i in s["shuffled"]["order"]])
            # delivered twice: pending structs a second delivery may integrate
            out["shuffled_twice"] = read_roots([ups[i] for i in s["shuffled"]["order"] * 2])
        out["merged"] = read_roots([base64.b64decode(s["merged"])])
        print(json.dumps(out, ensure_ascii=False, sort_keys=True))


def read_roots(updates):
    """pycrdt's to_py of the roots t, a and m after applying updates to a fresh Doc."""
    doc = Doc()
    roots = {"t": doc.get("t", type=Text), "a": doc.get("a", type=Array), "m": doc.get("m", type=Map)}
    for u in updates:
        doc.apply_update(u)
    return {"t": str(roots["t"]), "a": py(roots["a"].to_py()), "m": py(roots["m"].to_py())}


def read_varuint(b, i):
    n, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return n, i


def corpus(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    doc = Doc()
    cells, meta = doc.get("cells", type=Array), doc.get("meta", type=Map)
    i = 0
    while i < len(raw):
        n, i = read_varuint(raw, i)
        doc.apply_update(raw[i:i + n])
        i += n
    print(json.dumps({"cells": py(cells.to_py()), "meta": py(meta.to_py())}, ensure_ascii=False, sort_keys=True))


def texts(cells):
    """The texts of cells (ids, sources, output texts), where yrs and Yjs read differently."""
    def joined(v):
        return "".join(v) if isinstance(v, list) else v
    return [(c.get("id"), joined(c.get("source")), [joined(o.get("text")) for o in c.get("outputs") or []]) for c in cells]


def notebook_sessions(d):
    for path in sorted(glob.glob(os.path.join(d, "*.json.gz"))):
        with gzip.open(path, "rt") as f:
            s = json.load(f)
        ups = [base64.b64decode(u["update"]) for u in s["updates"]]
        cps = []
        ynotebook_module.uuid4 = Counter(0xFFFF)
        for cp in s["checkpoints"]:
            doc = Doc()
            for u in ups[:cp["after"]]:
                doc.apply_update(u)
            roots, got, reid = read_notebook(doc)
            same = texts(roots["cells"] or []) == texts(cp["notebook"].get("cells", []))
            cps.append({"after": cp["after"], "doc": roots, "get": got, "reid": reid, "yjs_same": same})
        doc = Doc()
        doc.apply_update(base64.b64decode(s["merged"]))
        roots, got, reid = read_notebook(doc)
        merged = {"doc": roots, "get": got, "reid": reid}
        print(json.dumps({"name": os.path.basename(path), "checkpoints": cps, "merged": merged}, ensure_ascii=False, sort_keys=True))


def outputs(count, at):
    doc = Doc(client_id=7)
    rows = []
    doc.observe(lambda e: rows.append(base64.b64encode(e.update).decode()))
    nb = YNotebook(doc)
    nb.set({"cells": [{"cell_type": "code", "id": "c0", "source": "for i in range(N): display(i)", "metadata": {},
                       "outputs": [], "execution_count": 1}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    outs = nb.ycells[0]["outputs"]
    for i in range(count if at == "freed" else 0):
        outs.append({"output_type": "display_data", "data": {"text/plain": str(i) * (1 << 20)}, "metadata": {}})
        outs.append({"output_type": "stream", "name": "stdout", "text": f"{i}\n"})
        del outs[len(outs) - 2]
    for i in range(0 if at == "freed" else count):
        where = {"front": 0, "middle": len(outs) // 2}.get(at, len(outs))
        outs.insert(where, Map({"output_type": "display_data", "data": {"text/plain": f"{i}"}, "metadata": {}}))
    if at == "deleted":
        while len(outs) > 100:
            del outs[len(outs) // 2]
    outs.append(Map({"output_type": "stream", "name": "stdout", "text": Text("")}))
    text = outs[len(outs) - 1]["text"]
    for i in range(20):
        text.insert(len(str(text)), f"line {i}\n")
    outs[len(outs) // 2]["data"] = {"text/plain": "updated"}
    print(json.dumps({"rows": rows, "get": nb.get()}, ensure_ascii=False, sort_keys=True))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("histories")
    h.add_argument("--seed", type=int, default=1)
    h.add_argument("--count", type=int, default=300)
    sub.add_parser("yjs-sessions").add_argument("file")
    sub.add_parser("corpus").add_argument("file")
    sub.add_parser("notebook-sessions").add_argument("dir")
    sub.add_parser("orders")
    o = sub.add_parser("outputs")
    o.add_argument("--count", type=int, default=3000)
    o.add_argument("--at", choices=["end", "front", "middle", "deleted", "freed"], default="end")
    a = p.parse_args()
    if a.cmd == "histories":
        for seed in range(a.seed, a.seed + a.count):
            print(json.dumps(history(seed), ensure_ascii=False, sort_keys=True), flush=True)
    elif a.cmd == "yjs-sessions":
        yjs_sessions(a.file)
    elif a.cmd == "corpus":
        corpus(a.file)
    elif a.cmd == "orders":
        orders()
    elif a.cmd == "outputs":
        outputs(a.count, a.at)
    else:
        notebook_sessions(a.dir)


if __name__ == "__main__":
    sys.exit(main())
