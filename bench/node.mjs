// node.mjs times one engine on one workload of the benchmark corpus, in its own process so
// that peak RSS belongs to that engine alone, and prints one JSON line.
//
//   node bench/node.mjs --engine yjs|yjs+YNotebook|ywasm --workload history|state --corpus bench/out [--reps N]
import path from 'node:path';
import { args, readFrames } from '../testdata/ysessions/seeded.mjs';
import { createRequire } from 'node:module';

// the npm packages live in the session generator's project; yjs and @jupyter/ydoc as ES
// modules by path, so that they share one instance of yjs
const require = createRequire(new URL('../testdata/ysessions/package.json', import.meta.url));
const modules = new URL('../testdata/ysessions/node_modules/', import.meta.url);
const Y = await import(new URL('yjs/dist/yjs.mjs', modules));

const engines = {
  yjs: () => {
    return {
      version: require('yjs/package.json').version,
      newDoc: () => new Y.Doc(),
      apply: (doc, u) => Y.applyUpdate(doc, u),
      read: doc => ['cells', 'meta', 'state'].forEach(n => (n === 'cells' ? doc.getArray(n) : doc.getMap(n)).toJSON()),
      stateVector: doc => Y.encodeStateVector(doc),
    };
  },
  // the JavaScript counterpart of ystore/ynotebook: yjs with a live YNotebook model
  'yjs+YNotebook': async () => {
    const { YNotebook } = await import(new URL('@jupyter/ydoc/lib/index.js', modules));
    console.warn = () => {};
    return {
      version: `${require('yjs/package.json').version}+@jupyter/ydoc@${require('@jupyter/ydoc/package.json').version}`,
      newDoc: () => new YNotebook(),
      apply: (nb, u) => {
        try {
          Y.applyUpdate(nb.ydoc, u);
        } catch {
          // YNotebook observers can throw after the update is integrated
        }
      },
      read: () => {}, // its observers read what each update changes
      stateVector: nb => Y.encodeStateVector(nb.ydoc),
    };
  },
  ywasm: () => {
    const w = require('ywasm');
    return {
      version: require('ywasm/package.json').version,
      newDoc: () => new w.YDoc({}),
      apply: (doc, u) => w.applyUpdate(doc, u, null),
      read: doc => ['cells', 'meta', 'state'].forEach(n => (n === 'cells' ? doc.getArray(n) : doc.getMap(n)).toJson()),
      stateVector: doc => w.encodeStateVector(doc),
    };
  },
};

const a = args(process.argv.slice(2));
const engine = await engines[a.engine]();
const frames = readFrames(path.join(a.corpus, a.workload === 'state' ? 'state.bin' : 'updates.bin'));
const bytes = frames.reduce((s, f) => s + f.length, 0);
const reps = Number(a.reps ?? (a.workload === 'state' ? 5 : 3));
const baseRSS = process.memoryUsage().rss;
const times = [];
const cpuTimes = [];
let sv = null;
for (let r = 0; r < reps; r++) {
  const doc = engine.newDoc();
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  for (const f of frames) engine.apply(doc, f);
  engine.read(doc);
  const c = process.cpuUsage(c0);
  times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  cpuTimes.push((c.user + c.system) / 1e3);
  sv = [...Y.decodeStateVector(engine.stateVector(doc))].map(([c, clock]) => `${c}:${clock}`).sort().join(',');
}
// the fastest repetition: the least disturbed by other work on the machine
const ms = Math.min(...times);
const cpuMs = Math.min(...cpuTimes);
const peak = process.resourceUsage().maxRSS * 1024;
console.log(JSON.stringify({
  engine: `${a.engine}@${engine.version}`,
  workload: a.workload,
  updates: frames.length,
  bytes,
  ms,
  cpuMs,
  nsPerUpdate: (cpuMs * 1e6) / frames.length,
  peakRSSMB: peak / 2 ** 20,
  rssGrowthMB: (peak - baseRSS) / 2 ** 20,
  stateVector: sv,
}));
process.exit(0);
