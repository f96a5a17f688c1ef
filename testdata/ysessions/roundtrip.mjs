// roundtrip.mjs reads JSON lines {"name", "update": base64} on stdin, applies each update
// to a fresh YNotebook and writes JSON lines {"name", "notebook": toJSON(), "state"} to
// stdout. The Go tests of ystore/ynotebook feed it the states their engine encodes.
import readline from 'node:readline';
import * as Y from 'yjs';
import { YNotebook } from '@jupyter/ydoc';

const out = [];
for await (const line of readline.createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const { name, update } = JSON.parse(line);
  const nb = new YNotebook();
  try {
    Y.applyUpdate(nb.ydoc, Buffer.from(update, 'base64'));
  } catch {
    // YNotebook observers can throw after the update is integrated
  }
  out.push(JSON.stringify({ name, notebook: nb.toJSON(), state: nb.ystate.toJSON(), pending: nb.ydoc.store.pendingStructs !== null }));
  nb.dispose();
}
process.stdout.write(out.join('\n') + '\n', () => process.exit(0));
