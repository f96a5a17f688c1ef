"""Apply crafted update shapes with pycrdt, the Jupyter server's engine, beside
bench/crafted_test.go (TestCraftedShapes), which writes them.

Usage: python crafted.py FRAMES...  (each a file of uint32-LE-length-prefixed updates)
Prints one JSON line per file: {"file", "updates", "seconds", "errors"}.
"""

import json
import sys
import time

from pycrdt import Doc

from frames import frames



for path in sys.argv[1:]:
    updates = frames(path)
    doc, errors = Doc(), 0
    start = time.perf_counter()
    for u in updates:
        try:
            doc.apply_update(u)
        except Exception:
            errors += 1
    print(json.dumps({"file": path, "updates": len(updates), "seconds": time.perf_counter() - start, "errors": errors}), flush=True)
