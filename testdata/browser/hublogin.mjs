// A person logging in with JupyterHub in headless Chromium (Debian's chromium, through
// playwright-core), for the OAuth tests of hub mode. See README.md here.
//
// As a module: logIn(browser, url, {user, until, consent, context}) (browser:
// chromium.mjs's launch) opens url in a new browser context (a person with no Hub
// session yet; or in context, a person's browser kept between logins), fills the Hub's
// login form as user, approves on the Hub's authorization page if it is shown, decides
// on the sidecar's consent page if it is shown (consent: "approve", the default,
// "deny", or "none": stop there), and returns when the page has left the Hub for a URL
// starting with until (the OAuth client's redirect URI, which some listener of the
// client's answers) or stopped on a page that is none of those. With intercept (a URL
// prefix, e.g. https://evil.example/, a host that does not resolve here), the requests
// the browser made there are reported, the navigation's failure there ending the
// login; with click (a selector), the person then clicks it on the page where the
// login ended.
//
// visit(browser, url, {context, leave}) opens url, a page whose own script runs at
// load (no click: no user activation), in the person's browser, and returns when the
// page shows #done or, with leave, when the page has navigated away from url.
//
// fetchFrom(browser, page, requests) runs fetches from a page of another origin, as a
// browser-based client (the MCP Inspector) does.
//
// As a driver: node hublogin.mjs --chromium /usr/bin/chromium
//   stdin:  {"op":"login","url":U,"user":"alice","until":"http://127.0.0.1:P/callback"[,"consent":"deny"][,"session":"alice"][,"intercept":P][,"click":S][,"probe":JS]}
//           {"op":"visit","url":U[,"session":"alice"][,"leave":true]}
//           {"op":"fetch","page":URL,"requests":[{"url":…,"method":…,"headers":{…},"body":…}]}
//   stdout: {"ok":true,"ready":true,"version":V} once Chromium runs, then per command
//           {"ok":true,"url":…,"seen":[…],"status":…,"text":…,"form":{…},"intercepted":[…][,"probe":…]} (login; form: the
//           consent page's hidden fields where the login stopped there; probe: the value of
//           the login's probe, an expression evaluated in the page it stopped at),
//           {"ok":true,"url":…,"status":…,"text":…} (visit),
//           {"ok":true,"answers":[{"status":…,"headers":{…},"body":…} or {"error":…}]} (fetch),
//           or {"ok":false,"error":…}.
import { pathToFileURL } from 'node:url';
import { launch, serve } from './chromium.mjs';

// logIn returns where the person ended: url (the page's URL), seen (the pages
// filled, in order: the Hub's "login", "authorize", the sidecar's "consent"), status
// (the last document's HTTP status) and text (the start of what the page shows).
export async function logIn(browser, url, { user, password = 'any', until, consent = 'approve', context: kept, intercept, click, probe, timeout = 60000 }) {
  const context = kept || await browser.newContext();
  let page;
  try {
    page = await context.newPage();
    page.setDefaultTimeout(timeout); // one page on a loaded 2-core machine
    const seen = [];
    const intercepted = [];
    if (intercept) page.on('request', (r) => { if (r.url().startsWith(intercept)) intercepted.push(r.url()); });
    const status = documentStatus(page);
    // A navigation to the intercepted host fails (it does not resolve here): where the
    // login went is what was intercepted.
    await page.goto(url).catch((e) => { if (intercepted.length === 0) throw e; });
    for (let step = 0; step < 4 && !page.url().startsWith(until); step++) {
      let submit;
      if (await page.locator('#username_input').count() > 0) { // the Hub's /hub/login
        seen.push('login');
        await page.locator('#username_input').fill(user);
        await page.locator('#password_input').fill(password); // DummyAuthenticator takes any
        submit = page.locator('#login_submit');
      } else if (await page.locator('form button[type=submit]', { hasText: 'Authorize' }).count() > 0) { // the Hub's oauth.html
        seen.push('authorize');
        submit = page.locator('form button[type=submit]', { hasText: 'Authorize' });
      } else if (await page.locator('form#consent').count() > 0) { // the sidecar's consent page
        seen.push('consent');
        if (consent === 'none') break;
        submit = page.locator(`form#consent button[value=${consent === 'deny' ? 'deny' : 'approve'}]`);
        // Approve is armed once the person is at the page: the pointer moves over it
        // (then 600 ms); click() waits for the button to be enabled.
        await page.mouse.move(5, 5);
        await page.mouse.move(80, 60, { steps: 4 });
      } else {
        break;
      }
      // The form's POST and its redirects end in one document.
      const loaded = page.waitForEvent('load');
      await submit.click();
      await loaded;
    }
    let form;
    if (seen.at(-1) === 'consent' && consent === 'none') {
      form = Object.fromEntries(await page.locator('form#consent input[type=hidden]').evaluateAll(
        (inputs) => inputs.map((i) => [i.name, i.value])));
    }
    if (click) {
      const loaded = page.waitForEvent('load');
      await page.mouse.move(5, 5); // the page's buttons are armed once the pointer moved over it
      await page.mouse.move(80, 60, { steps: 4 });
      await page.locator(click).click();
      await loaded;
    }
    const text = (await page.locator('body').innerText().catch(() => '')).slice(0, 2000);
    // probe: an expression evaluated in the page where the login stopped (its layout).
    return { url: page.url(), seen, status: status(), text, form, intercepted, ...(probe ? { probe: await page.evaluate(probe) } : {}) };
  } finally {
    await (kept ? page?.close() : context.close());
  }
}

// documentStatus follows page's main-frame documents: it returns a function giving the
// last one's HTTP status (not a redirect's).
function documentStatus(page) {
  let status = 0;
  page.on('response', (r) => {
    if (r.request().isNavigationRequest() && r.frame() === page.mainFrame() && (r.status() < 300 || r.status() >= 400)) status = r.status();
  });
  return () => status;
}

// visit opens url in context (or a new one) and waits for the page's own script: until
// it shows #done, or, with leave, until the page has navigated elsewhere.
async function visit(browser, url, { context: kept, leave, timeout = 60000 }) {
  const context = kept || await browser.newContext();
  let page;
  try {
    page = await context.newPage();
    page.setDefaultTimeout(timeout);
    const status = documentStatus(page);
    await page.goto(url);
    if (leave) {
      await page.waitForURL((u) => u.href !== url);
    } else {
      await page.locator('#done').waitFor({ state: 'attached' });
    }
    const text = (await page.locator('body').innerText().catch(() => '')).slice(0, 2000);
    return { url: page.url(), status: status(), text };
  } finally {
    await (kept ? page?.close() : context.close());
  }
}

// fetchFrom opens page (a URL of the origin to fetch from) in a new browser context and
// runs requests ({url, method, headers, body}) there one after the other, as a page's
// script does: per request what the page may read of the answer (status, the headers
// CORS lets it see, the body) or the error the browser gave it (a CORS refusal is a
// TypeError).
async function fetchFrom(browser, page, requests) {
  const context = await browser.newContext();
  try {
    const p = await context.newPage();
    await p.goto(page);
    return await p.evaluate(async (requests) => {
      const out = [];
      for (const r of requests) {
        try {
          const resp = await fetch(r.url, { method: r.method || 'GET', headers: r.headers || {}, body: r.body });
          out.push({ status: resp.status, headers: Object.fromEntries(resp.headers), body: await resp.text() });
        } catch (e) {
          out.push({ error: String(e) });
        }
      }
      return out;
    }, requests);
  } finally {
    await context.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const i = process.argv.indexOf('--chromium');
  if (i < 0) throw new Error('--chromium is required');
  const browser = await launch(process.argv[i + 1]);
  const sessions = new Map(); // a person's browser context, by the login's "session"
  const session = async (cmd) => {
    if (cmd.session && !sessions.has(cmd.session)) sessions.set(cmd.session, await browser.newContext());
    return sessions.get(cmd.session);
  };
  serve(browser, {
    login: async (cmd) => logIn(browser, cmd.url, { ...cmd, context: await session(cmd) }),
    visit: async (cmd) => visit(browser, cmd.url, { ...cmd, context: await session(cmd) }),
    fetch: async (cmd) => ({ answers: await fetchFrom(browser, cmd.page, cmd.requests) }),
  });
}
