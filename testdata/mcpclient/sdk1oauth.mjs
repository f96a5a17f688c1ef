// MCP client driver on @modelcontextprotocol/sdk 1.32 (protocol 2025-11-25) that logs in
// with OAuth (the SDK's own client auth: discovery from the 401, dynamic registration,
// PKCE S256, the token exchange), then runs as sdk1.mjs does. The redirect handler is the
// test's browser: the authorization URL goes to stdout, the URL the browser was sent
// back to comes on stdin.
//
// CLI:    --url URL --redirect REDIRECT_URI [--name NAME --path PATH] [--subscribe URI]...
// stdout: {"event":"authorize","url":U}, then what driver.mjs prints.
// stdin:  {"callback":URL} (the redirect to REDIRECT_URI, with code and state), then
//         driver.mjs's commands, and {"id":N,"op":"list"} for resources/list.
import readline from 'node:readline';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { parseArgs, emit, now, run } from './driver.mjs';

const argv = process.argv.slice(2);
const i = argv.indexOf('--redirect');
const redirect = argv[i + 1];
argv.splice(i, 2);
const args = parseArgs(argv);

// An in-memory OAuthClientProvider; the browser is the test.
let clientInfo, tokens, verifier, state;
let callback;
const provider = {
  get redirectUrl() { return redirect; },
  get clientMetadata() {
    return {
      client_name: 'sdk1oauth-driver', redirect_uris: [redirect], grant_types: ['authorization_code'],
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
    emit({ event: 'authorize', url: String(url) });
    const rl = readline.createInterface({ input: process.stdin });
    const line = await new Promise((resolve) => rl.once('line', resolve));
    rl.close();
    callback = new URL(JSON.parse(line).callback);
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
    if (!(err instanceof UnauthorizedError) || !callback) throw err;
  }
  if (callback.searchParams.get('state') !== state) throw new Error('state differs from the one sent');
  if (callback.searchParams.get('error')) throw new Error(`authorization refused: ${callback.searchParams.get('error')}`);
  await transport.finishAuth(callback.searchParams.get('code'));
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
