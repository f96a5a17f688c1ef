// What the browser drivers here share: Chromium's launch and the JSON-lines command
// loop. See README.md here.
import { chromium } from 'playwright-core';
import { createInterface } from 'node:readline';

// launch starts Debian's Chromium headless with no network of its own and no sandbox
// (root on CI). playwright-core gives it a fresh temporary --user-data-dir of its own
// (it refuses the flag) and removes it on close.
export async function launch(executablePath) {
  return chromium.launch({
    executablePath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

// serve prints {"ok":true,"ready":true,"version":…}, then runs each stdin line's
// command ({"op":…}) with ops[op], one at a time, and prints its reply, {"ok":true,…}
// or {"ok":false,"error":…} (what explain adds to the error appended); at the end of
// stdin it closes the browser and exits.
export function serve(browser, ops, explain = async () => '') {
  process.stdout.write(JSON.stringify({ ok: true, ready: true, version: browser.version() }) + '\n');
  const rl = createInterface({ input: process.stdin });
  let queue = Promise.resolve();
  rl.on('line', (line) => {
    queue = queue.then(async () => {
      let reply;
      try {
        const cmd = JSON.parse(line);
        const op = ops[cmd.op];
        if (!op) throw new Error('unknown op ' + cmd.op);
        reply = { ok: true, ...(await op(cmd)) };
      } catch (e) {
        reply = { ok: false, error: String(e && e.message || e) + (await explain()), trace: e && e.stack };
      }
      process.stdout.write(JSON.stringify(reply) + '\n');
    });
  });
  rl.on('close', () => {
    queue.then(async () => {
      await browser.close().catch(() => {});
      process.exit(0);
    });
  });
}
