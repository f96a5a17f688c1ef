// seeded.mjs holds what the Node scripts that write fixtures and benchmark workloads share:
// a seeded random generator (deterministic output, never Math.random), their argument
// parsing and the frame format of update files.
import fs from 'node:fs';

// mulberry32 returns a generator of floats in [0, 1) from a 32-bit seed.
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Rand is a seeded generator of the choices a script makes.
export class Rand {
  constructor(seed) {
    this.next = mulberry32(seed);
  }
  int(n) {
    return Math.floor(this.next() * n);
  }
  range(lo, hi) {
    return lo + this.int(hi - lo + 1);
  }
  chance(p) {
    return this.next() < p;
  }
  pick(xs) {
    return xs[this.int(xs.length)];
  }
  weighted(table) {
    const total = table.reduce((s, [w]) => s + w, 0);
    let r = this.next() * total;
    for (const [w, v] of table) {
      if ((r -= w) < 0) return v;
    }
    return table[table.length - 1][1];
  }
  hex(n) {
    let s = '';
    for (let i = 0; i < n; i++) s += '0123456789abcdef'[this.int(16)];
    return s;
  }
  uuid() {
    return `${this.hex(8)}-${this.hex(4)}-4${this.hex(3)}-a${this.hex(3)}-${this.hex(12)}`;
  }
  clientID() {
    return this.int(0x7fffffff) + 1;
  }
  bytes(n) {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
}

// readFrames reads a file written by writeFrames.
export function readFrames(file) {
  const buf = fs.readFileSync(file);
  const frames = [];
  for (let off = 0; off < buf.length; ) {
    const n = buf.readUInt32LE(off);
    frames.push(new Uint8Array(buf.buffer, buf.byteOffset + off + 4, n));
    off += 4 + n;
  }
  return frames;
}

// writeFrames writes updates as u32le length-prefixed frames.
export function writeFrames(file, frames) {
  const parts = [];
  for (const f of frames) {
    const len = Buffer.alloc(4);
    len.writeUInt32LE(f.length);
    parts.push(len, Buffer.from(f));
  }
  fs.writeFileSync(file, Buffer.concat(parts));
}

// args parses --key value pairs; a --key followed by another or by nothing is true.
export function args(argv) {
  const a = {};
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '');
    if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) a[k] = argv[++i];
    else a[k] = true;
  }
  return a;
}
