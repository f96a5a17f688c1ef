// MCP client driver on @modelcontextprotocol/sdk 1.32 (protocol 2025-11-25):
// initialize, use_notebook, resources/subscribe; notifications arrive on the GET stream.
// Protocol of arguments, stdin and stdout: see driver.mjs.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema, ResourceListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { parseArgs, emit, now, run } from './driver.mjs';

const args = parseArgs(process.argv.slice(2));
const headers = args.token ? { Authorization: `Bearer ${args.token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(args.url), { requestInit: { headers } });
const client = new Client({ name: 'sdk1-driver', version: '1.0.0' });
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  emit({ event: 'updated', uri: n.params.uri, subscriptionId: n.params._meta?.['io.modelcontextprotocol/subscriptionId'] ?? null, version: n.params._meta?.['io.github.jupyter-mcp-sidecar/version'] ?? null, t: now() });
});
client.setNotificationHandler(ResourceListChangedNotificationSchema, () => emit({ event: 'list_changed', t: now() }));

try {
  await client.connect(transport);
} catch (err) {
  emit({ event: 'error', id: null, error: String(err?.message ?? err) });
  process.exit(1);
}

await run({
  protocolVersion: () => transport.protocolVersion,
  call: (name, a) => client.callTool({ name, arguments: a }),
  read: (uri) => client.readResource({ uri }),
  subscribe: (uri) => client.subscribeResource({ uri }),
  unsubscribe: (uri) => client.unsubscribeResource({ uri }),
  close: async () => {
    await transport.terminateSession();
    await client.close();
  },
}, args);
