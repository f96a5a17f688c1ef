"""memory.py: the memory one pycrdt document (what jupyter-collaboration holds per room)
takes once loaded from the first N updates of the corpus's history, the counterpart of
TestMemoryHistory (bench/memory_test.go). pycrdt allocates in Rust, out of Python's
reach, so the measure is the process's resident set before and after (VmRSS). One JSON
line per prefix; run each prefix in a fresh process for a clean baseline:

    python bench/memory.py CORPUS_DIR N
"""

import json
import sys

import pycrdt

from frames import frames


def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0



updates = frames(sys.argv[1] + "/updates.bin")[: int(sys.argv[2])]
before = rss()
doc = pycrdt.Doc()
for u in updates:
    doc.apply_update(u)
print(json.dumps({"updates": len(updates), "pycrdt": rss() - before, "pycrdt_version": pycrdt.__version__}))
