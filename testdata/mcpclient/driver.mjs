// Shared driver loop for the MCP client scripts sdk1.mjs and sdk2.mjs.
//
// CLI:    --url URL --token TOKEN [--name NAME --path PATH] [--subscribe URI]...
// stdout: one JSON object per line:
//   {"event":"ready","protocolVersion":V}           connected, bound (use_notebook when --name), subscribed
//   {"event":"updated","uri":U,"subscriptionId":S,"version":V,"t":MS}  each notifications/resources/updated (V: its _meta version)
//   {"event":"list_changed","t":MS}                 each notifications/resources/list_changed
//   {"event":"result","id":ID,"result":R}           answer to a command
//   {"event":"error","id":ID,"error":MSG,"code":C}  failed command (or id null: fatal)
//   {"event":"closed"}                              after "close" or end of stdin
// stdin:  one JSON command per line:
//   {"id":1,"op":"read","uri":U}
//   {"id":2,"op":"subscribe","uri":U}   {"id":3,"op":"unsubscribe","uri":U}
//   {"id":4,"op":"call","name":TOOL,"arguments":{...}}
//   {"id":5,"op":"list"}                 resources/list (sdk1oauth.mjs)
//   {"op":"close"}
import readline from 'node:readline';

export function parseArgs(argv) {
  const args = { subscribe: [] };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    switch (k) {
      case '--url': args.url = v; i++; break;
      case '--token': args.token = v; i++; break;
      case '--name': args.name = v; i++; break;
      case '--path': args.path = v; i++; break;
      case '--subscribe': args.subscribe.push(v); i++; break;
      default: throw new Error(`unknown argument ${k}`);
    }
  }
  if (!args.url) throw new Error('--url is required');
  return args;
}

export function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

export const now = () => performance.timeOrigin + performance.now();

// run drives an era-specific session: {protocolVersion(), call(name, args), read(uri),
// subscribe(uri), unsubscribe(uri), close()}.
export async function run(session, args) {
  try {
    if (args.name) {
      const res = await session.call('use_notebook', { notebook_name: args.name, notebook_path: args.path });
      if (res.isError) throw new Error(`use_notebook: ${JSON.stringify(res.content)}`);
    }
    for (const uri of args.subscribe) await session.subscribe(uri);
    emit({ event: 'ready', protocolVersion: session.protocolVersion() });
  } catch (err) {
    emit({ event: 'error', id: null, error: String(err?.message ?? err) });
    process.exit(1);
  }
  const rl = readline.createInterface({ input: process.stdin });
  let closing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    try { await session.close(); } catch { /* already gone */ }
    emit({ event: 'closed' });
    process.exit(0);
  };
  rl.on('line', async (line) => {
    if (!line.trim()) return;
    let cmd;
    try { cmd = JSON.parse(line); } catch (err) { emit({ event: 'error', id: null, error: `bad command: ${err.message}` }); return; }
    try {
      let result;
      switch (cmd.op) {
        case 'read': result = await session.read(cmd.uri); break;
        case 'list': result = await session.list(); break; // sdk1oauth.mjs
        case 'subscribe': result = await session.subscribe(cmd.uri); break;
        case 'unsubscribe': result = await session.unsubscribe(cmd.uri); break;
        case 'call': result = await session.call(cmd.name, cmd.arguments ?? {}); break;
        case 'close': await close(); return;
        default: throw new Error(`unknown op ${cmd.op}`);
      }
      emit({ event: 'result', id: cmd.id ?? null, result: result ?? {} });
    } catch (err) {
      emit({ event: 'error', id: cmd.id ?? null, error: String(err?.message ?? err), code: err?.code ?? null });
    }
  });
  rl.on('close', close);
}
