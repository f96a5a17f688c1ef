// Checks Go-encoded states in real Yjs: reads [{name, state (base64 v1 update), json}]
// from the file given and exits 1 unless applying each state to a fresh Y.Doc yields the
// expected JSON for roots t (text), a (array) and m (map).
// Usage: node roundtrip.mjs <cases.json>
import * as Y from 'yjs'
import { readFileSync } from 'node:fs'

// canonical stringifies with sorted object keys.
const canonical = v => JSON.stringify(v, (k, x) => x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)) : x)

const cases = JSON.parse(readFileSync(process.argv[2], 'utf8'))
let failed = 0
for (const c of cases) {
  const d = new Y.Doc()
  Y.applyUpdate(d, Buffer.from(c.state, 'base64'))
  const got = canonical({ t: d.getText('t').toJSON(), a: d.getArray('a').toJSON(), m: d.getMap('m').toJSON() })
  const want = canonical(c.json)
  if (got !== want || d.store.pendingStructs !== null || d.store.pendingDs !== null) {
    failed++
    console.error(`${c.name}: yjs got ${got}\nwant ${want}\npending structs ${d.store.pendingStructs !== null} deletes ${d.store.pendingDs !== null}`)
  }
}
console.log(`${cases.length - failed}/${cases.length} round trips equal`)
process.exit(failed > 0 ? 1 : 0)
