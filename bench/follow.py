"""Shapes of live rows that grow one cell, written and applied by pycrdt (the Jupyter
server's engine) beside bench/follow_test.go (TestFollowShapes).

    python follow.py write DIR N    # DIR/{outputs,prepended,identical,stream,source}.bin, N rows each
    python follow.py time FILES...  # one JSON line per file: {"file", "updates", "seconds"}

outputs: a cell's outputs list grows by one display_data output a row (a loop calling
display()); prepended: the same, each inserted at the front (crafted); identical: the
same output each time, inserted at the front (crafted); stream: a stream output's text grows by one printed line a row; source: N
keystrokes at the end of a cell whose source holds 1 MB. Each row is one transaction of
a jupyter_ydoc YNotebook, as the server writes it. Frames as in frames.py. "time" applies
each file's updates one at a time to a fresh Doc, then reads the notebook once
(YNotebook.get()).
"""

import struct
import sys
import time

from jupyter_ydoc import YNotebook
from pycrdt import Doc, Map, Text

from frames import frames


def notebook(rows, outputs):
    doc = Doc(client_id=11)
    doc.observe(lambda e: rows.append(e.update))
    nb = YNotebook(doc)
    nb.set({"cells": [{"cell_type": "code", "id": "c0", "source": "run()", "metadata": {}, "outputs": outputs,
                       "execution_count": 1}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    return nb


def write(d, n):
    shapes = {}
    rows = []
    outs = notebook(rows, []).ycells[0]["outputs"]
    for i in range(n):
        outs.append(Map({"output_type": "display_data", "data": {"text/plain": f"{i}: " + "o" * 40}, "metadata": {}}))
    shapes["outputs"] = rows
    rows = []
    outs = notebook(rows, []).ycells[0]["outputs"]
    for i in range(n):
        outs.insert(0, Map({"output_type": "display_data", "data": {"text/plain": f"{i}: " + "o" * 40}, "metadata": {}}))
    shapes["prepended"] = rows
    rows = []
    outs = notebook(rows, []).ycells[0]["outputs"]
    for i in range(n):
        outs.insert(0, Map({"output_type": "display_data", "data": {"text/plain": "o" * 40}, "metadata": {}}))
    shapes["identical"] = rows
    rows = []
    outs = notebook(rows, []).ycells[0]["outputs"]
    outs.append(Map({"output_type": "stream", "name": "stdout", "text": Text("")}))
    text = outs[0]["text"]
    for i in range(n):
        text.insert(len(str(text)), f"epoch {i}: loss 0.{i:04d}\n")
    shapes["stream"] = rows
    rows = []
    cell = notebook(rows, []).ycells[0]
    src = cell["source"]
    src.insert(len(str(src)), ("x = 1  # " + "s" * 70 + "\n") * 12_800)  # 1 MB
    for i in range(n):
        src.insert(len(str(src)), "y")
    shapes["source"] = rows
    for name, rows in shapes.items():
        with open(f"{d}/{name}.bin", "wb") as f:
            for u in rows:
                f.write(struct.pack("<I", len(u)) + u)


def timed(paths):
    for path in paths:
        updates = frames(path)
        start = time.perf_counter()
        doc = Doc()
        for u in updates:
            doc.apply_update(u)
        YNotebook(doc).get()
        print(f'{{"file": "{path}", "updates": {len(updates)}, "seconds": {time.perf_counter() - start}}}', flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
    else:
        timed(sys.argv[2:])
