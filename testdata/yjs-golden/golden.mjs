// Writes tiny, hand-checkable Yjs v1 updates for ystore/yjs golden tests:
// one case per content kind, Any tag, struct kind and delete-set shape.
// Usage: node golden.mjs <out-dir>
import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import { writeFileSync, mkdirSync } from 'node:fs'

const out = process.argv[2]
if (!out) throw new Error('usage: node golden.mjs <out-dir>')
mkdirSync(out, { recursive: true })

const hex = u => Buffer.from(u).toString('hex')

// doc makes a document with a fixed client id so the bytes are stable.
const doc = (clientID = 1) => {
  const d = new Y.Doc()
  d.clientID = clientID
  return d
}

const cases = []

// add records an update, the roots to read back (name -> kind) and what Yjs sees.
const add = (name, update, roots) => {
  const d = doc(999)
  Y.applyUpdate(d, update)
  const json = {}
  for (const [root, kind] of Object.entries(roots)) {
    const t = kind === 'map' ? d.getMap(root) : kind === 'array' ? d.getArray(root) : kind === 'text' ? d.getText(root) : d.getXmlFragment(root)
    json[root] = t.toJSON()
  }
  cases.push({
    name,
    update: hex(update),
    roots,
    json: JSON.parse(JSON.stringify(json, (k, v) => typeof v === 'bigint' ? { bigint: v.toString() } : v instanceof Uint8Array ? { bytes: Array.from(v) } : v)),
    state: hex(Y.encodeStateAsUpdate(d)),
    stateVector: hex(Y.encodeStateVector(d))
  })
}

// single runs f on a fresh document and records everything it produced as one update.
const single = (name, roots, f) => {
  const d = doc()
  f(d)
  add(name, Y.encodeStateAsUpdate(d), roots)
}

single('string', { t: 'text' }, d => d.getText('t').insert(0, 'hi'))
single('string-utf16', { t: 'text' }, d => d.getText('t').insert(0, 'a😀é\u0301'))
single('string-delete', { t: 'text' }, d => { d.getText('t').insert(0, 'abcdef'); d.getText('t').delete(1, 2) })
single('embed', { t: 'text' }, d => { d.getText('t').insert(0, 'ab'); d.getText('t').insertEmbed(1, { image: 'x.png' }) })
single('format', { t: 'text' }, d => { d.getText('t').insert(0, 'bold'); d.getText('t').format(0, 2, { bold: true }) })
single('binary', { m: 'map' }, d => d.getMap('m').set('b', new Uint8Array([1, 2, 255])))
single('doc', { m: 'map' }, d => d.getMap('m').set('sub', new Y.Doc({ guid: 'g1' })))
single('array-any', { a: 'array' }, d => d.getArray('a').insert(0, [1, 'two', null, true]))
single('types', { m: 'map' }, d => {
  const m = d.getMap('m')
  m.set('array', Y.Array.from([1]))
  m.set('map', new Y.Map([['k', 'v']]))
  m.set('text', new Y.Text('t'))
  const el = new Y.XmlElement('p')
  el.setAttribute('class', 'x')
  el.insert(0, [new Y.XmlText('inner')])
  m.set('element', el)
  m.set('fragment', new Y.XmlFragment())
  m.set('hook', new Y.XmlHook('h'))
  m.set('xmltext', new Y.XmlText('xt'))
})
single('xmltext-format', { f: 'xml' }, d => {
  const t = new Y.XmlText()
  d.getXmlFragment('f').insert(0, [t, new Y.XmlElement('hr')])
  t.insert(0, 'plain bold link', {})
  t.format(6, 4, { bold: true })
  t.format(6, 9, { a: { href: 'x', title: 2 } })
  t.insertEmbed(0, { img: 1 })
})
single('map-overwrite', { m: 'map' }, d => {
  d.getMap('m').set('k', 1)
  d.getMap('m').set('k', 2)
  d.getMap('m').set('gone', 3)
  d.getMap('m').delete('gone')
})
single('gc-nested', { m: 'map' }, d => {
  const arr = Y.Array.from(['x', 'y'])
  d.getMap('m').set('inner', arr)
  d.getMap('m').delete('inner')
})
for (const [tag, value] of [
  ['undefined', undefined], ['null', null], ['int', 42], ['int-negative', -7], ['int-negative-zero', -0],
  ['float32', 0.5], ['float64', 0.1], ['int-large', 2 ** 40], ['bigint', 2n ** 62n], ['false', false],
  ['true', true], ['string', 'ü'], ['object', { a: 1, b: [] }], ['array', [1, [2]]], ['uint8array', { u: new Uint8Array([7]) }]
]) {
  single('any-' + tag, { m: 'map' }, d => d.getMap('m').set('v', value))
}

// Two clients, concurrent inserts at the same position and a delete set over both.
{
  const a = doc(1)
  const b = doc(2)
  a.getText('t').insert(0, 'A')
  b.getText('t').insert(0, 'B')
  Y.applyUpdate(a, Y.encodeStateAsUpdate(b))
  Y.applyUpdate(b, Y.encodeStateAsUpdate(a))
  a.getText('t').delete(0, 2)
  add('concurrent-delete', Y.encodeStateAsUpdate(a), { t: 'text' })
}

// Skip structs: merging non-adjacent updates of one client.
{
  const d = doc()
  const ups = []
  d.on('update', u => ups.push(u))
  d.getArray('a').insert(0, [1])
  d.getArray('a').insert(1, [2])
  d.getArray('a').insert(2, [3])
  add('skip', Y.mergeUpdates([ups[0], ups[2]]), { a: 'array' })
}

// Hand-made structs Yjs reads but no longer writes: ContentJSON, and an explicit GC struct.
{
  const e = encoding.createEncoder()
  encoding.writeVarUint(e, 1) // one client
  encoding.writeVarUint(e, 2) // two structs
  encoding.writeVarUint(e, 5) // client 5
  encoding.writeVarUint(e, 0) // clock 0
  encoding.writeUint8(e, 0) // GC
  encoding.writeVarUint(e, 2) // of length 2
  encoding.writeUint8(e, 2) // item with ContentJSON, no origins
  encoding.writeVarUint(e, 1) // parent is a root
  encoding.writeVarString(e, 'a')
  encoding.writeVarUint(e, 3)
  encoding.writeVarString(e, '{"x":[1,2]}')
  encoding.writeVarString(e, 'undefined')
  encoding.writeVarString(e, '"s"')
  encoding.writeVarUint(e, 1) // delete set: one client
  encoding.writeVarUint(e, 5)
  encoding.writeVarUint(e, 1)
  encoding.writeVarUint(e, 3) // clock 3
  encoding.writeVarUint(e, 1) // length 1
  add('json-gc', encoding.toUint8Array(e), { a: 'array' })
}

// A sequence of updates for change reporting: nested types, keys, deletes.
{
  const d = doc(7)
  const ups = []
  d.on('update', u => ups.push(hex(u)))
  const m = d.getMap('m')
  d.transact(() => {
    const cell = new Y.Map()
    cell.set('source', new Y.Text('ab'))
    m.set('cell', cell)
    d.getArray('a').insert(0, [new Y.Map(), new Y.Map()])
  })
  m.get('cell').get('source').insert(2, 'c')
  m.get('cell').set('x', 1)
  d.getArray('a').get(1).set('y', 2)
  m.delete('cell')
  writeFileSync(out + '/changes.json', JSON.stringify(ups, null, 1) + '\n')
}

writeFileSync(out + '/golden.json', JSON.stringify(cases, null, 1) + '\n')
console.log(`wrote ${cases.length} cases to ${out}/golden.json`)
