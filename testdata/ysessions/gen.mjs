// gen.mjs writes seeded random Yjs notebook sessions for the differential tests of
// ystore/ynotebook, the demo session replayed by the sidecar demo, and the benchmark corpus.
//
//   node gen.mjs --seed S --count N --out DIR        N sessions, one DIR/sNNNN.json.gz each
//   node gen.mjs --demo --out FILE                   one person's session, JSON lines, gzipped
//   node gen.mjs --bench --seed S --updates N --out DIR   benchmark corpus (see bench/run.sh);
//       with --no-state only its updates.bin (bench/notebook.sh)
//
// Everything is deterministic by seed: client ids, cell ids and every choice come from a
// seeded generator, never from Math.random or crypto.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import * as Y from 'yjs';
import { YNotebook } from '@jupyter/ydoc';
import { Rand, args, writeFrames } from './seeded.mjs';

// @jupyter/ydoc reads its own preliminary types while building cells; Yjs warns each time.
const warn = console.warn;
console.warn = (...xs) => {
  if (!String(xs[0]).startsWith('Invalid access: Add Yjs type to a document')) warn(...xs);
};

// ---------------------------------------------------------------- content

const WORDS = [
  'import', 'numpy', 'as', 'np', 'def', 'return', 'for', 'in', 'range', 'print', 'x', 'df',
  'pandas', 'plot', 'value', '=', '+', '(', ')', ':', 'lambda', 'class', 'self', 'None',
  'café', 'naïve', 'e\u0301t\u00e9', 'n\u0303', '日本語', 'Ωμέγα', 'привет', '😀', '👍🏽', '🇫🇷',
  '👨‍👩‍👧', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', 'a\u0308\u0301', '\t', '\\n', '"str"', "'q'", '#', '# comment',
];
const PLAIN_WORDS = ['import', 'numpy', 'np', 'def', 'return', 'data', 'plot', 'x', 'y', 'df',
  'print', 'value', 'result', 'model', 'fit', 'train', 'loss', 'for', 'in', 'range', 'len'];

function words(r, n, pool = WORDS) {
  const out = [];
  for (let i = 0; i < n; i++) {
    out.push(r.pick(pool));
    if (r.chance(0.15)) out.push('\n');
  }
  return out.join(' ');
}

// isSplit reports whether UTF-16 offset i of s falls inside a surrogate pair.
function isSplit(s, i) {
  if (i <= 0 || i >= s.length) return false;
  const hi = s.charCodeAt(i - 1);
  return hi >= 0xd800 && hi <= 0xdbff;
}

function offset(r, s, allowSplit) {
  let i = r.int(s.length + 1);
  if (!allowSplit && isSplit(s, i)) i--;
  return i;
}

function jsonValue(r, depth = 0) {
  switch (r.int(depth > 1 ? 6 : 8)) {
    case 0: return r.int(1000);
    case 1: return r.chance(0.5);
    case 2: return null;
    case 3: return Math.round(r.next() * 1e6) / 1000;
    case 4: return words(r, r.range(1, 3));
    case 5: return -r.int(50);
    case 6: return [jsonValue(r, depth + 1), jsonValue(r, depth + 1)];
    default: {
      const o = {};
      for (let i = r.int(3); i >= 0; i--) o[r.pick(['a', 'b', 'name', 'n', 'é'])] = jsonValue(r, depth + 1);
      return o;
    }
  }
}

function png(r) {
  return r.bytes(r.range(40, 600)).toString('base64');
}

function output(r, count) {
  switch (r.weighted([[4, 'stream'], [2, 'execute_result'], [2, 'png'], [1, 'html'], [1, 'error']])) {
    case 'stream':
      return { output_type: 'stream', name: r.pick(['stdout', 'stderr']), text: words(r, r.range(1, 8)) + '\n' };
    case 'execute_result':
      return { output_type: 'execute_result', execution_count: count, metadata: {}, data: { 'text/plain': words(r, r.range(1, 6)) } };
    case 'png':
      return {
        output_type: 'display_data',
        data: { 'image/png': png(r), 'text/plain': '<Figure size 640x480 with 1 Axes>' },
        metadata: { 'image/png': { width: r.range(100, 800), height: r.range(100, 600) } },
      };
    case 'html':
      return { output_type: 'display_data', data: { 'text/html': `<table><tr><td>${words(r, 3)}</td></tr></table>`, 'text/plain': words(r, 2) }, metadata: {} };
    default:
      return {
        output_type: 'error',
        ename: r.pick(['ValueError', 'KeyError', 'ZeroDivisionError']),
        evalue: words(r, 3),
        traceback: ['\u001b[0;31m---------------------------------------------------------------------------\u001b[0m', words(r, 4), words(r, 5)],
      };
  }
}

function cellMetadata(r) {
  return r.pick([{}, { tags: ['x'] }, { trusted: true }, { scrolled: false, tags: [] }, { a: jsonValue(r) }]);
}

// ---------------------------------------------------------------- YNotebook sessions (@jupyter/ydoc 4.x layout)

// Client is one collaborator holding a YNotebook.
class Client {
  constructor(id, clientID, log) {
    this.id = id;
    this.nb = new YNotebook();
    this.nb.ydoc.clientID = clientID;
    this.nb.ydoc.on('update', (update, origin) => {
      if (origin !== 'remote') log.push({ client: id, update });
    });
  }
}

// applyRemote applies an update the way a provider does: the update is integrated even when
// a YNotebook observer throws, so the error is swallowed.
function applyRemote(doc, update) {
  try {
    Y.applyUpdate(doc, update, 'remote');
  } catch {
    // observer errors happen after integration
  }
}

function ydocOf(c) {
  return c.nb ? c.nb.ydoc : c.doc;
}

// snapshotOf is what a fresh YNotebook returns after applying all updates in one go.
function snapshotOf(updates) {
  const nb = new YNotebook();
  applyRemote(nb.ydoc, Y.mergeUpdates(updates));
  const out = { notebook: JSON.parse(JSON.stringify(nb.toJSON())), state: JSON.parse(JSON.stringify(nb.ystate.toJSON())) };
  nb.dispose();
  return out;
}

// notebookOp performs one random edit on a YNotebook client.
function notebookOp(r, c, opts) {
  const nb = c.nb;
  const n = nb.cells.length;
  const cell = n > 0 ? nb.cells[r.int(n)] : null;
  const op = r.weighted(opts.weights);
  switch (op) {
    case 'insert': {
      const type = r.weighted([[5, 'code'], [3, 'markdown'], [1, 'raw']]);
      const c0 = { id: r.uuid(), cell_type: type, source: r.chance(0.5) ? words(r, r.range(0, 6)) : '', metadata: cellMetadata(r) };
      if (type === 'code') {
        c0.outputs = r.chance(0.3) ? [output(r, 1)] : [];
        c0.execution_count = r.chance(0.3) ? r.range(1, 20) : null;
      } else if (r.chance(0.3)) {
        c0.attachments = { 'a.png': { 'image/png': png(r) } };
      }
      nb.insertCell(r.int(n + 1), c0);
      return;
    }
    case 'delete':
      if (n > 0) nb.deleteCell(r.int(n));
      return;
    case 'move':
      if (n > 1) nb.moveCell(r.int(n), r.int(n));
      return;
    case 'type': {
      if (!cell) return;
      const text = cell.ysource.toString();
      let at = offset(r, text, opts.allowSplit);
      const s = words(r, r.range(1, 3), opts.pool);
      if (r.chance(0.5)) {
        cell.updateSource(at, at, s);
        return;
      }
      // keystroke by keystroke, one transaction each
      for (const ch of s) {
        cell.updateSource(at, at, ch);
        at += ch.length;
      }
      return;
    }
    case 'erase': {
      if (!cell) return;
      const text = cell.ysource.toString();
      if (text.length === 0) return;
      let from = offset(r, text, opts.allowSplit);
      let to = Math.min(text.length, from + r.range(1, 6));
      if (!opts.allowSplit && isSplit(text, to)) to++;
      if (r.chance(0.5)) {
        cell.updateSource(from, to, r.chance(0.3) ? r.pick(['é', '😀', 'x']) : '');
        return;
      }
      // backspace by backspace
      for (; to > from; to--) {
        const step = !opts.allowSplit && isSplit(cell.ysource.toString(), to - 1) ? 2 : 1;
        cell.updateSource(to - step, to, '');
        if (step === 2) to--;
      }
      return;
    }
    case 'setSource':
      if (cell) cell.setSource(words(r, r.range(0, 10), opts.pool));
      return;
    case 'run': {
      if (!cell || cell.cell_type !== 'code') return;
      const count = (cell.execution_count ?? 0) + 1;
      cell.executionState = 'busy';
      cell.clearOutputs();
      for (let i = r.int(3); i > 0; i--) {
        const o = output(r, count);
        cell.updateOutputs(cell.youtputs.length, cell.youtputs.length, [o]);
        if (o.output_type === 'stream') {
          const idx = cell.youtputs.length - 1;
          for (let j = r.int(4); j > 0; j--) cell.appendStreamOutput(idx, words(r, r.range(1, 4)) + '\n');
        }
      }
      cell.execution_count = count;
      cell.executionState = 'idle';
      return;
    }
    case 'stream': {
      if (!cell || cell.cell_type !== 'code') return;
      const outs = cell.youtputs.toArray();
      const idx = outs.findIndex(o => o instanceof Y.Map && o.get('output_type') === 'stream' && o.get('text') instanceof Y.Text);
      if (idx < 0) {
        cell.updateOutputs(outs.length, outs.length, [{ output_type: 'stream', name: 'stdout', text: '' }]);
      } else if (r.chance(0.1)) {
        cell.removeStreamOutput(idx, offset(r, outs[idx].get('text').toString(), opts.allowSplit));
      } else {
        cell.appendStreamOutput(idx, words(r, r.range(1, 4)) + '\n');
      }
      return;
    }
    case 'replaceOutput': {
      if (!cell || cell.cell_type !== 'code' || cell.youtputs.length === 0) return;
      const i = r.int(cell.youtputs.length);
      cell.updateOutputs(i, i + 1, [output(r, cell.execution_count ?? 1)]);
      return;
    }
    case 'clear':
      if (cell && cell.cell_type === 'code') cell.clearOutputs();
      return;
    case 'count':
      if (cell && cell.cell_type === 'code') cell.execution_count = r.pick([null, 0, r.range(1, 99)]);
      return;
    case 'cellMeta': {
      if (!cell) return;
      const k = r.weighted([[3, 'tags'], [2, 'collapsed'], [2, 'jupyter'], [2, 'custom'], [2, 'delete']]);
      if (k === 'tags') cell.setMetadata('tags', [words(r, 1)]);
      else if (k === 'collapsed') cell.setMetadata('collapsed', r.chance(0.5));
      else if (k === 'jupyter') cell.setMetadata('jupyter', r.chance(0.5) ? { source_hidden: true } : { outputs_hidden: r.chance(0.5) });
      else if (k === 'custom') cell.setMetadata(r.pick(['x', 'y', 'é', 'nested']), jsonValue(r));
      else {
        const keys = Object.keys(cell.getMetadata() ?? {});
        if (keys.length) cell.deleteMetadata(r.pick(keys));
      }
      return;
    }
    case 'attach':
      if (cell && cell.cell_type !== 'code') cell.setAttachments(r.chance(0.7) ? { [`img${r.int(3)}.png`]: { 'image/png': png(r) } } : null);
      return;
    case 'nbMeta': {
      const k = r.weighted([[2, 'set'], [1, 'update'], [1, 'delete'], [1, 'all']]);
      if (k === 'set') nb.setMetadata(r.pick(['kernelspec', 'language_info', 'title', 'é']), jsonValue(r));
      else if (k === 'update') nb.updateMetadata({ [r.pick(['widgets', 'toc'])]: jsonValue(r) });
      else if (k === 'delete') {
        const keys = Object.keys(nb.metadata ?? {});
        if (keys.length) nb.deleteMetadata(r.pick(keys));
      } else nb.setMetadata({ kernelspec: { name: 'python3', display_name: 'Python 3' }, n: r.int(10) });
      return;
    }
    case 'state':
      if (r.chance(0.5)) nb.dirty = r.chance(0.5);
      else nb.setState('path', r.pick(['a.ipynb', 'dir/b.ipynb', 'é/ü.ipynb']));
      return;
    default:
      throw new Error(`unknown op ${op}`);
  }
}

const SESSION_WEIGHTS = [
  [6, 'insert'], [2, 'delete'], [2, 'move'], [10, 'type'], [4, 'erase'], [1, 'setSource'],
  [3, 'run'], [3, 'stream'], [1, 'replaceOutput'], [1, 'clear'], [2, 'count'], [3, 'cellMeta'],
  [2, 'attach'], [2, 'nbMeta'], [2, 'state'],
];

// initialNotebook is the notebook a session starts from. Cells always carry ids (YNotebook
// would draw random ones for nbformat 4.4); minor says which nbformat_minor to set after.
function initialNotebook(r) {
  return {
    minor: r.chance(0.9) ? 5 : 4,
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' }, language_info: { name: 'python' } },
    cells: [
      { id: r.uuid(), cell_type: 'markdown', source: '# Title ' + words(r, 3), metadata: {} },
      { id: r.uuid(), cell_type: 'code', source: 'import numpy as np', metadata: {}, outputs: [], execution_count: null },
    ],
  };
}

// ---------------------------------------------------------------- raw jupyter_ydoc 2.x layout (plain outputs)

// RawClient edits a notebook with plain yjs in the jupyter_ydoc 2.x layout: outputs are
// plain objects in the outputs array, stream text is a plain string.
class RawClient {
  constructor(id, clientID, log) {
    this.id = id;
    this.doc = new Y.Doc();
    this.doc.clientID = clientID;
    this.doc.on('update', (update, origin) => {
      if (origin !== 'remote') log.push({ client: id, update });
    });
  }
}

function rawCell(r, type) {
  const m = new Y.Map();
  m.set('id', r.uuid());
  m.set('cell_type', type);
  m.set('source', new Y.Text(words(r, r.range(0, 5))));
  const meta = new Y.Map();
  if (r.chance(0.3)) meta.set('tags', ['raw']);
  m.set('metadata', meta);
  if (type === 'code') {
    m.set('outputs', Y.Array.from(r.chance(0.5) ? [output(r, 1)] : []));
    m.set('execution_count', r.chance(0.5) ? r.range(1, 9) : null);
  } else if (r.chance(0.3)) {
    m.set('attachments', { 'b.png': { 'image/png': png(r) } });
  }
  return m;
}

function rawInit(r, doc) {
  doc.transact(() => {
    const meta = doc.getMap('meta');
    meta.set('nbformat', 4);
    meta.set('nbformat_minor', 5);
    const md = new Y.Map();
    md.set('kernelspec', { name: 'python3', display_name: 'Python 3' });
    meta.set('metadata', md);
    doc.getMap('state').set('dirty', false);
    doc.getMap('state').set('path', 'legacy.ipynb');
    const cells = doc.getArray('cells');
    cells.insert(0, [rawCell(r, 'markdown'), rawCell(r, 'code')]);
  });
}

function rawOp(r, c) {
  const doc = c.doc;
  const cells = doc.getArray('cells');
  const n = cells.length;
  const cell = n > 0 ? cells.get(r.int(n)) : null;
  const op = r.weighted([[4, 'insert'], [1, 'delete'], [1, 'move'], [8, 'type'], [3, 'erase'], [4, 'output'], [2, 'count'], [2, 'meta'], [1, 'nbMeta'], [1, 'state']]);
  doc.transact(() => {
    switch (op) {
      case 'insert':
        cells.insert(r.int(n + 1), [rawCell(r, r.pick(['code', 'code', 'markdown', 'raw']))]);
        return;
      case 'delete':
        if (n > 0) cells.delete(r.int(n), 1);
        return;
      case 'move': {
        if (n < 2) return;
        const from = r.int(n);
        const json = cells.get(from).toJSON();
        cells.delete(from, 1);
        const m = new Y.Map();
        for (const [k, v] of Object.entries(json)) {
          if (k === 'source') m.set(k, new Y.Text(v));
          else if (k === 'metadata') m.set(k, new Y.Map(Object.entries(v)));
          else if (k === 'outputs') m.set(k, Y.Array.from(v));
          else m.set(k, v);
        }
        cells.insert(r.int(n), [m]);
        return;
      }
      case 'type': {
        const src = cell?.get('source');
        if (!(src instanceof Y.Text)) return;
        src.insert(offset(r, src.toString(), true), words(r, r.range(1, 2)));
        return;
      }
      case 'erase': {
        const src = cell?.get('source');
        if (!(src instanceof Y.Text) || src.length === 0) return;
        const at = r.int(src.length);
        src.delete(at, Math.min(src.length - at, r.range(1, 4)));
        return;
      }
      case 'output': {
        const outs = cell?.get('outputs');
        if (!(outs instanceof Y.Array)) return;
        const last = outs.length ? outs.get(outs.length - 1) : null;
        if (last && last.output_type === 'stream' && r.chance(0.5)) {
          // a growing stream replaces the plain object
          outs.delete(outs.length - 1, 1);
          outs.push([{ ...last, text: last.text + words(r, 2) + '\n' }]);
        } else if (r.chance(0.2)) {
          outs.delete(0, outs.length);
        } else {
          outs.push([output(r, cell.get('execution_count') ?? 1)]);
        }
        return;
      }
      case 'count':
        if (cell?.get('cell_type') === 'code') cell.set('execution_count', r.range(1, 30));
        return;
      case 'meta': {
        const md = cell?.get('metadata');
        if (!(md instanceof Y.Map)) return;
        if (r.chance(0.3) && md.size) md.delete(r.pick([...md.keys()]));
        else md.set(r.pick(['tags', 'collapsed', 'z']), jsonValue(r));
        return;
      }
      case 'nbMeta':
        doc.getMap('meta').get('metadata').set(r.pick(['title', 'authors']), jsonValue(r));
        return;
      default:
        doc.getMap('state').set(r.pick(['dirty', 'path']), r.chance(0.5) ? r.chance(0.5) : 'moved.ipynb');
    }
  });
}

// ---------------------------------------------------------------- sessions

// session runs one seeded session and returns its record.
function session(seed) {
  const r = new Rand(seed);
  const legacy = r.chance(0.15);
  const nclients = r.range(2, 4);
  const log = [];
  const clients = [];
  for (let i = 0; i < nclients; i++) {
    clients.push(legacy ? new RawClient(i, r.clientID(), log) : new Client(i, r.clientID(), log));
  }
  const doc = c => ydocOf(c);
  const syncPair = (a, b) => applyRemote(doc(b), Y.encodeStateAsUpdate(doc(a), Y.encodeStateVector(doc(b))));
  const syncAll = () => {
    for (const a of clients) for (const b of clients) if (a !== b) syncPair(a, b);
  };

  if (legacy) rawInit(r, clients[0].doc);
  else {
    const { minor, ...data } = initialNotebook(r);
    clients[0].nb.setSource(data);
    clients[0].nb.nbformat_minor = minor;
    clients[0].nb.setState('path', 'untitled.ipynb');
  }
  syncAll();

  const opts = { weights: SESSION_WEIGHTS, allowSplit: true, pool: WORDS };
  const steps = r.range(20, 70);
  const checkpoints = [];
  let failures = 0;
  for (let step = 0; step < steps; step++) {
    const c = r.pick(clients);
    try {
      if (legacy) rawOp(r, c);
      else notebookOp(r, c, opts);
    } catch {
      failures++;
    }
    if (r.chance(0.2)) {
      const a = r.pick(clients);
      const b = r.pick(clients);
      if (a !== b) syncPair(a, b);
    }
    if (r.chance(0.12) || step === steps - 1) {
      syncAll();
      checkpoints.push({ after: log.length, ...snapshotOf(log.map(e => e.update)) });
    }
  }
  const updates = log.map(e => e.update);
  for (const c of clients) c.nb?.dispose();
  return {
    seed,
    layout: legacy ? 'jupyter_ydoc-2' : 'jupyter-ydoc-4',
    clients: nclients,
    opFailures: failures,
    updates: log.map(e => ({ client: e.client, update: Buffer.from(e.update).toString('base64') })),
    merged: Buffer.from(Y.mergeUpdates(updates)).toString('base64'),
    checkpoints,
  };
}

function writeSessions(seed, count, out) {
  fs.mkdirSync(out, { recursive: true });
  for (const f of fs.readdirSync(out)) {
    if (/^s\d+\.json\.gz$/.test(f)) fs.unlinkSync(path.join(out, f));
  }
  for (let i = 0; i < count; i++) {
    const rec = session(seed * 100003 + i);
    const file = path.join(out, `s${String(i).padStart(4, '0')}.json.gz`);
    fs.writeFileSync(file, zlib.gzipSync(JSON.stringify(rec), { level: 9 }));
  }
}

// ---------------------------------------------------------------- demo: one person writing a notebook

const DEMO_CODE = [
  'import numpy as np\nimport matplotlib.pyplot as plt\n',
  'x = np.linspace(0, 10, 200)\ny = np.sin(x) * np.exp(-x / 5)\n',
  'for epoch in range(5):\n    print(f"epoch {epoch}: loss={1 / (epoch + 1):.3f}")\n',
  'plt.plot(x, y)\nplt.title("damped sine")\nplt.show()\n',
  'result = 1 / 0\n',
  'summary = {"mean": float(y.mean()), "max": float(y.max())}\nsummary\n',
];
const DEMO_MD = ['# Damped oscillations\n', 'We look at a *damped sine* and its summary statistics.\n', '## Training loop\n'];

// demo writes the realistic single-user session replayed by the sidecar demo.
function demo(out) {
  const r = new Rand(20260101);
  const nb = new YNotebook();
  nb.ydoc.clientID = 424242;
  const lines = [];
  let delay = 0;
  nb.ydoc.on('update', update => {
    lines.push(JSON.stringify({ update: Buffer.from(update).toString('base64'), delay_ms: delay || r.range(50, 800) }));
    delay = 0;
  });
  nb.setSource({ nbformat: 4, nbformat_minor: 5, metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } }, cells: [] });
  nb.setState('path', 'demo.ipynb');
  const typeInto = (cell, text) => {
    for (const ch of text) {
      delay = ch === '\n' ? r.range(300, 800) : r.range(50, 220);
      cell.updateSource(cell.ysource.length, cell.ysource.length, ch);
    }
  };
  let count = 0;
  let codeIdx = 0;
  let mdIdx = 0;
  while (lines.length < 1500) {
    if (mdIdx < DEMO_MD.length && (codeIdx % 2 === 0 || codeIdx >= DEMO_CODE.length)) {
      const cell = nb.insertCell(nb.cells.length, { id: r.uuid(), cell_type: 'markdown', source: '', metadata: {} });
      typeInto(cell, DEMO_MD[mdIdx++]);
    }
    const src = DEMO_CODE[codeIdx % DEMO_CODE.length];
    const cell = nb.insertCell(nb.cells.length, { id: r.uuid(), cell_type: 'code', source: '', metadata: {}, outputs: [], execution_count: null });
    typeInto(cell, src);
    count++;
    cell.executionState = 'busy';
    cell.clearOutputs();
    if (src.includes('print')) {
      cell.updateOutputs(0, 0, [{ output_type: 'stream', name: 'stdout', text: '' }]);
      for (let e = 0; e < 5; e++) {
        delay = r.range(200, 800);
        cell.appendStreamOutput(0, `epoch ${e}: loss=${(1 / (e + 1)).toFixed(3)}\n`);
      }
    } else if (src.includes('plt.show')) {
      cell.updateOutputs(0, 0, [{ output_type: 'display_data', data: { 'image/png': png(r), 'text/plain': '<Figure size 640x480 with 1 Axes>' }, metadata: {} }]);
    } else if (src.includes('1 / 0') && codeIdx < DEMO_CODE.length) {
      cell.updateOutputs(0, 0, [{ output_type: 'error', ename: 'ZeroDivisionError', evalue: 'division by zero', traceback: ['\u001b[0;31mZeroDivisionError\u001b[0m: division by zero'] }]);
    } else if (src.endsWith('summary\n')) {
      cell.updateOutputs(0, 0, [{ output_type: 'execute_result', execution_count: count, data: { 'text/plain': "{'mean': 0.161, 'max': 0.872}" }, metadata: {} }]);
    }
    delay = r.range(300, 800);
    cell.execution_count = count;
    cell.executionState = 'idle';
    if (codeIdx % 3 === 2) cell.setMetadata('tags', ['step-' + codeIdx]);
    if (codeIdx % 4 === 3) nb.setMetadata('last_run', count);
    nb.dirty = true;
    codeIdx++;
  }
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, zlib.gzipSync(lines.join('\n') + '\n', { level: 9 }));
}

// ---------------------------------------------------------------- benchmark corpus

const BENCH_WEIGHTS = [
  [3, 'insert'], [1, 'delete'], [1, 'move'], [40, 'type'], [10, 'erase'], [6, 'run'], [6, 'stream'],
  [1, 'replaceOutput'], [1, 'clear'], [2, 'cellMeta'], [1, 'attach'], [1, 'nbMeta'], [1, 'state'],
];

// bench writes DIR/updates.bin (u32le length-prefixed updates of a two-person history, no
// surrogate pair ever split: ywasm panics on those) and DIR/state.bin (one ~10 MB update).
function bench(seed, count, out, withState) {
  const r = new Rand(seed);
  const log = [];
  const clients = [new Client(0, 1001, log), new Client(1, 1002, log)];
  const { minor, ...data } = initialNotebook(r);
  clients[0].nb.setSource(data);
  clients[0].nb.nbformat_minor = minor;
  const opts = { weights: BENCH_WEIGHTS, allowSplit: false, pool: PLAIN_WORDS.concat(['é', '😀', '日本']) };
  const syncPair = (a, b) => applyRemote(b.nb.ydoc, Y.encodeStateAsUpdate(a.nb.ydoc, Y.encodeStateVector(b.nb.ydoc)));
  syncPair(clients[0], clients[1]);
  while (log.length < count) {
    const c = r.pick(clients);
    try {
      notebookOp(r, c, opts);
    } catch {
      // a failed op has still produced its updates
    }
    if (r.chance(0.3)) syncPair(clients[0], clients[1]);
    if (r.chance(0.3)) syncPair(clients[1], clients[0]);
    if (clients[0].nb.cells.length > 60) clients[0].nb.deleteCell(0);
  }
  fs.mkdirSync(out, { recursive: true });
  writeFrames(path.join(out, 'updates.bin'), log.map(e => e.update));
  if (withState) writeFrames(path.join(out, 'state.bin'), [bigState(r, log.map(e => e.update))]);
}

// bigState returns one ~10 MB update: the history above plus many cells typed into at
// random places by many clients (fragmented text, as long collaborative sessions leave it),
// stream outputs and images, written with plain yjs in the same layout.
function bigState(r, history) {
  const doc = new Y.Doc();
  for (const u of history) Y.applyUpdate(doc, u);
  const cells = doc.getArray('cells');
  for (let n = 0; ; n++) {
    if (n % 5 === 0) {
      const state = Y.encodeStateAsUpdate(doc);
      if (state.length >= 10 * 1024 * 1024) return state;
    }
    doc.clientID = 5000 + (n % 40);
    const cell = new Y.Map();
    doc.transact(() => {
      cell.set('id', r.uuid());
      cell.set('cell_type', 'code');
      cell.set('source', new Y.Text());
      cell.set('metadata', new Y.Map());
      cell.set('execution_count', n);
      cell.set('outputs', new Y.Array());
      cells.push([cell]);
    });
    const src = cell.get('source');
    for (let i = 0; i < 3000; i++) {
      // ASCII words: no offset can split a surrogate pair
      doc.transact(() => src.insert(r.int(src.length + 1), r.pick(PLAIN_WORDS) + ' '));
      if (i % 250 === 0 && src.length > 8) src.delete(r.int(src.length - 4), 2);
    }
    doc.transact(() => {
      const stream = new Y.Map([['output_type', 'stream'], ['name', 'stdout'], ['text', new Y.Text()]]);
      const image = new Y.Map([['output_type', 'display_data'], ['data', { 'image/png': r.bytes(6000).toString('base64'), 'text/plain': '<Figure>' }], ['metadata', {}]]);
      cell.get('outputs').push([stream, image]);
    });
    for (let i = 0; i < 200; i++) cell.get('outputs').get(0).get('text').insert(cell.get('outputs').get(0).get('text').length, `line ${i}\n`);
  }
}

// ---------------------------------------------------------------- main

const a = args(process.argv.slice(2));
if (a.demo) demo(a.out);
else if (a.bench) bench(Number(a.seed ?? 1), Number(a.updates ?? 100000), a.out, !a['no-state']);
else writeSessions(Number(a.seed ?? 1), Number(a.count ?? 200), a.out ?? 'fixtures');
// YNotebook's awareness keeps a timer alive
process.exit(0);
