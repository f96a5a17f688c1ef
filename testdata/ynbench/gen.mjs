// gen.mjs writes the notebook-layer workloads of bench/notebook.sh and the fixture of
// ystore/ynotebook's flatness test from real @jupyter/ydoc edits. Deterministic by seed.
//
//   node gen.mjs --out DIR [--seed S] [--sizes 10,100,1000,5000] [--edits 300] [--keys 1000]
//       DIR/size-N/base.bin        one update: a notebook of N code cells (20-line sources,
//                                  a 50-line stream output each)
//       DIR/size-N/structural.bin  edits on top of it: insert, move, delete a cell in turn
//       DIR/size-N/typing.bin      typing into the middle cell, its stream output growing
//                                  every 10th key
//   node gen.mjs --fixture FILE [--seed S]
//       the flatness fixture (JSON, gzipped): the same kind of notebook at 50 and 5000
//       one-line cells and 30 structural edits on each
//
// Files of updates are u32le length-prefixed frames. The multi-notebook corpus comes from
// ../ysessions/gen.mjs --bench (see bench/notebook.sh). The npm packages and the seeded
// generator are those of ../ysessions.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { Rand, args, writeFrames } from '../ysessions/seeded.mjs';

// ES modules by path, so that @jupyter/ydoc and this script share one instance of yjs
const modules = new URL('../ysessions/node_modules/', import.meta.url);
const Y = await import(new URL('yjs/dist/yjs.mjs', modules));
const { YNotebook } = await import(new URL('@jupyter/ydoc/lib/index.js', modules));

// @jupyter/ydoc reads its own preliminary types while building cells; Yjs warns each time.
console.warn = () => {};

const WORDS = ['import', 'numpy', 'as', 'np', 'def', 'return', 'for', 'in', 'range', 'print', 'x', 'df', 'plot', 'value', '=', '+', '(', ')'];
const KEYS = 'abcdefghijklmnopqrstuvwxyz ()=+.,\n';

function line(r) {
  let s = '';
  for (let i = 0, n = 3 + r.int(6); i < n; i++) s += WORDS[r.int(WORDS.length)] + ' ';
  return s.trimEnd();
}

function lines(r, n, prefix = '') {
  const out = [];
  for (let i = 0; i < n; i++) out.push(prefix + line(r));
  return out.join('\n') + '\n';
}

// codeCell is a code cell of sourceLines lines with a stream output of outputLines lines.
function codeCell(r, sourceLines, outputLines, count) {
  return {
    id: r.uuid(),
    cell_type: 'code',
    source: lines(r, sourceLines),
    metadata: {},
    execution_count: count,
    outputs: outputLines ? [{ output_type: 'stream', name: 'stdout', text: lines(r, outputLines, 'out: ') }] : [],
  };
}

// client is a YNotebook whose local updates are collected in log.
function client(clientID, log) {
  const nb = new YNotebook();
  nb.ydoc.clientID = clientID;
  nb.ydoc.on('update', (update, origin) => {
    if (origin !== 'remote') log.push(update);
  });
  return nb;
}

// notebook returns the state of a notebook of n cells as one update.
function notebook(r, n, sourceLines, outputLines) {
  const nb = client(1001, []);
  nb.transact(() => {
    nb.nbformat = 4;
    nb.nbformat_minor = 5;
    nb.setMetadata({ kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } });
  });
  // in batches: one transaction of thousands of cells is slow in YNotebook's observers
  for (let i = 0; i < n; i += 100) {
    const batch = [];
    for (let j = i; j < Math.min(n, i + 100); j++) batch.push(codeCell(r, sourceLines, outputLines, j + 1));
    nb.insertCells(i, batch);
  }
  const state = Y.encodeStateAsUpdate(nb.ydoc);
  nb.dispose();
  return state;
}

// editor is a second collaborator that has loaded base.
function editor(base, log) {
  const nb = client(2002, log);
  Y.applyUpdate(nb.ydoc, base, 'remote');
  return nb;
}

// structural inserts, moves and deletes a cell in turn, each at a random place.
function structural(r, base, edits, sourceLines, outputLines) {
  const log = [];
  const nb = editor(base, log);
  for (let i = 0; i < edits; i++) {
    const n = nb.cells.length;
    switch (i % 3) {
      case 0:
        nb.insertCell(r.int(n + 1), codeCell(r, sourceLines, outputLines, null));
        break;
      case 1: {
        const from = r.int(n);
        let to = r.int(n);
        if (to === from) to = (from + 1) % n;
        nb.moveCell(from, to);
        break;
      }
      default:
        nb.deleteCell(r.int(n));
    }
  }
  nb.dispose();
  return log;
}

// typing types keys into the middle cell at a random place of its source and appends a
// line to its stream output every 10th key.
function typing(r, base, keys) {
  const log = [];
  const nb = editor(base, log);
  const cell = nb.cells[Math.floor(nb.cells.length / 2)];
  for (let i = 0; i < keys; i++) {
    const at = r.int(cell.source.length + 1);
    cell.updateSource(at, at, KEYS[r.int(KEYS.length)]);
    if (i % 10 === 9) cell.appendStreamOutput(0, `out: step ${i}\n`);
  }
  nb.dispose();
  return log;
}

const a = args(process.argv.slice(2));
const r = new Rand(Number(a.seed ?? 1));
if (a.fixture) {
  const sizes = {};
  for (const n of [50, 5000]) {
    const base = notebook(r, n, 1, 0);
    sizes[n] = { base: Buffer.from(base).toString('base64'), edits: structural(r, base, 30, 1, 0).map(u => Buffer.from(u).toString('base64')) };
  }
  fs.writeFileSync(a.fixture, zlib.gzipSync(JSON.stringify(sizes), { level: 9 }));
} else {
  for (const n of (a.sizes ?? '10,100,1000,5000').split(',').map(Number)) {
    const dir = path.join(a.out, `size-${n}`);
    fs.mkdirSync(dir, { recursive: true });
    const base = notebook(r, n, 20, 50);
    writeFrames(path.join(dir, 'base.bin'), [base]);
    writeFrames(path.join(dir, 'structural.bin'), structural(r, base, Number(a.edits ?? 300), 20, 50));
    writeFrames(path.join(dir, 'typing.bin'), typing(r, base, Number(a.keys ?? 1000)));
  }
}
// YNotebook's awareness keeps a timer alive
process.exit(0);
