// memory.mjs: the live heap of one yjs document (and of yjs with @jupyter/ydoc's YNotebook
// model, what a JupyterLab client holds) loaded from the first N updates of the corpus's
// history, the counterpart of TestMemoryHistory (bench/memory_test.go). One JSON line per
// prefix; run with --expose-gc.
//
//   node --expose-gc bench/memory.mjs --corpus DIR [--prefixes 1000,3000,10000,30000,100000]
import path from 'node:path';
import { args, readFrames } from '../testdata/ysessions/seeded.mjs';

const modules = new URL('../testdata/ysessions/node_modules/', import.meta.url);
const Y = await import(new URL('yjs/dist/yjs.mjs', modules));
const { YNotebook } = await import(new URL('@jupyter/ydoc/lib/index.js', modules));
console.warn = () => {};

const a = args(process.argv.slice(2));
const frames = readFrames(path.join(a.corpus, 'updates.bin'));
const prefixes = (a.prefixes ?? '1000,3000,10000,30000,100000').split(',').map(Number);

// heapOf returns the heap that build's result holds once collected.
function heapOf(build) {
  global.gc();
  const before = process.memoryUsage().heapUsed;
  const held = build();
  global.gc();
  const after = process.memoryUsage().heapUsed;
  return { held, bytes: after - before };
}

for (const n of prefixes) {
  const us = frames.slice(0, Math.min(n, frames.length));
  const doc = heapOf(() => {
    const d = new Y.Doc();
    for (const u of us) Y.applyUpdate(d, u);
    return d;
  });
  const nb = heapOf(() => {
    const m = new YNotebook();
    for (const u of us) {
      try {
        Y.applyUpdate(m.ydoc, u);
      } catch {
        // YNotebook observers can throw after the update is integrated
      }
    }
    return m;
  });
  console.log(JSON.stringify({ updates: us.length, yjs: doc.bytes, yjsYNotebook: nb.bytes }));
}
// @jupyter/ydoc's models leave a handle open that would keep the process alive.
process.exit(0);
