// Writes resources/testdata/notebooks.json: Yjs updates made by @jupyter/ydoc's YNotebook
// (the model jupyter-collaboration stores), used by the resources tests to build real
// ynotebook snapshots. Run: node gen-notebooks.mjs > ../../resources/testdata/notebooks.json
import './quiet-prelim.mjs';
import * as Y from 'yjs';
import { YNotebook } from '@jupyter/ydoc';

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

const notebook = {
  nbformat: 4,
  nbformat_minor: 5,
  metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
  cells: [
    {
      id: 'c1', cell_type: 'code', execution_count: 1, metadata: {}, source: "print('hello')\nplot()",
      outputs: [
        { output_type: 'stream', name: 'stdout', text: 'hello\n' },
        { output_type: 'display_data', data: { 'image/png': PNG, 'text/plain': '<Figure size 640x480 with 1 Axes>' }, metadata: {} },
        { output_type: 'execute_result', execution_count: 1, data: { 'text/html': '<b>42</b>', 'text/plain': '42' }, metadata: {} },
      ],
    },
    { id: 'c2', cell_type: 'markdown', metadata: {}, source: '# Title' },
    {
      id: 'c3', cell_type: 'code', execution_count: 2, metadata: { tags: ['boom'] }, source: '1/0',
      outputs: [{ output_type: 'error', ename: 'ZeroDivisionError', evalue: 'division by zero', traceback: ['Traceback (most recent call last)', 'ZeroDivisionError: division by zero'] }],
    },
    {
      id: 'c4', cell_type: 'code', execution_count: 3, metadata: {}, source: 'data',
      outputs: [{ output_type: 'execute_result', execution_count: 3, data: { 'application/json': { a: 1 }, 'text/plain': "{'a': 1}" }, metadata: {} }],
    },
  ],
};

const b64 = (u) => Buffer.from(u).toString('base64');

const nb = new YNotebook();
nb.ydoc.clientID = 271828; // fixed, so that the output is the same on every run
nb.fromJSON(notebook);
const initial = Y.encodeStateAsUpdate(nb.ydoc);

// edits: each is the update one change produces, applied in order after initial.
const edits = [];
const record = (name, fn) => {
  const sv = Y.encodeStateVector(nb.ydoc);
  fn();
  edits.push({ name, update: b64(Y.encodeStateAsUpdate(nb.ydoc, sv)) });
};
record('source-c1', () => nb.cells[0].updateSource(0, nb.cells[0].source.length, "print('hello, world')"));
record('output-c1-0', () => nb.cells[0].updateOutputs(0, 1, [{ output_type: 'stream', name: 'stdout', text: 'hello, world\n' }]));
record('add-c5', () => nb.insertCell(4, { id: 'c5', cell_type: 'code', source: 'x = 1', metadata: {}, outputs: [], execution_count: null }));
record('remove-c2', () => nb.deleteCell(1));

process.stdout.write(JSON.stringify({ initial: b64(initial), edits }, null, 1) + '\n', () => process.exit(0));
