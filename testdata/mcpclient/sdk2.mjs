// MCP client driver on @modelcontextprotocol/client 2.4 (protocol 2026-07-28):
// server/discover, use_notebook, subscriptions/listen with the subscribed URIs; a
// subscribe or unsubscribe command reopens the listen stream with the new set.
// Protocol of arguments, stdin and stdout: see driver.mjs.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { parseArgs, emit, now, run } from './driver.mjs';

const args = parseArgs(process.argv.slice(2));
const headers = args.token ? { Authorization: `Bearer ${args.token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(args.url), { requestInit: { headers } });
const client = new Client({ name: 'sdk2-driver', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
client.setNotificationHandler('notifications/resources/updated', (n) => {
  emit({ event: 'updated', uri: n.params.uri, subscriptionId: n.params._meta?.['io.modelcontextprotocol/subscriptionId'] ?? null, version: n.params._meta?.['io.github.jupyter-mcp-sidecar/version'] ?? null, t: now() });
});
client.setNotificationHandler('notifications/resources/list_changed', () => emit({ event: 'list_changed', t: now() }));

try {
  await client.connect(transport);
} catch (err) {
  emit({ event: 'error', id: null, error: String(err?.message ?? err) });
  process.exit(1);
}

const uris = new Set();
let subscription = null;
const relisten = async () => {
  const previous = subscription;
  subscription = uris.size > 0 ? await client.listen({ resourceSubscriptions: [...uris] }) : null;
  if (previous) await previous.close();
  return subscription ? { honored: subscription.honoredFilter } : {};
};

await run({
  protocolVersion: () => client.getNegotiatedProtocolVersion(),
  call: (name, a) => client.callTool({ name, arguments: a }),
  read: (uri) => client.readResource({ uri }, { cacheMode: 'bypass' }),
  subscribe: async (uri) => { uris.add(uri); return relisten(); },
  unsubscribe: async (uri) => { uris.delete(uri); return relisten(); },
  close: async () => {
    if (subscription) await subscription.close();
    await client.close();
  },
}, args);
