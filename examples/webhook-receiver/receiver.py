#!/usr/bin/env python3
"""A webhook receiver for jupyter-mcp-sidecar change events (Python standard library only).

It stands for the bus listener of a jupyter-mcp-server deployment that runs with
JUPYTER_MCP_WATCH_NOTEBOOKS=false: the sidecar tells it about every change of every
notebook, addressed by path; it keeps the table of which names its own sessions bound to
which path (with use_notebook), and turns each event into the notebook://{name} URIs
(plus cell and output URIs) that the server would publish on its own bus. Here it prints
them, one JSON line per event on stdout.

    python3 receiver.py [--host 127.0.0.1] [--port 8765] [--bind NAME=PATH ...] [--token T]

Endpoints:
    POST   /events            the sidecar's webhook publisher (one event per request)
    POST   /bindings          {"name": "work", "path": "dir/a.ipynb"}: a session bound a name
    DELETE /bindings/<name>   a session released it
    GET    /bindings          the table, {"path": ["name", ...]}

The first stdout line is {"listening": "http://HOST:PORT"}. Then, per event:
    {"event": {...the event...}, "publish": ["notebook://work", ...], "note": "..."}
See docs/EVENTS.md for the event schema and delivery guarantees.
"""

import argparse
import json
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCHEMA_VERSION = 1
# Characters Go's url.PathEscape leaves alone in a path segment, as the sidecar does.
_SEGMENT_SAFE = "-_.~!$&'()*+,;=:@"


def cell_uri(name, cell_id):
    return "notebook://%s/cells/%s" % (name, urllib.parse.quote(cell_id, safe=_SEGMENT_SAFE))


def changed_uris(name, changes):
    """The URIs under name that a change touches: the notebook first, then cells and outputs, sorted."""
    uris = set()
    for key in ("added", "removed", "moved"):
        for cell_id in changes.get(key, []):
            uris.add(cell_uri(name, cell_id))
    for cell_id, cell in changes.get("cells", {}).items():
        uris.add(cell_uri(name, cell_id))
        for index in cell.get("output_indexes", []):
            uris.add("%s/outputs/%d" % (cell_uri(name, cell_id), index))
    return ["notebook://" + name] + sorted(uris)


class Table:
    """path -> names bound by this server's sessions, and the last event number per path."""

    def __init__(self):
        self.lock = threading.Lock()
        self.names = {}  # path -> set of names
        self.seq = {}  # path -> last seq seen

    def bind(self, name, path):
        with self.lock:
            for names in self.names.values():
                names.discard(name)
            self.names.setdefault(path, set()).add(name)

    def unbind(self, name):
        with self.lock:
            for names in self.names.values():
                names.discard(name)

    def snapshot(self):
        with self.lock:
            return {p: sorted(n) for p, n in self.names.items() if n}

    def handle(self, event):
        """Returns (uris to publish, note) for one event."""
        if event.get("v") != SCHEMA_VERSION:
            return [], "ignored: schema version %r" % event.get("v")
        path, seq = event["path"], event["seq"]
        note = ""
        with self.lock:
            last = self.seq.get(path, 0)
            if event.get("part") and event["part"]["index"] > 0 and seq == last:
                pass  # a further part of the event just seen (pgnotify only)
            elif seq == 1 and last > 0:
                note = "sidecar restarted"
            elif seq <= last:
                return [], "duplicate of %s #%d (a retried delivery): ignored" % (path, seq)
            elif seq > last + 1 and last > 0:
                note = "missed %d event(s) of %s: treating the whole notebook as changed" % (seq - last - 1, path)
            self.seq[path] = seq
            renamed_from = event.get("renamed_from")
            if renamed_from:
                # The file was renamed: names bound to the old path follow it.
                moved = self.names.pop(renamed_from, set())
                self.names.setdefault(path, set()).update(moved)
                self.seq.pop(renamed_from, None)
            names = sorted(self.names.get(path, ()))
        uris = []
        for name in names:
            if renamed_from or note.startswith("missed") or event["changes"].get("incomplete"):
                uris.append("notebook://" + name)
            else:
                uris.extend(changed_uris(name, event["changes"]))
        return uris, note


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep the sidecar's connection open between events
    table = None
    token = None
    out_lock = threading.Lock()

    def log_message(self, fmt, *args):  # stderr: stdout is for events
        sys.stderr.write("receiver: " + (fmt % args) + "\n")

    def log_request(self, code="-", size="-"):  # only refusals are worth a line
        if isinstance(code, int) and code >= 400:
            super().log_request(code, size)

    def _reply(self, code, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"null")

    def _authorized(self):
        if self.token and self.headers.get("Authorization") != "Bearer " + self.token:
            self._reply(401, {"error": "unauthorized"})
            return False
        return True

    def do_POST(self):
        if not self._authorized():
            return
        try:
            body = self._body()
        except ValueError as e:
            self._reply(400, {"error": "not JSON: %s" % e})
            return
        if self.path == "/events":
            uris, note = self.table.handle(body)
            line = {"event": body, "publish": uris}
            if note:
                line["note"] = note
            with self.out_lock:
                sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
                sys.stdout.flush()
            self._reply(204)
        elif self.path == "/bindings":
            self.table.bind(body["name"], body["path"])
            self._reply(204)
        else:
            self._reply(404, {"error": "no such endpoint"})

    def do_DELETE(self):
        if not self._authorized():
            return
        if self.path.startswith("/bindings/"):
            self.table.unbind(urllib.parse.unquote(self.path[len("/bindings/"):]))
            self._reply(204)
        else:
            self._reply(404, {"error": "no such endpoint"})

    def do_GET(self):
        if self.path == "/bindings":
            self._reply(200, self.table.snapshot())
        else:
            self._reply(404, {"error": "no such endpoint"})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    ap.add_argument("--bind", action="append", default=[], metavar="NAME=PATH", help="a name bound at start")
    ap.add_argument("--token", help="require Authorization: Bearer TOKEN (the webhook's headers option)")
    args = ap.parse_args()
    Handler.table, Handler.token = Table(), args.token
    for b in args.bind:
        name, _, path = b.partition("=")
        Handler.table.bind(name, path)
    srv = ThreadingHTTPServer((args.host, args.port), Handler)
    host, port = srv.server_address[:2]
    sys.stdout.write(json.dumps({"listening": "http://%s:%d" % (host, port)}) + "\n")
    sys.stdout.flush()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()


if __name__ == "__main__":
    main()
