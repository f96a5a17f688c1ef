// Writes sidecar/e2e/testdata/events.json: Yjs updates made by @jupyter/ydoc's YNotebook
// for the change-event tests (sidecar/e2e/mcp/events_test.go). The updates name no room, so
// the tests write the same ones into many rooms (one notebook each).
// Run: node gen-events.mjs > ../../sidecar/e2e/testdata/events.json
import './quiet-prelim.mjs';
import * as Y from 'yjs';
import { YNotebook } from '@jupyter/ydoc';

const nb = new YNotebook();
nb.ydoc.clientID = 314159; // fixed, so that the output is the same on every run
nb.fromJSON({
  nbformat: 4, nbformat_minor: 5, metadata: {},
  cells: [
    { id: 'c1', cell_type: 'code', execution_count: 1, metadata: {}, source: 'print(1)',
      outputs: [{ output_type: 'stream', name: 'stdout', text: '1\n' }] },
    { id: 'c2', cell_type: 'markdown', metadata: {}, source: '# Notes' },
  ],
});
const b64 = (u) => Buffer.from(u).toString('base64');
const initial = b64(Y.encodeStateAsUpdate(nb.ydoc));

// edits: each is the update one change produces, applied in order after initial.
const edits = [];
const record = (name, fn) => {
  const sv = Y.encodeStateVector(nb.ydoc);
  fn();
  edits.push({ name, update: b64(Y.encodeStateAsUpdate(nb.ydoc, sv)) });
};
record('source-c1', () => nb.cells[0].updateSource(0, nb.cells[0].source.length, 'print(2)'));
record('output-c1-0', () => nb.cells[0].updateOutputs(0, 1, [{ output_type: 'stream', name: 'stdout', text: '2\n' }]));
const addCell = (id, source) => nb.insertCell(nb.cells.length, { id, cell_type: 'code', source, metadata: {}, outputs: [], execution_count: null });
for (let i = 0; i < 10; i++) {
  record(`add-e${i}`, () => addCell(`e${i}`, `x = ${i}`));
}
// add-bulk: 200 cells in one update, an event larger than one Postgres NOTIFY payload.
record('add-bulk', () => nb.transact(() => {
  for (let i = 0; i < 200; i++) addCell(`bulk-${String(i).padStart(3, '0')}-${'b'.repeat(32)}`, `y = ${i}`);
}));

process.stdout.write(JSON.stringify({ initial, edits }, null, 1) + '\n', () => process.exit(0));
