// notebook-report.mjs turns the JSON lines of bench/notebook.sh into markdown tables: per
// workload and size the CPU time per update of every engine and the ratios the notebook
// layer is held to, the corpus with live heaps, and cold load.
import fs from 'node:fs';
import os from 'node:os';

const rows = fs.readFileSync(process.argv[2], 'utf8').trim().split('\n').map(l => JSON.parse(l));
const find = (engine, workload, cells) => rows.find(r => r.engine.startsWith(engine) && r.workload === workload && (cells === undefined || r.cells === cells));
const us = r => (!r ? '—' : r.error ? `fails (${r.error.split('\n')[0].slice(0, 60)})` : (r.nsPerUpdate / 1e3).toFixed(2));
const ratio = (a, b) => (!a || !b || a.error || b.error ? '—' : (a.nsPerUpdate / b.nsPerUpdate).toFixed(2) + '×');

const engines = ['go ystore/yjs', 'go ynotebook.Apply', 'go ynotebook.Apply+Snapshot', 'yjs@', '@jupyter/ydoc', 'ywasm@'];
const names = engines.map(e => rows.find(r => r.engine.startsWith(e))?.engine ?? e);
const lines = [`${os.cpus().length} × ${os.cpus()[0].model}, node ${process.version}; CPU time per update in µs (fastest repetition)`, ''];
for (const workload of ['structural', 'typing']) {
  lines.push(`### ${workload}`, '');
  lines.push(`| cells | ${names.join(' | ')} | Apply / engine | YNotebook / Apply | YNotebook / Apply+Snapshot |`);
  lines.push(`|---|${names.map(() => '---').join('|')}|---|---|---|`);
  const sizes = [...new Set(rows.filter(r => r.workload === workload).map(r => r.cells))].sort((a, b) => a - b);
  for (const n of sizes) {
    const rs = engines.map(e => find(e, workload, n));
    lines.push(`| ${n} | ${rs.map(us).join(' | ')} | ${ratio(rs[1], rs[0])} | ${ratio(rs[4], rs[1])} | ${ratio(rs[4], rs[2])} |`);
  }
  lines.push('');
}
lines.push('### corpus: 20 notebooks held at once', '');
lines.push('| engine | updates | CPU ms | µs/update | YNotebook / this | live heap MB | heap / yjs |', '|---|---|---|---|---|---|---|');
const ydoc = find('@jupyter/ydoc', 'corpus');
const yjsRow = find('yjs@', 'corpus');
for (const e of engines) {
  const r = find(e, 'corpus');
  if (!r) continue;
  if (r.error) {
    lines.push(`| ${r.engine} | ${r.updates} | fails: ${r.error.split('\n')[0].slice(0, 80)} | | | | |`);
    continue;
  }
  lines.push(`| ${r.engine} | ${r.updates} | ${r.cpuMs.toFixed(0)} | ${us(r)} | ${ratio(ydoc, r)} | ${r.liveMB.toFixed(1)} | ${(r.liveMB / yjsRow.liveMB).toFixed(2)} |`);
}
const before = find('go ynotebook.Apply', 'corpus');
const after = find('go ynotebook.Load', 'load');
if (before && after) {
  lines.push('', `cold load of the corpus (20 rooms, no checkpoints): ynotebook.Apply per row ${before.cpuMs.toFixed(0)} ms, ynotebook.Load per room ${after.cpuMs.toFixed(0)} ms (${ratio(before, after)} faster)`);
}
console.log(lines.join('\n'));
