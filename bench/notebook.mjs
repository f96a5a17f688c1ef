// notebook.mjs times one JavaScript engine on the notebook-layer workloads written by
// testdata/ynbench/gen.mjs (see bench/notebook.sh) and prints JSON lines like the Go side's
// TestNotebookLayer.
//
//   node --expose-gc bench/notebook.mjs --engine yjs|ydoc|ywasm --dir DIR [--reps 3] [--rooms corpus,sessions]
//
// --rooms names the workloads of many rooms to time, each a directory of room-*.bin in DIR
// (default corpus: the 20 rooms of bench/notebook.sh; bench/ratios.sh adds the recorded
// sessions of bench/sessions.mjs).
//
// ydoc is yjs with a live @jupyter/ydoc YNotebook on the document and a handler connected
// to its changed signal: the JavaScript counterpart of ynotebook.Apply.
import fs from 'node:fs';
import path from 'node:path';
import { args, readFrames } from '../testdata/ysessions/seeded.mjs';

// ES modules by path, so that @jupyter/ydoc and this script share one instance of yjs
const modules = new URL('../testdata/ysessions/node_modules/', import.meta.url);
const Y = await import(new URL('yjs/dist/yjs.mjs', modules));
const version = name => JSON.parse(fs.readFileSync(new URL(`${name}/package.json`, modules))).version;

// each engine opens an empty document, applies an update to it and reads its content at
// the end of a workload (the roots of a notebook: an engine that decodes values only when
// they are read pays for them; a YNotebook's observers read what each update changes)
const engines = {
  yjs: async () => ({
    name: `yjs@${version('yjs')}`,
    open: () => new Y.Doc(),
    apply: (doc, u) => Y.applyUpdate(doc, u),
    read: doc => ['cells', 'meta', 'state'].forEach(n => (n === 'cells' ? doc.getArray(n) : doc.getMap(n)).toJSON()),
  }),
  ydoc: async () => {
    const { YNotebook } = await import(new URL('@jupyter/ydoc/lib/index.js', modules));
    console.warn = () => {};
    let events = 0;
    return {
      name: `@jupyter/ydoc@${version('@jupyter/ydoc')} YNotebook`,
      open: () => {
        const nb = new YNotebook();
        nb.changed.connect((_, change) => {
          events += change.cellsChange ? 2 : 1;
        });
        return nb;
      },
      apply: (nb, u) => {
        try {
          Y.applyUpdate(nb.ydoc, u);
        } catch {
          // YNotebook observers can throw after the update is integrated
        }
      },
      read: () => {}, // its observers read what each update changes
    };
  },
  ywasm: async () => {
    const { createRequire } = await import('node:module');
    const w = createRequire(new URL('package.json', new URL('../', modules)))('ywasm');
    return {
      name: `ywasm@${version('ywasm')}`,
      open: () => new w.YDoc({}),
      apply: (doc, u) => w.applyUpdate(doc, u, null),
      read: doc => ['cells', 'meta', 'state'].forEach(n => (n === 'cells' ? doc.getArray(n) : doc.getMap(n)).toJson()),
    };
  },
};

function cpu() {
  const c = process.cpuUsage();
  return (c.user + c.system) * 1e3; // ns
}

function live() {
  global.gc();
  global.gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

const a = args(process.argv.slice(2));
const engine = await engines[a.engine]();
const reps = Number(a.reps ?? 3);
const out = [];

// time returns the least CPU time of reps runs of the function setup returns, in ns.
function time(setup) {
  let best = Infinity;
  for (let r = 0; r < reps; r++) {
    const run = setup();
    global.gc();
    const c0 = cpu();
    run();
    best = Math.min(best, cpu() - c0);
  }
  return best;
}

// the rooms first: ywasm's memory grows and is never given back, so its live heap is
// only measurable in a fresh process: the first workload's is right
for (const workload of String(a.rooms ?? 'corpus').split(',')) {
  const roomsDir = path.join(a.dir, workload);
  const rooms = fs.existsSync(roomsDir) ? fs.readdirSync(roomsDir).filter(f => f.endsWith('.bin')).sort().map(f => readFrames(path.join(roomsDir, f))) : [];
  const total = rooms.reduce((s, r) => s + r.length, 0);
  if (total === 0) continue;
  const openAll = () => rooms.map(() => engine.open());
  // each room's updates, then its content read
  const applyAll = docs =>
    rooms.forEach((ups, i) => {
      for (const u of ups) engine.apply(docs[i], u);
      engine.read(docs[i]);
    });
  try {
    // the live heap in a pass of its own, before the timed ones
    const before = live();
    const docs = openAll();
    applyAll(docs);
    const liveMB = (live() - before) / 2 ** 20;
    docs.length = 0;
    const ns = time(() => {
      const docs = openAll();
      return () => applyAll(docs);
    });
    out.push({ engine: engine.name, workload, updates: total, cpuMs: ns / 1e6, nsPerUpdate: ns / total, liveMB });
  } catch (e) {
    out.push({ engine: engine.name, workload, updates: total, error: String(e.message ?? e).slice(0, 200) });
  }
}

const sizes = fs.readdirSync(a.dir).filter(d => d.startsWith('size-')).sort();
for (const sd of sizes) {
  const cells = Number(sd.slice(5));
  const base = readFrames(path.join(a.dir, sd, 'base.bin'));
  for (const workload of ['structural', 'typing']) {
    const updates = readFrames(path.join(a.dir, sd, `${workload}.bin`));
    try {
      const ns = time(() => {
        const doc = engine.open();
        for (const u of base) engine.apply(doc, u);
        return () => {
          for (const u of updates) engine.apply(doc, u);
        };
      });
      out.push({ engine: engine.name, workload, cells, updates: updates.length, cpuMs: ns / 1e6, nsPerUpdate: ns / updates.length });
    } catch (e) {
      out.push({ engine: engine.name, workload, cells, updates: updates.length, error: String(e.message ?? e).slice(0, 200) });
    }
  }
}

for (const r of out) console.log(JSON.stringify(r));
// a YNotebook's awareness keeps a timer alive
process.exit(0);
