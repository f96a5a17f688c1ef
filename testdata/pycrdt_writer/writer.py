#!/usr/bin/env python3
"""A Y-store writer that behaves like pycrdt-store's SQLiteYStore (stdlib only).

Reads one JSON command per line on stdin and answers one JSON line per command on
stdout. See README.md for the commands. Like pycrdt-store (through sqlite-anyio), it
uses sqlite3's defaults (rollback journal in DELETE mode, 5 s busy timeout, deferred
transactions), commits one transaction per stored update, and never raises on a write
error: the error is reported in the reply, where pycrdt-store would log and drop it.
"""

import base64
import json
import os
import sqlite3
import sys
import time

VERSION = 2


def new_path(path):
    """Return the name pycrdt-store moves a mismatched store to: name(1).ext, name(2).ext…"""
    stem, ext = os.path.splitext(path)
    i = 1
    while os.path.exists(f"{stem}({i}){ext}"):
        i += 1
    return f"{stem}({i}){ext}"


class Store:
    def __init__(self, path):
        self.path = path
        self.db = None

    def open(self):
        """Open the store, creating the schema as pycrdt-store's _init_db does."""
        create = not os.path.exists(self.path)
        self.db = sqlite3.connect(self.path)
        if create:
            cur = self.db.cursor()
            cur.execute("PRAGMA auto_vacuum = FULL")
            cur.execute("VACUUM")
            cur.execute(
                "CREATE TABLE yupdates (path TEXT NOT NULL, yupdate BLOB, "
                "metadata BLOB, timestamp REAL NOT NULL)"
            )
            cur.execute("CREATE INDEX idx_yupdates_path_timestamp ON yupdates (path, timestamp)")
            cur.execute(
                "CREATE TABLE ycheckpoints (path TEXT NOT NULL, checkpoint BLOB NOT NULL, "
                "timestamp REAL NOT NULL, PRIMARY KEY(path))"
            )
            cur.execute(f"PRAGMA user_version = {VERSION}")
            self.db.commit()

    def close(self):
        if self.db is not None:
            self.db.close()
            self.db = None

    def transaction(self, fn):
        """Run fn(cursor) in one transaction; roll back and report on error."""
        if self.db is None:
            self.open()
        try:
            cur = self.db.cursor()
            result = fn(cur) or {}
            self.db.commit()
            result["committed"] = time.time()
            return result
        except sqlite3.Error as exc:
            try:
                self.db.rollback()
            except sqlite3.Error:
                pass
            return {"ok": False, "error": str(exc)}

    def insert(self, cur, room, update, metadata, ts):
        cur.execute("INSERT INTO yupdates VALUES (?, ?, ?, ?)", (room, update, metadata, ts))
        return cur.lastrowid

    def write(self, room, update):
        def fn(cur):
            now = time.time()
            return {"rowid": self.insert(cur, room, update, b"", now), "ts": now}

        return self.transaction(fn)

    def checkpoint(self, room, state, update):
        """INSERT OR REPLACE the room's checkpoint, then store update, in one transaction."""

        def fn(cur):
            now = time.time()
            cur.execute(
                "INSERT OR REPLACE INTO ycheckpoints (path, checkpoint, timestamp) VALUES (?, ?, ?)",
                (room, state, now),
            )
            out = {"ts": now}
            if update is not None:
                out["rowid"] = self.insert(cur, room, update, b"", now)
            return out

        return self.transaction(fn)

    def squash(self, room, merged, cutoff, update):
        """Replace the room's rows up to cutoff by merged (stamped cutoff), then store update."""

        def fn(cur):
            cur.execute("DELETE FROM yupdates WHERE path = ? AND timestamp <= ?", (room, cutoff))
            out = {"deleted": cur.rowcount, "merged_rowid": self.insert(cur, room, merged, b"", cutoff)}
            if update is not None:
                now = time.time()
                out["rowid"] = self.insert(cur, room, update, b"", now)
                out["ts"] = now
            return out

        return self.transaction(fn)

    def cleanup(self, room, merged):
        """Delete every checkpoint, then replace the room's rows by one merged row."""
        first = self.transaction(lambda cur: cur.execute("DELETE FROM ycheckpoints") and None)
        if first.get("ok") is False:
            return first

        def fn(cur):
            cur.execute("SELECT MAX(timestamp) FROM yupdates WHERE path = ?", (room,))
            latest = cur.fetchone()[0]
            if latest is None:
                return {"deleted": 0}
            cur.execute("DELETE FROM yupdates WHERE path = ?", (room,))
            deleted = cur.rowcount
            return {"deleted": deleted, "merged_rowid": self.insert(cur, room, merged, None, latest)}

        return self.transaction(fn)

    def rename(self):
        """Move the file aside as on a schema version mismatch and create a fresh one."""
        self.close()
        moved = new_path(self.path)
        os.rename(self.path, moved)
        self.open()
        return {"moved_to": moved}

    def delete(self):
        self.close()
        for suffix in ("", "-journal"):
            try:
                os.remove(self.path + suffix)
            except FileNotFoundError:
                pass
        return {}

    def rooms(self, prefix, first, n, update):
        """Store update in rooms prefix+first … prefix+(first+n-1) (zero-padded), one row
        each, in one transaction (executemany), as the red team's manyrooms.py does."""

        def fn(cur):
            now = time.time()
            cur.executemany(
                "INSERT INTO yupdates VALUES (?, ?, ?, ?)",
                (("%s%09d" % (prefix, i), update, b"", now) for i in range(first, first + n)),
            )
            return {"ts": now}

        return self.transaction(fn)

    def flood(self, room, updates, interval):
        rows, errors = [], []
        for update in updates:
            r = self.write(room, update)
            if r.get("ok") is False:
                errors.append(r["error"])
            else:
                rows.append([r["rowid"], r["ts"], r["committed"]])
            if interval:
                time.sleep(interval)
        return {"rows": rows, "errors": errors}


def b64(cmd, key):
    value = cmd.get(key)
    return None if value is None else base64.b64decode(value)


def handle(store, cmd):
    op = cmd["op"]
    if op == "write":
        return store.write(cmd["room"], b64(cmd, "update"))
    if op == "checkpoint":
        return store.checkpoint(cmd["room"], b64(cmd, "state"), b64(cmd, "update"))
    if op == "squash":
        return store.squash(cmd["room"], b64(cmd, "merged"), cmd["cutoff"], b64(cmd, "update"))
    if op == "cleanup":
        return store.cleanup(cmd["room"], b64(cmd, "merged"))
    if op == "rename":
        return store.rename()
    if op == "delete":
        return store.delete()
    if op == "open":
        store.close()
        store.open()
        return {}
    if op == "rooms":
        return store.rooms(cmd["prefix"], cmd["first"], cmd["n"], b64(cmd, "update"))
    if op == "flood":
        updates = [base64.b64decode(u) for u in cmd["updates"]]
        return store.flood(cmd["room"], updates, cmd.get("interval", 0))
    raise ValueError(f"unknown op {op!r}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: writer.py STORE.db")
    store = Store(sys.argv[1])
    store.open()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = handle(store, json.loads(line))
        except (KeyError, ValueError, OSError) as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        reply.setdefault("ok", True)
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    store.close()


if __name__ == "__main__":
    main()
