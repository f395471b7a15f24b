// recorder.mjs is a minimal stdio MCP server (no dependencies) that shows a
// client what it received: its one tool, "received", answers with the
// tools/call params' _meta as JSON text, and "initialize" is remembered so
// the tool "declared" answers with the client's capabilities. The Go e2e
// tests put it behind troupe to check what troupe passes downstream.
import readline from 'node:readline';

let init = null;
const send = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...msg }) + '\n');
const text = (value) => ({ content: [{ type: 'text', text: JSON.stringify(value) }] });
const tools = [
  { name: 'received', description: 'Shows the _meta of this call as the server received it.',
    inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } },
  { name: 'declared', description: "Shows the client's initialize capabilities.",
    inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } },
];

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  let msg;
  try { msg = JSON.parse(line); } catch { return; }
  if (msg.id === undefined || !msg.method) return; // notifications and responses
  switch (msg.method) {
    case 'initialize':
      init = msg.params;
      send({ id: msg.id, result: { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} },
        serverInfo: { name: 'recorder', version: '1.0.0' } } });
      break;
    case 'ping':
      send({ id: msg.id, result: {} });
      break;
    case 'tools/list':
      send({ id: msg.id, result: { tools } });
      break;
    case 'tools/call':
      if (msg.params.name === 'received') send({ id: msg.id, result: text(msg.params._meta ?? null) });
      else if (msg.params.name === 'declared') send({ id: msg.id, result: text(init?.capabilities ?? null) });
      else send({ id: msg.id, error: { code: -32602, message: 'unknown tool ' + msg.params.name } });
      break;
    default:
      send({ id: msg.id, error: { code: -32601, message: 'method not found' } });
  }
});
