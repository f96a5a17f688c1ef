// cases.mjs writes the small hand-made documents behind the table tests of
// ystore/ynotebook: each case is a list of updates (one per transaction) and, when
// YNotebook can render the result, its toJSON().
//
//   node cases.mjs > ../../ystore/ynotebook/testdata/cases.json
import * as Y from 'yjs';
import { YNotebook } from '@jupyter/ydoc';

console.warn = () => {}; // @jupyter/ydoc reads its preliminary types while building cells

const cases = [];

// record runs steps on a fresh document, one transaction each, and stores the updates.
function record(name, steps, { yjsRenders = true } = {}) {
  const nb = new YNotebook();
  nb.ydoc.clientID = 7;
  const updates = [];
  nb.ydoc.on('update', u => updates.push(Buffer.from(u).toString('base64')));
  for (const step of steps) {
    try {
      nb.ydoc.transact(() => step(nb, nb.ydoc));
    } catch (e) {
      // YNotebook's own observer refuses what it cannot model; the update is made
      if (yjsRenders) throw e;
    }
  }
  let notebook = null;
  if (yjsRenders) {
    const fresh = new YNotebook();
    Y.applyUpdate(fresh.ydoc, Y.mergeUpdates(updates.map(u => Buffer.from(u, 'base64'))));
    notebook = JSON.parse(JSON.stringify(fresh.toJSON()));
  }
  cases.push({ name, updates, notebook });
}

// base writes a three-cell notebook; for nbformat 4.4 the minor version is set after, as
// YNotebook would draw random ids for the cells otherwise.
const base = (minor = 5) => nb => {
  nb.fromJSON({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
    cells: [
      { id: 'md', cell_type: 'markdown', source: '# Title', metadata: {} },
      { id: 'code', cell_type: 'code', source: 'print(1)', metadata: { tags: ['a'] }, outputs: [], execution_count: null },
      { id: 'raw', cell_type: 'raw', source: 'raw text', metadata: {} },
    ],
  });
  nb.nbformat_minor = minor;
};
const cell = (nb, i) => nb.cells[i];

record('empty', []);
record('create', [base()]);
record('nbformat-4.4-prunes-ids', [base(4)]);
record('type-source', [base(), nb => cell(nb, 1).updateSource(5, 5, 'é😀'), nb => cell(nb, 1).updateSource(0, 1, '')]);
record('execution-count-zero-is-kept', [base(), nb => { cell(nb, 1).execution_count = 0; }, nb => { cell(nb, 1).execution_count = 3; }]);
record('execution-state-is-invisible', [base(), nb => { cell(nb, 1).executionState = 'busy'; }]);
record('state-is-invisible', [base(), nb => { nb.dirty = true; nb.setState('path', 'a/b.ipynb'); }]);
record('stream-grows', [
  base(),
  nb => cell(nb, 1).setOutputs([{ output_type: 'execute_result', execution_count: 1, data: { 'text/plain': '1' }, metadata: {} }, { output_type: 'stream', name: 'stdout', text: 'a\n' }]),
  nb => cell(nb, 1).appendStreamOutput(1, 'b\n'),
  nb => cell(nb, 1).clearOutputs(),
]);
record('attachments', [
  base(),
  nb => cell(nb, 0).setAttachments({ 'a.png': { 'image/png': 'iVBORw0KGgo=' } }),
  nb => cell(nb, 2).setAttachments({ 'b.txt': { 'text/plain': 'x' } }),
  nb => cell(nb, 0).setAttachments(null),
]);
record('move-delete-insert', [
  base(),
  nb => nb.moveCell(0, 2),
  nb => nb.deleteCell(1),
  nb => nb.insertCell(0, { id: 'new', cell_type: 'code', source: 'x', metadata: {} }),
]);
record('notebook-metadata', [base(), nb => nb.setMetadata('title', 'T'), nb => nb.deleteMetadata('kernelspec'), (nb, doc) => doc.getMap('meta').set('nbformat_minor', 4)]);
record('cell-metadata', [base(), nb => cell(nb, 1).setMetadata('collapsed', true), nb => cell(nb, 1).deleteMetadata('tags')]);
record('undefined-and-bytes', [
  base(),
  (nb, doc) => {
    const md = doc.getArray('cells').get(1).get('metadata');
    md.set('gone', undefined);
    md.set('bytes', new Uint8Array([1, 2, 255]));
    md.set('list', [1, undefined, 'x']);
  },
]);
record('legacy-plain-outputs', [
  (nb, doc) => {
    const meta = doc.getMap('meta');
    meta.set('nbformat', 4);
    meta.set('nbformat_minor', 5);
    meta.set('metadata', new Y.Map());
    const c = new Y.Map();
    c.set('id', 'legacy');
    c.set('cell_type', 'code');
    c.set('source', new Y.Text('print("hi")'));
    c.set('metadata', new Y.Map());
    c.set('execution_count', 1);
    c.set('outputs', Y.Array.from([{ output_type: 'stream', name: 'stdout', text: 'hi\n' }]));
    doc.getArray('cells').insert(0, [c]);
  },
  (nb, doc) => {
    const outs = doc.getArray('cells').get(0).get('outputs');
    outs.delete(0, 1);
    outs.insert(0, [{ output_type: 'stream', name: 'stdout', text: 'hi\nhi\n' }]);
  },
]);
record('unknown-cell-type-and-missing-keys', [
  base(),
  (nb, doc) => {
    const c = new Y.Map();
    c.set('cell_type', 'mystery');
    c.set('source', new Y.Text('?'));
    const d = new Y.Map();
    d.set('cell_type', 'code');
    d.set('source', 'plain string source');
    doc.getArray('cells').insert(3, [c, d]);
  },
], { yjsRenders: false });

process.stdout.write(JSON.stringify(cases, null, 1) + '\n', () => process.exit(0));
