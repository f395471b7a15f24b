// prompter.mjs is a stdio MCP server (no dependencies) with one prompt,
// greet, whose description it reads from the file named by its first
// argument at every prompts/list: a test changes the prompt by writing
// the file. The Go e2e tests put it behind troupe (pins of prompts).
import { readFileSync } from 'node:fs';
import readline from 'node:readline';

const descriptionFile = process.argv[2];
const send = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...msg }) + '\n');

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  let msg;
  try { msg = JSON.parse(line); } catch { return; }
  if (msg.id === undefined || !msg.method) return; // notifications and responses
  switch (msg.method) {
    case 'initialize':
      send({ id: msg.id, result: { protocolVersion: msg.params.protocolVersion,
        capabilities: { tools: {}, prompts: { listChanged: true } },
        serverInfo: { name: 'prompter', version: '1.0.0' } } });
      break;
    case 'ping':
      send({ id: msg.id, result: {} });
      break;
    case 'tools/list':
      send({ id: msg.id, result: { tools: [] } });
      break;
    case 'prompts/list':
      send({ id: msg.id, result: { prompts: [{ name: 'greet', description: readFileSync(descriptionFile, 'utf8'),
        arguments: [{ name: 'who', required: false }] }] } });
      break;
    case 'prompts/get':
      send({ id: msg.id, result: { messages: [{ role: 'user', content: { type: 'text', text: 'Hello.' } }] } });
      break;
    default:
      send({ id: msg.id, error: { code: -32601, message: 'method not found' } });
  }
});
