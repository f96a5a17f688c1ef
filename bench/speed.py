"""speed.py: times pycrdt (yrs, the Jupyter server's engine) on the workloads of
bench/ratios.sh, each update applied in a call of its own as the server applies every
update it receives (Python's cost per call included), then each document's content read
(the roots cells, meta and state: an engine that decodes values only when they are read
pays for them), and prints JSON lines like bench/notebook.mjs's: CPU time of the process
(time.process_time_ns), the fastest of REPS repetitions, a fresh document (or 20) each
time.

    python bench/speed.py DIR [REPS]
        DIR/history/updates.bin  one notebook's history, into one document  (workload "history")
        DIR/W/room-*.bin         many notebooks, a document each, held at once (workload W: the
                                 20 rooms "corpus", the recorded sessions "sessions" and
                                 "sessions-ywasm", bench/sessions.mjs)
"""

import gc
import glob
import json
import os
import sys
import time

import pycrdt

from frames import frames



def read(doc):
    """Reads what a notebook's document holds, as every engine of bench/ratios.sh does at the
    end of its timed work: the JSON of the roots cells, meta and state, which yrs writes
    (str; to_py, which builds the same values in Python, costs about ten times more)."""
    str(doc.get("cells", type=pycrdt.Array))
    str(doc.get("meta", type=pycrdt.Map))
    str(doc.get("state", type=pycrdt.Map))


def fastest(rooms, reps):
    """The least CPU time, in ns, of reps runs applying each room's updates to a new doc and
    reading its content."""
    best = None
    for _ in range(reps):
        docs = [pycrdt.Doc() for _ in rooms]
        gc.collect()
        t0 = time.process_time_ns()
        for doc, updates in zip(docs, rooms):
            apply = doc.apply_update
            for u in updates:
                apply(u)
            read(doc)
        t = time.process_time_ns() - t0
        best = t if best is None else min(best, t)
        del docs
    return best


def main():
    root, reps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    workloads = []
    history = os.path.join(root, "history", "updates.bin")
    if os.path.exists(history):
        workloads.append(("history", [frames(history)]))
    for name in ("corpus", "sessions", "sessions-ywasm"):
        rooms = sorted(glob.glob(os.path.join(root, name, "room-*.bin")))
        if rooms:
            workloads.append((name, [frames(p) for p in rooms]))
    for name, docs in workloads:
        total = sum(len(d) for d in docs)
        ns = fastest(docs, reps)
        print(json.dumps({"engine": f"pycrdt@{pycrdt.__version__}", "workload": name, "updates": total,
                          "cpuMs": ns / 1e6, "nsPerUpdate": ns / total}))


main()
