// hostile.mjs is a stdio MCP server (no dependencies) that misbehaves the
// way the hostile downstreams do: resources/list answers one page
// of 100,000 resources; resources/subscribe is followed by 10,000
// notifications/resources/updated for the URI (each with its number in
// _meta, so the client can tell the latest) and 10,000
// notifications/prompts/list_changed and resources/list_changed, as fast as
// stdout takes them. The Go e2e tests put it behind troupe.
import readline from 'node:readline';

const out = [];
const send = (msg) => out.push(JSON.stringify({ jsonrpc: '2.0', ...msg }));
const flush = () => { process.stdout.write(out.join('\n') + '\n'); out.length = 0; };

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  let msg;
  try { msg = JSON.parse(line); } catch { return; }
  if (msg.id === undefined || !msg.method) return; // notifications and responses
  switch (msg.method) {
    case 'initialize':
      send({ id: msg.id, result: { protocolVersion: msg.params.protocolVersion,
        capabilities: { tools: {}, prompts: { listChanged: true }, resources: { subscribe: true, listChanged: true } },
        serverInfo: { name: 'hostile', version: '1.0.0' } } });
      break;
    case 'ping':
      send({ id: msg.id, result: {} });
      break;
    case 'tools/list':
      send({ id: msg.id, result: { tools: [] } });
      break;
    case 'prompts/list':
      send({ id: msg.id, result: { prompts: [] } });
      break;
    case 'resources/list': {
      const resources = [];
      for (let i = 0; i < 100000; i++) {
        const n = String(i).padStart(6, '0');
        resources.push({ uri: `hostile://r/${n}`, name: `resource ${n}`, mimeType: 'text/plain' });
      }
      send({ id: msg.id, result: { resources } });
      break;
    }
    case 'resources/subscribe':
      send({ id: msg.id, result: {} });
      for (let i = 0; i < 10000; i++) {
        send({ method: 'notifications/resources/updated', params: { uri: msg.params.uri, _meta: { seq: i } } });
        send({ method: 'notifications/prompts/list_changed' });
        send({ method: 'notifications/resources/list_changed' });
      }
      break;
    default:
      send({ id: msg.id, error: { code: -32601, message: 'method not found' } });
  }
  flush();
});
