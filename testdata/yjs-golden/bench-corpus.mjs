// Generates a realistic notebook editing history for ystore/yjs benchmarks: three
// clients type into cell sources (Y.Text, the jupyter_ydoc layout), execute cells
// (execution_count, outputs with stream text), add and delete cells, and sync every few
// updates. Writes the local updates, each prefixed with its varuint length, gzipped.
// Usage: node bench-corpus.mjs <out-prefix> [updates]
import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import { writeFileSync } from 'node:fs'
import { gzipSync } from 'node:zlib'

const prefix = process.argv[2]
const total = Number(process.argv[3] || 100000)
if (!prefix) throw new Error('usage: node bench-corpus.mjs <out-prefix> [updates]')

let seed = 42
const rnd = () => {
  seed = (seed + 0x6D2B79F5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const int = n => Math.floor(rnd() * n)

const updates = []
const docs = [1, 2, 3].map(id => {
  const d = new Y.Doc()
  d.clientID = id * 1000003
  d.on('update', (u, origin) => { if (origin !== 'remote') updates.push(u) })
  return d
})
const sync = (a, b) => Y.applyUpdate(b, Y.encodeStateAsUpdate(a, Y.encodeStateVector(b)), 'remote')

const newCell = n => {
  const c = new Y.Map()
  c.set('id', 'cell-' + n)
  c.set('cell_type', 'code')
  c.set('source', new Y.Text())
  c.set('metadata', new Y.Map())
  c.set('outputs', new Y.Array())
  c.set('execution_count', null)
  return c
}
docs[0].transact(() => {
  const meta = docs[0].getMap('meta')
  meta.set('nbformat', 4)
  meta.set('nbformat_minor', 5)
  const md = new Y.Map()
  md.set('kernelspec', { name: 'python3', display_name: 'Python 3' })
  meta.set('metadata', md)
  docs[0].getArray('cells').push([newCell(0)])
})
for (const d of docs.slice(1)) sync(docs[0], d)

const words = ['import ', 'numpy ', 'as np', '\n', 'df', '.head()', 'print(', ')', ' = ', 'for i in range(10):', '    ', '# comment ', 'λ', '😀']
let cellN = 1
const cursor = new Map()
while (updates.length < total) {
  const i = int(docs.length)
  const d = docs[i]
  const cells = d.getArray('cells')
  const r = rnd()
  if (cells.length === 0 || r < 0.01) {
    cells.insert(int(cells.length + 1), [newCell(cellN++)])
  } else if (r < 0.013 && cells.length > 3) {
    cells.delete(int(cells.length))
  } else if (r < 0.04) {
    const c = cells.get(int(cells.length))
    d.transact(() => {
      c.set('execution_count', int(100))
      const outs = c.get('outputs')
      if (outs.length > 0) outs.delete(0, outs.length)
      const o = new Y.Map()
      o.set('output_type', 'stream')
      o.set('name', 'stdout')
      o.set('text', new Y.Text('out ' + int(1000) + '\n'))
      outs.push([o])
    })
  } else if (r < 0.05) {
    const c = cells.get(int(cells.length))
    const outs = c.get('outputs')
    if (outs.length > 0 && outs.get(0).get('text')) outs.get(0).get('text').insert(outs.get(0).get('text').length, 'more ' + int(10) + '\n')
  } else {
    // Typing: mostly at the client's cursor in its current cell, one word per update.
    let cur = cursor.get(i)
    if (!cur || rnd() < 0.02 || cur.cell >= cells.length) cur = { cell: int(cells.length), pos: -1 }
    const src = cells.get(cur.cell).get('source')
    if (cur.pos < 0 || cur.pos > src.length) cur.pos = src.length
    if (rnd() < 0.1 && cur.pos > 0) {
      // Backspace deletes a whole code point, like an editor does.
      const c = src.toString().charCodeAt(cur.pos - 1)
      const n = c >= 0xDC00 && c <= 0xDFFF && cur.pos > 1 ? 2 : 1
      src.delete(cur.pos - n, n)
      cur.pos -= n
    } else {
      const w = words[int(words.length)]
      for (const ch of w) {
        if (updates.length >= total) break
        src.insert(cur.pos, ch)
        cur.pos += ch.length
      }
    }
    cursor.set(i, cur)
  }
  if (rnd() < 0.2) sync(d, docs[int(docs.length)])
}
updates.length = total
const e = encoding.createEncoder()
for (const u of updates) encoding.writeVarUint8Array(e, u)
writeFileSync(prefix + '.bin.gz', gzipSync(encoding.toUint8Array(e)))
// What the engine must read from it is pycrdt's reading (the Jupyter server's engine), not
// Yjs's: testdata/pycrdt-golden/differential.py corpus writes it beside the corpus.
console.log(`wrote ${updates.length} updates, ${updates.reduce((n, u) => n + u.length, 0)} bytes`)
