"""Notebooks of N cells and one edit of each kind, as the Jupyter server's jupyter_ydoc
writes them, for the changes benchmark (sidecar/transport/changesbench_test.go).

Usage: python gen.py KEYS N...  (one JSON line per N on stdout)
  {"cells": N, "initial": B64, "output": [B64...], "keys": [[B64...]...]}
initial is the update of YNotebook.set() of a notebook of N code cells (a 20-line
source and a 50-line stream output each); output is the updates of a stream output
appended to the middle cell; keys are KEYS keystrokes, each in a cell chosen at random
(seeded), each the updates it makes.
"""

import base64
import json
import random
import sys

from jupyter_ydoc import YNotebook
from pycrdt import Map, Text


def notebook(n):
    cells = []
    for i in range(n):
        src = "\n".join(f"x_{i}_{k} = compute({k}, {i})  # line {k}" for k in range(20))
        out = "".join(f"step {k}: value {i * k}\n" for k in range(50))
        cells.append({
            "id": f"cell-{i:05d}", "cell_type": "code", "execution_count": i + 1, "metadata": {},
            "source": src, "outputs": [{"output_type": "stream", "name": "stdout", "text": out}],
        })
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def b64(u):
    return base64.b64encode(u).decode()


def main():
    keys = int(sys.argv[1])
    rng = random.Random(41)
    for arg in sys.argv[2:]:
        n = int(arg)
        nb = YNotebook()
        nb.set(notebook(n))
        initial = nb.ydoc.get_update()
        updates = []
        nb.ydoc.observe(lambda ev: updates.append(b64(ev.update)))
        nb.ycells[n // 2]["outputs"].append(Map({"output_type": "stream", "name": "stdout", "text": Text("done\n")}))
        output = list(updates)
        typed = []
        for _ in range(keys):
            updates.clear()
            src = nb.ycells[rng.randrange(n)]["source"]
            src.insert(rng.randrange(len(str(src)) + 1), "y")
            typed.append(list(updates))
        print(json.dumps({"cells": n, "initial": b64(initial), "output": output, "keys": typed}))


if __name__ == "__main__":
    main()
