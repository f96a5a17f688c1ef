// A person in JupyterLab: drives real JupyterLab in headless Chromium (Debian's chromium,
// through playwright-core) for sidecar/e2e/jupyter's browser tests. See README.md here.
//
//   node driver.mjs --url http://127.0.0.1:8888 --token TOKEN --chromium /usr/bin/chromium
//
// stdin: one JSON command a line; stdout: one JSON reply a line, {"ok":true,...} or
// {"ok":false,"error":...}; the first line, {"ok":true,"ready":true}, once Chromium runs.
// Every command names its browser context with "page" (one person each: its own
// cookies, its own tab); a notebook is named by its path relative to the server's root.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, serve } from './chromium.mjs';

function arg(name, dflt) {
  const i = process.argv.indexOf('--' + name);
  if (i < 0) {
    if (dflt === undefined) throw new Error('--' + name + ' is required');
    return dflt;
  }
  return process.argv[i + 1];
}

const url = arg('url').replace(/\/$/, '');
const token = arg('token');
const timeout = Number(arg('timeout-ms', '60000')); // one UI step on a loaded 2-core machine

const browser = await launch(arg('chromium'));
const contexts = new Map(); // page name → {context, page, errors}

// person returns the browser context named name, opening it (a new person) if needed.
async function person(name) {
  let p = contexts.get(name);
  if (p) return p;
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(timeout);
  p = { context, page, errors: [] };
  page.on('pageerror', (e) => p.errors.push(String(e)));
  contexts.set(name, p);
  return p;
}

async function pageOf(name) {
  const p = contexts.get(name);
  if (!p) throw new Error(`no page ${name}: open a notebook first`);
  return p.page;
}

// In the page: the notebook panel of path, its cells and their editors.
const inPage = {
  panel: `(path) => {
    const app = window.jupyterapp;
    for (const w of app.shell.widgets('main')) {
      if (w.context && w.context.path === path && w.content && w.content.widgets) return w;
    }
    throw new Error('no open notebook ' + path);
  }`,
};

async function evalPanel(page, path, body, extra) {
  return page.evaluate(([panelSrc, bodySrc, path, extra]) => {
    const panel = (0, eval)(panelSrc)(path);
    return (0, eval)(bodySrc)(panel, extra);
  }, [inPage.panel, body, path, extra ?? null]);
}

// cellsView is what the person sees of every cell: the editor's text (CodeMirror's
// state), the cell model's id and type, the prompt's execution count, and each output
// as rendered.
const cellsView = `async (panel) => panel.content.widgets.map((cell) => {
  const view = cell.editor && cell.editor.editor; // CodeMirrorEditor → EditorView
  const prompt = cell.node.querySelector('.jp-InputPrompt');
  const outputs = [...cell.node.querySelectorAll('.jp-OutputArea-child .jp-OutputArea-output')].map((o) => {
    const img = o.querySelector('img');
    return {
      mime: o.getAttribute('data-mime-type') || '',
      text: o.innerText,
      img: img ? img.getAttribute('src') : null,
    };
  });
  return {
    id: cell.model.id,
    cell_type: cell.model.type,
    editor: view ? view.state.doc.toString() : null,
    source: cell.model.sharedModel.getSource(),
    prompt: prompt ? prompt.innerText : '',
    execution_count: cell.model.type === 'code' ? cell.model.executionCount : null,
    outputs,
  };
})`;

const ops = {
  // open: the person opens JupyterLab and double-clicks the notebook in the file browser,
  // then waits until it is loaded, collaborative and its kernel idle.
  async open({ page: name, path }) {
    const p = await person(name);
    const page = p.page;
    if (!page.url().includes('/lab')) {
      await page.goto(`${url}/lab?reset&token=${encodeURIComponent(token)}`);
      await page.waitForFunction(() => window.jupyterapp && window.jupyterapp.started !== undefined);
    }
    const dir = path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '';
    const base = path.slice(path.lastIndexOf('/') + 1);
    if (dir) await page.evaluate((dir) => window.jupyterapp.commands.execute('filebrowser:go-to-path', { path: dir }), dir);
    const item = page.locator('.jp-DirListing-item', { has: page.locator('.jp-DirListing-itemName', { hasText: new RegExp('^' + escapeRe(base) + '$') }) });
    await item.first().dblclick();
    // A notebook without a kernelspec asks for a kernel: the person takes the default.
    const ready = (path) => {
      if (document.querySelector('.jp-Dialog')) return 'dialog';
      for (const w of window.jupyterapp.shell.widgets('main')) {
        if (w.context && w.context.path === path && w.context.isReady && w.content && w.content.widgets.length > 0) {
          const k = w.sessionContext.session && w.sessionContext.session.kernel;
          if (k && k.status === 'idle') return 'ready';
        }
      }
      return false;
    };
    while ((await (await page.waitForFunction(ready, path, { polling: 100 })).jsonValue()) === 'dialog') {
      await page.locator('.jp-Dialog .jp-mod-accept').first().click();
      await page.locator('.jp-Dialog').waitFor({ state: 'detached' });
    }
    return { cells: await evalPanel(page, path, cellsView) };
  },

  async cells({ page: name, path }) {
    return { cells: await evalPanel(await pageOf(name), path, cellsView) };
  },

  // model: the page's own notebook document (the shared model's JSON).
  async model({ page: name, path }) {
    return { nb: await evalPanel(await pageOf(name), path, `(panel) => panel.model.sharedModel.toJSON()`) };
  },

  // type: clicks into cell index's editor, goes to its end (or its start with at: 0) and
  // types text key by key, delay ms apart. Returns each key's time (ms since epoch,
  // just before it was pressed).
  async type({ page: name, path, index, text, delay = 30, at }) {
    const page = await pageOf(name);
    return { times: await typeInto(page, path, index, text, delay, at) };
  },

  // type_many: several people type at once (each op a type command of its own page).
  async type_many({ ops: list }) {
    const times = await Promise.all(list.map(async (o) => typeInto(await pageOf(o.page), o.path, o.index, o.text, o.delay ?? 30, o.at)));
    return { times };
  },

  // select: clicks cell index's prompt: the cell active, the notebook in command mode.
  async select({ page: name, path, index }) {
    const page = await pageOf(name);
    await activate(page, path);
    const cell = await cellLocator(page, path, index);
    await cell.locator('.jp-InputPrompt').first().click();
    await page.waitForFunction(([path, index]) => {
      for (const w of window.jupyterapp.shell.widgets('main')) {
        if (w.context && w.context.path === path) return w.content.activeCellIndex === index && w.content.mode === 'command';
      }
      return false;
    }, [path, index]);
    return {};
  },

  // keys: presses keys in order (playwright names: "Shift+Enter", "z", "d").
  async keys({ page: name, keys, delay = 50 }) {
    const page = await pageOf(name);
    const times = [];
    for (const k of keys) {
      times.push(Date.now());
      await page.keyboard.press(k, { delay });
    }
    return { times };
  },

  // command: runs a JupyterLab command on the notebook (made the current widget first).
  async command({ page: name, path, command, args }) {
    const page = await pageOf(name);
    await activate(page, path);
    const t = Date.now();
    await page.evaluate(([c, a]) => window.jupyterapp.commands.execute(c, a || {}), [command, args]);
    return { t };
  },

  // set_metadata: sets a notebook metadata key through the notebook model, as the
  // metadata editor of the property inspector does.
  async set_metadata({ page: name, path, key, value }) {
    await evalPanel(await pageOf(name), path, `(panel, kv) => { panel.model.setMetadata(kv[0], kv[1]); }`, [key, value]);
    return {};
  },

  // wait_idle: until the kernel is idle and no cell of path is queued or running.
  async wait_idle({ page: name, path }) {
    const page = await pageOf(name);
    await page.waitForFunction((path) => {
      for (const w of window.jupyterapp.shell.widgets('main')) {
        if (w.context && w.context.path === path) {
          const k = w.sessionContext.session && w.sessionContext.session.kernel;
          const busy = [...w.content.node.querySelectorAll('.jp-InputPrompt')].some((p) => p.innerText.includes('*'));
          return k && k.status === 'idle' && !busy;
        }
      }
      return false;
    }, path);
    return { cells: await evalPanel(page, path, cellsView) };
  },

  // rename: in the file browser, selects the file, presses F2, types the new name, Enter.
  async rename({ page: name, from, to }) {
    const page = await pageOf(name);
    const base = from.slice(from.lastIndexOf('/') + 1);
    const item = page.locator('.jp-DirListing-item', { has: page.locator('.jp-DirListing-itemName', { hasText: new RegExp('^' + escapeRe(base) + '$') }) });
    await item.first().click();
    await page.keyboard.press('F2');
    const editor = page.locator('.jp-DirListing-editor');
    await editor.waitFor();
    await editor.fill(to.slice(to.lastIndexOf('/') + 1));
    await page.keyboard.press('Enter');
    await page.waitForFunction((to) => {
      for (const w of window.jupyterapp.shell.widgets('main')) if (w.context && w.context.path === to) return true;
      return false;
    }, to);
    return {};
  },

  // close: closes the person's tab (and context); the next open starts afresh.
  async close({ page: name }) {
    const p = contexts.get(name);
    if (!p) return {};
    contexts.delete(name);
    await p.context.close();
    return { errors: p.errors };
  },

  async screenshot({ page: name, file }) {
    const page = await pageOf(name);
    await page.screenshot({ path: file });
    return {};
  },
};

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// cellLocator marks cell index of path's panel (and only it) and returns its locator.
async function cellLocator(page, path, index) {
  await evalPanel(page, path, `(panel, index) => {
    for (const n of document.querySelectorAll('[data-sidecar-target]')) n.removeAttribute('data-sidecar-target');
    const cell = panel.content.widgets[index];
    if (!cell) throw new Error('no cell ' + index + ' in ' + panel.context.path);
    cell.node.setAttribute('data-sidecar-target', '1');
  }`, index);
  return page.locator('[data-sidecar-target="1"]');
}

async function activate(page, path) {
  await evalPanel(page, path, `(panel) => { window.jupyterapp.shell.activateById(panel.id); }`);
}

async function typeInto(page, path, index, text, delay, at) {
  await activate(page, path);
  const cell = await cellLocator(page, path, index);
  await cell.locator('.cm-content').first().click();
  await page.keyboard.press(at === 0 ? 'Control+Home' : 'Control+End');
  const times = [];
  for (const ch of text) { // by code point: an emoji is one key
    times.push(Date.now());
    if (ch === '\n') await page.keyboard.press('Enter');
    else await page.keyboard.type(ch);
    if (delay > 0) await new Promise((r) => setTimeout(r, delay)); // a person's pace between keys
  }
  return times;
}

// failureShots saves a screenshot of every page, for the test's log on a failure.
let failures = 0;
async function failureShots() {
  const files = [];
  for (const [name, p] of contexts) {
    const file = join(tmpdir(), `sidecar-browser-${process.pid}-${++failures}-${name}.png`);
    try {
      await p.page.screenshot({ path: file, timeout: 10000 });
      files.push(file);
    } catch {}
  }
  return files;
}

serve(browser, ops, async () => ' (screenshots: ' + (await failureShots()).join(', ') + ')');
