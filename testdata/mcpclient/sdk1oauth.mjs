// MCP client driver on @modelcontextprotocol/sdk 1.32 (protocol 2025-11-25) that logs in
// with OAuth (the SDK's own client auth: discovery from the 401, dynamic registration,
// PKCE S256, the token exchange), then runs as sdk1.mjs does. Like a desktop client, it
// listens on its loopback redirect URI and its redirect handler opens the authorization
// URL in a browser: headless Chromium, where a person (testdata/browser/hublogin.mjs)
// logs in at the Hub as --user and approves there and on the sidecar's consent page; the
// browser's redirect to the redirect URI delivers the code.
//
// CLI:    --url URL --redirect http://127.0.0.1:PORT/PATH --chromium CHROMIUM --user USER
//         [--name NAME --path PATH] [--subscribe URI]...
// stdout: {"event":"login","seen":[…],"status":S} (the pages filled, the callback
//         page's status), then what driver.mjs prints.
// stdin:  driver.mjs's commands, and {"id":N,"op":"list"} for resources/list.
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { launch } from '../browser/chromium.mjs';
import { logIn } from '../browser/hublogin.mjs';
import { parseArgs, emit, now, run } from './driver.mjs';

const argv = process.argv.slice(2);
const own = {};
for (const k of ['--redirect', '--chromium', '--user']) {
  const i = argv.indexOf(k);
  if (i < 0) throw new Error(`${k} is required`);
  own[k.slice(2)] = argv[i + 1];
  argv.splice(i, 2);
}
const args = parseArgs(argv);
const redirect = new URL(own.redirect);

// The redirect URI's listener: the first request to its path is the authorization
// response.
let delivered, refused;
const callback = new Promise((resolve, reject) => { delivered = resolve; refused = reject; });
const listener = http.createServer((req, res) => {
  const u = new URL(req.url, redirect);
  if (u.pathname !== redirect.pathname) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/plain' }).end('Logged in: you may close this page.');
  delivered(u);
});
await new Promise((resolve, reject) => listener.listen(Number(redirect.port), redirect.hostname, resolve).once('error', reject));

// An in-memory OAuthClientProvider.
let clientInfo, tokens, verifier, state, login;
const provider = {
  get redirectUrl() { return own.redirect; },
  get clientMetadata() {
    return {
      client_name: 'sdk1oauth-driver', redirect_uris: [own.redirect], grant_types: ['authorization_code'],
      response_types: ['code'], token_endpoint_auth_method: 'none',
    };
  },
  state: () => (state = randomBytes(16).toString('hex')),
  clientInformation: () => clientInfo,
  saveClientInformation: (info) => { clientInfo = info; },
  tokens: () => tokens,
  saveTokens: (t) => { tokens = t; },
  saveCodeVerifier: (v) => { verifier = v; },
  codeVerifier: () => verifier,
  redirectToAuthorization: async (url) => {
    // The browser opens, the SDK goes on (connect ends with UnauthorizedError).
    login = (async () => {
      const browser = await launch(own.chromium);
      try {
        const r = await logIn(browser, String(url), { user: own.user, until: own.redirect });
        if (!r.url.startsWith(own.redirect)) refused(new Error(`the login ended at ${r.url} (${r.status}): ${r.text}`));
        return r;
      } finally {
        await browser.close();
      }
    })();
    login.catch(refused);
  },
};

const newTransport = () => new StreamableHTTPClientTransport(new URL(args.url), { authProvider: provider });
const newClient = () => {
  const c = new Client({ name: 'sdk1oauth-driver', version: '1.0.0' });
  c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    emit({ event: 'updated', uri: n.params.uri, subscriptionId: null, t: now() });
  });
  return c;
};

let client = newClient();
let transport = newTransport();
try {
  try {
    await client.connect(transport);
    throw new Error('connected without logging in');
  } catch (err) {
    if (!(err instanceof UnauthorizedError) || !login) throw err;
  }
  const back = await callback;
  const { seen, status } = await login;
  listener.close();
  emit({ event: 'login', seen, status });
  if (back.searchParams.get('state') !== state) throw new Error('state differs from the one sent');
  if (back.searchParams.get('error')) throw new Error(`authorization refused: ${back.searchParams.get('error')}`);
  await transport.finishAuth(back.searchParams.get('code'));
  client = newClient();
  transport = newTransport();
  await client.connect(transport);
} catch (err) {
  emit({ event: 'error', id: null, error: String(err?.message ?? err) });
  process.exit(1);
}

await run({
  protocolVersion: () => transport.protocolVersion,
  call: (name, a) => client.callTool({ name, arguments: a }),
  read: (uri) => client.readResource({ uri }),
  list: () => client.listResources(),
  subscribe: (uri) => client.subscribeResource({ uri }),
  unsubscribe: (uri) => client.unsubscribeResource({ uri }),
  close: async () => {
    await transport.terminateSession();
    await client.close();
  },
}, args);
