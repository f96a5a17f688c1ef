// Generates seeded random Yjs editing sessions for ystore/yjs differential tests:
// 2-4 clients edit a Y.Text, a Y.Array and a Y.Map (with nested types, emoji and
// combining characters, deletes, map overwrites) concurrently and sync at random points.
// Every local update is recorded in emission order with the final doc.toJSON(), JSON
// checkpoints of update prefixes, Y.mergeUpdates of all updates, and for each update the
// types its transaction changed (transaction.changed: path, map keys, sequence), also
// for one shuffled delivery order, and the states Yjs encodes after replaying the updates.
// Usage: node sessions.mjs <out.json.gz> [sessions]
import * as Y from 'yjs'
import { writeFileSync } from 'node:fs'
import { gzipSync } from 'node:zlib'

const out = process.argv[2]
const count = Number(process.argv[3] || 300)
if (!out) throw new Error('usage: node sessions.mjs <out.json.gz> [sessions]')

// mulberry32: a small deterministic PRNG.
const prng = seed => () => {
  seed |= 0
  seed = (seed + 0x6D2B79F5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const pieces = ['a', 'b', 'c', 'xyz', ' ', '\n', 'ß', 'é', 'e\u0301', '😀', '👩‍👩‍👧', '🇫🇷', '中文', 'ab😀cd']

// canonical stringifies with sorted object keys (map key order differs between clients).
const canonical = v => JSON.stringify(v, (k, x) => x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)) : x)

const json = d => ({ t: d.getText('t').toJSON(), a: d.getArray('a').toJSON(), m: d.getMap('m').toJSON() })

// pathOf names a type by its root and the map keys / array indexes leading to it.
const pathOf = (doc, type) => {
  const path = []
  while (type._item !== null) {
    const it = type._item
    if (it.parentSub !== null) {
      path.unshift(it.parentSub)
    } else {
      let i = 0
      for (let n = it.parent._start; n !== it; n = n.right) if (!n.deleted && n.countable) i += n.length
      path.unshift(i)
    }
    type = it.parent
  }
  for (const [name, t] of doc.share) if (t === type) path.unshift(name)
  return path
}

const session = seed => {
  const rnd = prng(seed + 1)
  const int = n => Math.floor(rnd() * n)
  const pick = xs => xs[int(xs.length)]
  const str = () => { let s = ''; for (let i = 1 + int(3); i > 0; i--) s += pick(pieces); return s }
  const value = depth => {
    switch (int(depth > 1 ? 6 : 9)) {
      case 0: return int(1000) - 500
      case 1: return rnd() * 100
      case 2: return str()
      case 3: return { k: str(), n: [int(10), null, true] }
      case 4: return null
      case 5: return [str(), int(5)]
      case 6: return new Y.Text(str())
      case 7: { const a = new Y.Array(); a.insert(0, [value(depth + 1)]); return a }
      default: { const m = new Y.Map(); m.set('x', value(depth + 1)); return m }
    }
  }
  const clients = 2 + int(3)
  const docs = []
  const updates = []
  for (let i = 0; i < clients; i++) {
    const d = new Y.Doc()
    d.clientID = 1 + int(2 ** 31)
    d.on('update', (u, origin) => { if (origin !== 'remote') updates.push(u) })
    docs.push(d)
  }
  // nested collects the nested types reachable in d.
  const nested = d => {
    const found = []
    const walk = v => {
      if (v instanceof Y.Text) found.push(v)
      else if (v instanceof Y.Array) { found.push(v); v.toArray().forEach(walk) }
      else if (v instanceof Y.Map) { found.push(v); v.forEach(walk) }
    }
    d.getArray('a').toArray().forEach(walk)
    d.getMap('m').forEach(walk)
    return found
  }
  const edit = (d, t) => {
    if (t instanceof Y.Text) {
      const len = t.length
      const r = int(10)
      if (r < 6 || len === 0) t.insert(int(len + 1), str())
      else if (r < 9) { const p = int(len); t.delete(p, 1 + int(Math.min(5, len - p))) }
      else t.format(int(len), 1, { bold: true })
    } else if (t instanceof Y.Array) {
      const len = t.length
      if (int(3) < 2 || len === 0) t.insert(int(len + 1), [value(0)])
      else { const p = int(len); t.delete(p, 1 + int(Math.min(2, len - p))) }
    } else {
      const k = 'k' + int(5)
      if (int(4) < 3) t.set(k, value(0))
      else t.delete(k)
    }
  }
  const sync = (a, b) => Y.applyUpdate(b, Y.encodeStateAsUpdate(a, Y.encodeStateVector(b)), 'remote')
  const ops = 20 + int(60)
  for (let i = 0; i < ops; i++) {
    const d = pick(docs)
    const r = int(10)
    if (r < 2) {
      sync(pick(docs), d)
      continue
    }
    const targets = [d.getText('t'), d.getArray('a'), d.getMap('m'), ...nested(d)]
    if (r < 3) d.transact(() => { for (let j = 0; j < 3; j++) edit(d, pick(targets)) })
    else edit(d, pick(targets))
  }
  for (let round = 0; round < 2; round++) for (const a of docs) for (const b of docs) if (a !== b) sync(a, b)
  const final = json(docs[0])
  const replayed = order => {
    const replay = new Y.Doc()
    let changes = []
    const record = tr => {
      // Y.Text's formatting cleanup edits the replica in transactions of its own; after
      // that its change reports no longer describe the updates alone, so none are kept.
      if (tr.origin !== 'replay') {
        changes = null
        return
      }
      if (changes === null) return
      const cs = []
      tr.changed.forEach((subs, type) => {
        const keys = [...subs].filter(k => k !== null).sort()
        cs.push({ path: pathOf(replay, type), keys, seq: subs.has(null) })
      })
      changes.push(cs)
    }
    replay.on('afterTransaction', record)
    order.forEach(i => Y.applyUpdate(replay, updates[i], 'replay'))
    replay.off('afterTransaction', record)
    return { replay, changes }
  }
  const { replay, changes } = replayed(updates.map((_, i) => i))
  // A shuffled delivery (pending structs and deletes) and what Yjs reports for it.
  const order = updates.map((_, i) => i)
  for (let i = order.length - 1; i > 0; i--) {
    const j = int(i + 1);
    [order[i], order[j]] = [order[j], order[i]]
  }
  const shuffled = replayed(order)
  // Yjs itself is not always consistent when a surrogate pair is split (yjs#248): the
  // clients, or a fresh replay of the updates, can end up with different U+FFFD. Such
  // sessions say nothing about delivery order and are skipped.
  if ([replay, shuffled.replay, ...docs].some(d => canonical(json(d)) !== canonical(final))) return null
  const checkpoints = []
  for (let k = 1; k <= 3; k++) {
    const after = int(updates.length + 1)
    const d = new Y.Doc()
    updates.slice(0, after).forEach(u => Y.applyUpdate(d, u))
    checkpoints.push({ after, json: json(d) })
  }
  const b64 = u => Buffer.from(u).toString('base64')
  return { seed, updates: updates.map(b64), merged: b64(Y.mergeUpdates(updates)), checkpoints, json: final, changes, shuffled: { order, changes: shuffled.changes, state: shuffled.changes === null ? null : b64(Y.encodeStateAsUpdate(shuffled.replay)) }, state: changes === null ? null : b64(Y.encodeStateAsUpdate(replay)) }
}

const sessions = []
for (let s = 0; sessions.length < count; s++) {
  const x = session(s)
  if (x !== null) sessions.push(x)
}
writeFileSync(out, gzipSync(JSON.stringify(sessions)))
console.log(`wrote ${sessions.length} sessions, ${sessions.reduce((n, s) => n + s.updates.length, 0)} updates to ${out}`)
