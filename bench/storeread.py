"""storeread.py: the pycrdt counterpart of TestInspectMemory (bench/inspect_test.go): one
pycrdt Doc per room of a pycrdt-store SQLite file (what jupyter-collaboration holds per
room), each loaded from its rows in load order (path, timestamp), read through a cursor
so that no room's rows are held at once, all held at the end. Prints one JSON line:
rooms, rows and the process's peak RSS.

    python bench/storeread.py STORE.db
"""

import json
import resource
import sqlite3
import sys

import pycrdt

db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
docs, rows = {}, 0
for path, update in db.execute("SELECT path, yupdate FROM yupdates ORDER BY path, timestamp, rowid"):
    doc = docs.get(path)
    if doc is None:
        doc = docs[path] = pycrdt.Doc()
    doc.apply_update(update)
    rows += 1
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"rooms": len(docs), "rows": rows, "maxrss": peak, "pycrdt_version": pycrdt.__version__}))
