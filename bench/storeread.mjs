// storeread.mjs: the yjs counterpart of TestInspectMemory (bench/inspect_test.go): one
// Y.Doc per room, each loaded from its room's updates (the room's frames file, read one
// room at a time), all held at the end, as a reader of the whole store holds its rooms.
// Prints one JSON line: rooms, rows, the cells and JSON bytes of the live content, the
// live heap after gc() and the process's peak RSS (what the Go test compares).
//
//   node --expose-gc bench/storeread.mjs ROOM.bin...
import { readFrames } from '../testdata/ysessions/seeded.mjs';

const modules = new URL('../testdata/ysessions/node_modules/', import.meta.url);
const Y = await import(new URL('yjs/dist/yjs.mjs', modules));

global.gc();
const base = process.memoryUsage().heapUsed;
const docs = [];
let rows = 0;
for (const file of process.argv.slice(2)) {
  const d = new Y.Doc();
  for (const u of readFrames(file)) {
    Y.applyUpdate(d, u);
    rows++;
  }
  docs.push(d);
}
global.gc();
const heap = process.memoryUsage().heapUsed - base;
let cells = 0;
let json = 0;
for (const d of docs) {
  cells += d.getArray('cells').length;
  json += JSON.stringify({ cells: d.getArray('cells').toJSON(), meta: d.getMap('meta').toJSON() }).length;
}
console.log(JSON.stringify({ rooms: docs.length, rows, cells, json, heap, maxrss: process.resourceUsage().maxRSS * 1024 }));
