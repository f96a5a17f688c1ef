#!/usr/bin/env python3
"""Clients of a real Jupyter server with jupyter-collaboration, driven by the Go tests.

Usage: client.py --url http://127.0.0.1:PORT --token TOKEN

Reads one JSON command per line on stdin and answers one JSON line per command on stdout:
{"ok": true, ...} or {"ok": false, "error": "..."}. Every command names the notebook by
its API path ("path", relative to the server's root) and, when several people edit at
once, the client ("client", default "a"): each (client, path) is one YNotebook joined to
the room over the collaboration websocket exactly as JupyterLab joins it. See README.md
for the commands. Only the standard library and the pinned packages of requirements.txt.
"""

import argparse
import base64
import json
import sqlite3
import sys
import time
import traceback
import uuid
from datetime import datetime, timezone
from urllib.parse import quote

import anyio
import httpx
from httpx_ws import aconnect_ws
from jupyter_ydoc import YNotebook
from pycrdt import Doc, Map, Text
from pycrdt import Provider
from pycrdt.websocket.websocket import HttpxWebsocket

TIMEOUT = 30  # seconds any one wait on the server may take
MAX_ARRIVALS = 1000  # transaction times kept per client and notebook (arrivals)


def decode_state_vector(sv):
    """Decode a Yjs state vector (varuint count, then client/clock varuint pairs)."""
    pos = 0

    def varuint():
        nonlocal pos
        n, shift = 0, 0
        while True:
            b = sv[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return n

    out = {}
    for _ in range(varuint()):
        client = varuint()
        out[str(client)] = varuint()
    return out


def view(ydoc):
    """The notebook as the server saves it: YNotebook.get() of a copy of ydoc.

    get() re-ids duplicate cells in the document it reads, so it reads a copy: asking
    the oracle must not edit the room.
    """
    copy = Doc()
    copy.apply_update(ydoc.get_update())
    return YNotebook(copy).get()


class Conn:
    """One client's YNotebook joined to one notebook's room."""

    def __init__(self, app, path):
        self.app, self.path = app, path
        self.nb = YNotebook()
        self.stop = None
        self.closed = None
        # When each transaction reached this document (time.time()): for a client that
        # does not edit, when the server's broadcast of somebody's update arrived.
        self.arrivals = []
        self.observer = self.nb.ydoc.observe(self.arrived)

    def arrived(self, _event):
        if len(self.arrivals) < MAX_ARRIVALS:
            self.arrivals.append(time.time())

    async def connect(self):
        r = await self.app.http.put(
            "/api/collaboration/session/" + quote(self.path),
            json={"format": "json", "type": "notebook"},
        )
        r.raise_for_status()
        session = r.json()
        room = "json:notebook:" + session["fileId"]
        url = f"{self.app.ws}/api/collaboration/room/{room}?sessionId={session['sessionId']}"
        ready, self.stop, self.closed = anyio.Event(), anyio.Event(), anyio.Event()
        failure = []

        async def run():
            try:
                async with aconnect_ws(url, self.app.http) as ws:
                    async with Provider(self.nb.ydoc, HttpxWebsocket(ws, room)) as p:
                        await p.synced.wait()
                        ready.set()
                        await self.stop.wait()
            except Exception as exc:  # reported to the command waiting on ready
                failure.append(repr(exc))
            finally:
                ready.set()
                self.closed.set()

        self.app.tg.start_soon(run)
        with anyio.fail_after(TIMEOUT):
            await ready.wait()
        if failure:
            raise RuntimeError("join %s: %s" % (self.path, failure[0]))
        return {"file_id": session["fileId"], "room": room}

    async def disconnect(self):
        if self.stop is not None:
            self.stop.set()
            with anyio.fail_after(TIMEOUT):
                await self.closed.wait()
            self.stop = None


class App:
    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.ws = "ws" + self.url[len("http"):]
        self.http = httpx.AsyncClient(
            base_url=self.url, headers={"Authorization": "token " + token}, timeout=TIMEOUT
        )
        self.conns = {}
        self.kernel_id = None
        self.tg = None

    def conn(self, cmd):
        key = (cmd.get("client", "a"), cmd["path"])
        if key not in self.conns:
            raise KeyError("client %s has not joined %s" % key)
        return self.conns[key]

    # Rooms.

    async def op_join(self, cmd):
        """Join the room (first time), or rejoin it with the document as it was left."""
        key = (cmd.get("client", "a"), cmd["path"])
        c = self.conns.get(key) or Conn(self, cmd["path"])
        self.conns[key] = c
        return await c.connect()

    async def op_leave(self, cmd):
        """Disconnect, keeping the document: edits made now are offline until rejoin."""
        await self.conn(cmd).disconnect()
        return {}

    async def op_forget(self, cmd):
        """Disconnect and drop the document: a later join starts from an empty one."""
        c = self.conn(cmd)
        await c.disconnect()
        del self.conns[(cmd.get("client", "a"), cmd["path"])]
        return {}

    async def op_get(self, cmd):
        """The oracle: the notebook as YNotebook.get() sees this client's document."""
        return {"nb": view(self.conn(cmd).nb.ydoc)}

    async def op_arrivals(self, cmd):
        """When this client's document took each transaction since the last call, and clears."""
        c = self.conn(cmd)
        times, c.arrivals = c.arrivals, []
        return {"times": times}

    async def op_state(self, cmd):
        """The document's state vector ({client: clock}) and its full update (base64)."""
        ydoc = self.conn(cmd).nb.ydoc
        return {
            "sv": decode_state_vector(ydoc.get_state()),
            "update": base64.b64encode(ydoc.get_update()).decode(),
        }

    # Edits, as JupyterLab makes them.

    async def op_type(self, cmd):
        """Insert text into a cell's source at "at" (default: its end), in "chunk"-sized
        updates (default: all at once)."""
        src = self.conn(cmd).nb.ycells[cmd["index"]]["source"]
        text, at = cmd["text"], cmd.get("at", len(src))
        chunk = cmd.get("chunk") or len(text)
        for i in range(0, len(text), chunk):
            src.insert(at + i, text[i:i + chunk])
            await anyio.sleep(0)  # let the provider send each update on its own
        return {}

    async def op_set_source(self, cmd):
        nb = self.conn(cmd).nb
        nb.set_cell(cmd["index"], source=cmd["source"])
        return {}

    async def op_insert_cell(self, cmd):
        """Insert a cell as JupyterLab creates one: a code cell has an execution count
        (null) and outputs."""
        nb = self.conn(cmd).nb
        cell = dict(cmd["cell"])
        if cell["cell_type"] == "code":
            cell.setdefault("execution_count", None)
            cell.setdefault("outputs", [])
        nb.ycells.insert(cmd["index"], nb.create_ycell(cell))
        return {}

    async def op_delete_cell(self, cmd):
        del self.conn(cmd).nb.ycells[cmd["index"]]
        return {}

    async def op_move_cell(self, cmd):
        """Move a cell as @jupyter/ydoc does: delete it and insert a copy (same id)."""
        nb = self.conn(cmd).nb
        cell = nb.get_cell(cmd["from"])
        with nb.ydoc.transaction():
            del nb.ycells[cmd["from"]]
            nb.ycells.insert(cmd["to"], nb.create_ycell(cell))
        return {}

    async def op_set_metadata(self, cmd):
        """Set a key of the notebook's metadata, or of cell "index"'s."""
        nb = self.conn(cmd).nb
        if "index" in cmd:
            nb.ycells[cmd["index"]]["metadata"][cmd["key"]] = cmd["value"]
        else:
            nb._ymeta["metadata"][cmd["key"]] = cmd["value"]
        return {}

    async def op_set_outputs(self, cmd):
        """Write outputs as a kernel's messages arrive: clear, then append one by one."""
        ycell = self.conn(cmd).nb.ycells[cmd["index"]]
        ycell["outputs"].clear()
        ycell["execution_count"] = None
        for out in cmd["outputs"]:
            append_output(ycell, out)
        ycell["execution_count"] = cmd.get("execution_count")
        return {}

    # A real kernel.

    async def kernel(self):
        if self.kernel_id is None:
            r = await self.http.post("/api/kernels", json={"name": "python3"})
            r.raise_for_status()
            self.kernel_id = r.json()["id"]
        return self.kernel_id

    async def op_execute(self, cmd):
        """Run cell "index" on a real ipykernel through the server's kernels API and write
        its outputs into the cell as JupyterLab does, each message as it arrives."""
        ycell = self.conn(cmd).nb.ycells[cmd["index"]]
        code = str(ycell["source"])
        kid = await self.kernel()
        session = uuid.uuid4().hex
        msg_id = uuid.uuid4().hex
        request = {
            "header": {
                "msg_id": msg_id, "username": "e2e", "session": session,
                "msg_type": "execute_request", "version": "5.3",
                "date": datetime.now(timezone.utc).isoformat(),
            },
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {
                "code": code, "silent": False, "store_history": True,
                "user_expressions": {}, "allow_stdin": False, "stop_on_error": True,
            },
        }
        url = f"{self.ws}/api/kernels/{kid}/channels?session_id={session}"
        idle = replied = False
        count = None
        with anyio.fail_after(cmd.get("timeout", 60)):
            async with aconnect_ws(url, self.http) as ws:
                await ws.send_text(json.dumps(request))
                ycell["outputs"].clear()
                ycell["execution_count"] = None
                ycell["execution_state"] = "running"
                while not (idle and replied):
                    msg = json.loads(await ws.receive_text())
                    if msg.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    kind, content = msg["msg_type"], msg["content"]
                    if msg["channel"] == "shell" and kind == "execute_reply":
                        replied, count = True, content.get("execution_count")
                    elif kind == "status" and content.get("execution_state") == "idle":
                        idle = True
                    elif kind == "stream":
                        append_output(ycell, {"output_type": "stream", "name": content["name"],
                                              "text": content["text"]})
                    elif kind in ("execute_result", "display_data"):
                        out = {"output_type": kind, "data": content["data"],
                               "metadata": content.get("metadata", {})}
                        if kind == "execute_result":
                            out["execution_count"] = content["execution_count"]
                        append_output(ycell, out)
                    elif kind == "error":
                        append_output(ycell, {"output_type": "error", "ename": content["ename"],
                                              "evalue": content["evalue"],
                                              "traceback": content["traceback"]})
        ycell["execution_count"] = count
        ycell["execution_state"] = "idle"
        return {"execution_count": count}

    # Load.

    async def op_load(self, cmd):
        """Type one character every 1/rate s, round robin over paths (all joined by this
        client), at the end of each notebook's first cell, for "seconds"."""
        conns = [self.conn({"client": cmd.get("client", "a"), "path": p}) for p in cmd["paths"]]
        period = 1.0 / cmd["rate"]
        start = time.monotonic()
        n = late = 0
        while time.monotonic() - start < cmd["seconds"]:
            src = conns[n % len(conns)].nb.ycells[0]["source"]
            src.insert(len(src), "abcdefghij"[n % 10])
            n += 1
            wait = start + n * period - time.monotonic()
            if wait > 0:
                await anyio.sleep(wait)  # stimulus pacing: the load's rate
            else:
                late += 1
                await anyio.sleep(0)
        return {"edits": n, "late": late}

    # The store, read as pycrdt reads it.

    async def op_store(self, cmd):
        """Merge every row of room "room" in the SQLite store "db" (read-only) into one
        pycrdt document: its state vector and YNotebook view, and the rows pycrdt refused."""
        db = sqlite3.connect("file:%s?mode=ro" % quote(cmd["db"]), uri=True, timeout=10)
        try:
            rows = db.execute(
                "SELECT yupdate FROM yupdates WHERE path = ? ORDER BY timestamp, rowid",
                (cmd["room"],),
            ).fetchall()
        finally:
            db.close()
        ydoc = Doc()
        errors = []
        for i, (u,) in enumerate(rows):
            try:
                ydoc.apply_update(u)
            except Exception as exc:  # a garbled store: report, as pycrdt-store would fail
                errors.append("row %d: %s" % (i, exc))
        return {"rows": len(rows), "errors": errors, "sv": decode_state_vector(ydoc.get_state()),
                "nb": view(ydoc)}

    async def op_close(self, cmd):
        for c in list(self.conns.values()):
            await c.disconnect()
        self.conns.clear()
        if self.kernel_id is not None:
            await self.http.delete("/api/kernels/" + self.kernel_id)
            self.kernel_id = None
        return {}


def append_output(ycell, out):
    """Append one output to a cell the way JupyterLab's output model does: a stream
    following a stream of the same name extends its text."""
    outputs = ycell["outputs"]
    if out["output_type"] == "stream" and len(outputs) > 0:
        last = outputs[len(outputs) - 1]
        if last.get("output_type") == "stream" and last.get("name") == out["name"]:
            last["text"].insert(len(last["text"]), out["text"])
            return
    out = dict(out)
    if out["output_type"] == "stream":
        out["text"] = Text(out["text"])
    outputs.append(Map(out))


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", required=True)
    args = ap.parse_args()
    app = App(args.url, args.token)
    async with anyio.create_task_group() as tg:
        app.tg = tg
        print(json.dumps({"ok": True, "ready": True}), flush=True)
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not line:
                break
            if not line.strip():
                continue
            try:
                cmd = json.loads(line)
                reply = await getattr(app, "op_" + cmd["op"])(cmd)
                reply["ok"] = True
            except Exception as exc:
                reply = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc),
                         "trace": traceback.format_exc()}
            print(json.dumps(reply), flush=True)
        await app.op_close({})
        await app.http.aclose()
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main)
