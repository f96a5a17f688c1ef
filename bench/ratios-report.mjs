// ratios-report.mjs reads the JSON lines of bench/ratios.sh, keeps the fastest sample of
// every engine and workload, prints the ratios as a markdown table and exits 1 when one is
// short of its guard.
//
//   node bench/ratios-report.mjs bench/out/ratios.jsonl ROUNDS REPS
import fs from 'node:fs';
import os from 'node:os';

const [file, rounds, reps] = process.argv.slice(2);
const lines = fs.readFileSync(file, 'utf8').trim().split('\n').map(l => JSON.parse(l));
const loads = lines.filter(l => l.load).map(l => l.load);
const best = new Map();
for (const r of lines) {
  if (r.load || r.error) continue;
  const k = `${r.workload}\t${r.engine}`;
  if (!best.has(k) || r.cpuMs < best.get(k).cpuMs) best.set(k, r);
}
const find = (workload, engine) => [...best.values()].find(r => r.workload === workload && r.engine.startsWith(engine));

// each row: the measured engine, the other engine, and the least ratio that passes
const rows = [
  ['history', 'go ystore/yjs', 'pycrdt@', 2.5],
  ['history', 'go ystore/yjs', 'ywasm@', 2],
  ['history', 'go ystore/yjs', 'yjs@'],
  ['corpus', 'go ynotebook.Apply', '@jupyter/ydoc', 3],
  ['corpus', 'go ystore/yjs', 'pycrdt@'],
  ['corpus', 'go ystore/yjs', 'ywasm@'],
  ['corpus', 'go ystore/yjs', 'yjs@'],
  ['sessions', 'go ystore/yjs', 'pycrdt@', 2.5],
  ['sessions-ywasm', 'go ystore/yjs', 'ywasm@', 2],
  ['sessions-ywasm', 'go ystore/yjs', 'pycrdt@'],
  ['sessions', 'go ystore/yjs', 'yjs@'],
];
const names = {
  history: "one notebook's history",
  corpus: '20 rooms',
  sessions: 'recorded sessions, 20 rooms',
  'sessions-ywasm': 'recorded sessions ywasm reads, 20 rooms',
};
const out = [
  `load average ${loads.join(' → ')}; ${os.cpus().length} × ${os.cpus()[0].model}; CPU time, the fastest of ${rounds} rounds × ${reps} repetitions`,
  '',
  '| workload | Go | µs/update | against | µs/update | Go faster by | guard |',
  '|---|---|---|---|---|---|---|',
];
const failed = [];
for (const [workload, mine, other, guard] of rows) {
  const a = find(workload, mine);
  const b = find(workload, other);
  if (!a || !b) {
    failed.push(`${mine} or ${other} on ${workload}: no measurement`);
    continue;
  }
  const ratio = b.cpuMs / a.cpuMs;
  let verdict = '';
  if (guard !== undefined) {
    verdict = ratio >= guard ? `≥ ${guard}×: met` : `≥ ${guard}×: **FAILED**`;
    if (ratio < guard) failed.push(`${mine} is ${ratio.toFixed(2)}× ${b.engine} on ${names[workload]}, the guard is ${guard}×`);
  }
  const us = r => (r.nsPerUpdate / 1e3).toFixed(2);
  out.push(`| ${names[workload]} (${a.updates} updates) | ${a.engine} | ${us(a)} | ${b.engine} | ${us(b)} | **${ratio.toFixed(2)}×** | ${verdict} |`);
}
console.log(out.join('\n'));
if (failed.length > 0) {
  console.error(`\nratios.sh: ${failed.length} guard(s) not met:\n  ${failed.join('\n  ')}`);
  process.exit(1);
}
