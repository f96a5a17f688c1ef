// sessions.mjs writes the real-session workloads of bench/ratios.sh from the recorded
// sessions of testdata/ysessions/fixtures (real yjs and @jupyter/ydoc clients, two to four
// replicas of a notebook typing emoji and CJK, cutting surrogate pairs, moving cells,
// setting metadata, writing stream, image and error outputs): the sessions merged per
// room, every update in the order it was made.
//
//   node bench/sessions.mjs --out DIR
//     DIR/sessions/room-NN.bin        all sessions, session i in room i mod 20
//     DIR/sessions-ywasm/room-NN.bin  the sessions ywasm reads (it panics on a cut
//                                     surrogate pair), spread over 20 rooms alike
//
// Files are u32le length-prefixed frames (seeded.mjs). A panic may leave ywasm's module
// unusable, so the rooms of the sessions it read are read once more, in a fresh process,
// to know the workload good.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { args, readFrames, writeFrames } from '../testdata/ysessions/seeded.mjs';

const ROOMS = Number(process.env.ROOMS ?? 20);
const self = fileURLToPath(import.meta.url);
const fixtures = fileURLToPath(new URL('../testdata/ysessions/fixtures/', import.meta.url));

const ywasm = createRequire(new URL('../testdata/ysessions/package.json', import.meta.url))('ywasm');

// ywasmReads applies the updates of a room to a fresh ywasm document and reports whether
// none threw.
function ywasmReads(updates) {
  try {
    const doc = new ywasm.YDoc({});
    for (const u of updates) ywasm.applyUpdate(doc, u, null);
    return true;
  } catch {
    return false;
  }
}

function writeRooms(dir, sessions) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const files = [];
  for (let k = 0; k < ROOMS; k++) {
    const updates = sessions.filter((_, i) => i % ROOMS === k).flat();
    const file = path.join(dir, `room-${String(k + 1).padStart(2, '0')}.bin`);
    writeFrames(file, updates);
    files.push(file);
  }
  return files;
}

const a = args(process.argv.slice(2));
if (a.check) {
  // the child: every room named reads
  process.exit(a.check.split(',').every(f => ywasmReads(readFrames(f))) ? 0 : 1);
}
const names = fs.readdirSync(fixtures).filter(f => /^s\d+\.json\.gz$/.test(f)).sort();
const sessions = names.map(f => {
  const rec = JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(fixtures, f))));
  return rec.updates.map(u => Buffer.from(u.update, 'base64'));
});
writeRooms(path.join(a.out, 'sessions'), sessions);

// ywasm's verdict per session, then on the rooms it makes, in a fresh process
const readable = sessions.filter(ywasmReads);
const rooms = writeRooms(path.join(a.out, 'sessions-ywasm'), readable);
const check = spawnSync(process.execPath, [self, '--check', rooms.join(',')], { stdio: 'inherit' });
if (check.status !== 0) {
  console.error('sessions.mjs: ywasm reads every session of a room alone but not the room');
  process.exit(1);
}
console.error(`sessions.mjs: ${sessions.length} sessions (${sessions.flat().length} updates); ywasm reads ${readable.length} (${readable.flat().length} updates)`);
