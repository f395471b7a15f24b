#!/usr/bin/env node
// runner.mjs drives an MCP server through the official TypeScript SDK, so the
// Go e2e tests check troupe against a client nobody on this project wrote.
//
// Usage: node runner.mjs [scenario.json]   (the scenario is read from stdin
// when no path is given)
//
// A scenario names a transport and a list of steps:
//
//   {"transport": {"kind": "stdio", "command": "...", "args": [...], "env": {...}, "cwd": "..."}
//              | {"kind": "http", "url": "...", "headers": {...},
//                 "oauth": {"clientId": "...", "clientSecret": "...", "issuer": "...", "scope": "..."}},
//    "steps": [{"op": "listTools"} | {"op": "callTool", "name": "...", "arguments": {...}, "progress": true}
//             | {"op": "readResource", "uri": "..."}],
//    "elicitation": [{"action": "accept", "content": {...}, "_meta": {...}} | {"action": "decline"}
//                    | {"never": true}, ...],
//    "sampling": [{"role": "assistant", "content": {...}, "model": "..."}, ...]}
//
// With "elicitation", the client declares the elicitation capability and
// answers the server's elicitation/create requests with the listed answers,
// in order ({"never": true}: no answer until the server withdraws the
// request); the requests it got are reported as "elicitations". A callTool
// step with "progress" asks for progress notifications and reports how many
// arrived as "progressCount". With "sampling", the client declares the
// sampling capability and answers sampling/createMessage with the listed
// results, in order (an error once they run out); the requests it got are
// reported as "samplings".
//
// With transport.oauth, the client authorizes through the SDK's own OAuth
// support, as an unattended client would: the server's 401 names its
// protected resource metadata (RFC 9728), the SDK discovers the
// authorization server from it, gets a token with the client credentials
// grant (its ClientCredentialsProvider, bound to the issuer given) for the
// resource the metadata names, and sends it. The report then carries
// "oauth": {"tokens": N}, how many tokens the SDK obtained.
//
// It prints one JSON document on stdout:
//
//   {"serverVersion": {...}, "protocolVersion": "...",
//    "steps": [{"ok": true, "result": ...} | {"ok": false, "error": {"message": "...", "code": ...}}]}
//
// A step that fails (a JSON-RPC error, a result the SDK rejects) is recorded
// and the next step runs; the exit status is non-zero only when the runner
// itself cannot do its job (bad scenario, cannot connect).

import { readFile } from 'node:fs/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const EXIT_BAD_SCENARIO = 2;
const EXIT_CANNOT_CONNECT = 3;

class ScenarioError extends Error {}

async function readScenario(path) {
  let text;
  if (path) {
    text = await readFile(path, 'utf8');
  } else {
    const chunks = [];
    for await (const chunk of process.stdin) chunks.push(chunk);
    text = Buffer.concat(chunks).toString('utf8');
  }
  let scenario;
  try {
    scenario = JSON.parse(text);
  } catch (err) {
    throw new ScenarioError(`scenario is not JSON: ${err.message}`);
  }
  if (!scenario || typeof scenario !== 'object') throw new ScenarioError('scenario must be an object');
  if (!Array.isArray(scenario.steps)) throw new ScenarioError('scenario.steps must be an array');
  scenario.steps.forEach((step, i) => {
    if (step?.op === 'listTools') return;
    if (step?.op === 'callTool' && typeof step.name === 'string') return;
    if (step?.op === 'readResource' && typeof step.uri === 'string') return;
    if (step?.op === 'listPrompts' || step?.op === 'listResources' || step?.op === 'listResourceTemplates') return;
    if (step?.op === 'getPrompt' && typeof step.name === 'string') return;
    if (step?.op === 'complete' && step.ref && step.argument) return;
    throw new ScenarioError(`step ${i}: want {"op":"listTools"}, {"op":"callTool","name":...} or {"op":"readResource","uri":...}, got ${JSON.stringify(step)}`);
  });
  return scenario;
}

// CountingClientCredentials is the SDK's client credentials provider,
// counting the tokens it is handed so the report can show the OAuth flow ran.
class CountingClientCredentials extends ClientCredentialsProvider {
  tokensSaved = 0;

  saveTokens(tokens) {
    this.tokensSaved++;
    super.saveTokens(tokens);
  }
}

function makeAuthProvider(oauth) {
  if (oauth === undefined) return undefined;
  for (const key of ['clientId', 'clientSecret', 'issuer']) {
    if (typeof oauth?.[key] !== 'string') throw new ScenarioError(`transport.oauth.${key} must be a string`);
  }
  return new CountingClientCredentials({
    clientId: oauth.clientId,
    clientSecret: oauth.clientSecret,
    expectedIssuer: oauth.issuer,
    scope: oauth.scope,
  });
}

function makeTransport(spec, authProvider) {
  switch (spec?.kind) {
    case 'stdio':
      if (typeof spec.command !== 'string') throw new ScenarioError('transport.command must be a string');
      return new StdioClientTransport({
        command: spec.command,
        args: spec.args ?? [],
        // The SDK adds PATH, HOME and a few others to this; the server needs
        // PATH to find rg.
        env: spec.env,
        cwd: spec.cwd,
        // The server's logs are the first thing to read when a test fails, so
        // they go straight to our stderr, which the Go test captures.
        stderr: 'inherit',
      });
    case 'http':
      if (typeof spec.url !== 'string') throw new ScenarioError('transport.url must be a string');
      return new StreamableHTTPClientTransport(new URL(spec.url), {
        requestInit: { headers: spec.headers ?? {} },
        authProvider,
      });
    default:
      throw new ScenarioError(`transport.kind must be "stdio" or "http", got ${JSON.stringify(spec?.kind)}`);
  }
}

// listAllTools follows nextCursor, since the SDK's listTools returns one page.
async function listAllTools(client) {
  const tools = [];
  let cursor;
  let pages = 0;
  do {
    const page = await client.listTools(cursor === undefined ? undefined : { cursor });
    tools.push(...page.tools);
    cursor = page.nextCursor;
    pages++;
  } while (cursor !== undefined);
  // Each listTools call replaces the SDK's cache of output-schema validators
  // with that one page's tools; give it the whole list so callTool validates
  // structuredContent for every tool, not just those on the last page.
  client.cacheToolMetadata(tools);
  return { tools, pages };
}

// listAll follows nextCursor: the entries (under key) of every page of
// the client's list method, in order.
async function listAll(client, method, key) {
  const entries = [];
  let cursor;
  do {
    const page = await client[method](cursor === undefined ? undefined : { cursor });
    entries.push(...page[key]);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return { [key]: entries };
}

async function runStep(client, step) {
  try {
    let result;
    let progressCount = 0;
    if (step.op === 'listTools') {
      result = await listAllTools(client);
    } else if (step.op === 'readResource') {
      result = await client.readResource({ uri: step.uri });
    } else if (step.op === 'listPrompts') {
      result = await listAll(client, 'listPrompts', 'prompts');
    } else if (step.op === 'listResources') {
      result = await listAll(client, 'listResources', 'resources');
    } else if (step.op === 'listResourceTemplates') {
      result = await listAll(client, 'listResourceTemplates', 'resourceTemplates');
    } else if (step.op === 'getPrompt') {
      result = await client.getPrompt({ name: step.name, arguments: step.arguments ?? {} });
    } else if (step.op === 'complete') {
      result = await client.complete({ ref: step.ref, argument: step.argument });
    } else {
      const options = { timeout: step.timeoutMs ?? 120000 };
      if (step.progress) {
        options.onprogress = () => { progressCount++; };
        options.resetTimeoutOnProgress = true;
      }
      result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, options);
    }
    return step.progress ? { ok: true, result, progressCount } : { ok: true, result };
  } catch (err) {
    const error = { message: err?.message ?? String(err) };
    if (err?.code !== undefined) error.code = err.code;
    if (err?.data !== undefined) error.data = err.data;
    return { ok: false, error };
  }
}

async function main() {
  const scenario = await readScenario(process.argv[2]);
  const authProvider = makeAuthProvider(scenario.transport?.oauth);
  const transport = makeTransport(scenario.transport, authProvider);

  // The client does not keep the negotiated protocol version; it hands it to
  // transports that want it (HTTP needs it for a header). Catch it there.
  let protocolVersion;
  const setProtocolVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (version) => {
    protocolVersion = version;
    setProtocolVersion?.(version);
  };

  const answers = scenario.elicitation;
  const elicitations = [];
  const samples = scenario.sampling;
  const samplings = [];
  const capabilities = {};
  if (answers) capabilities.elicitation = {};
  if (samples) capabilities.sampling = {};
  const client = new Client({ name: 'troupe-e2e-tsclient', version: '0.0.0' },
    answers || samples ? { capabilities } : undefined);
  if (samples) {
    client.setRequestHandler(CreateMessageRequestSchema, (request) => {
      samplings.push(request.params);
      const answer = samples.shift();
      if (!answer) throw new Error('no canned sampling answer left');
      return answer;
    });
  }
  if (answers) {
    client.setRequestHandler(ElicitRequestSchema, (request, extra) => {
      elicitations.push(request.params);
      const answer = answers.shift() ?? { action: 'decline' };
      if (!answer.never) return answer;
      // Never answered: wait until the server withdraws the request.
      return new Promise((_, reject) => {
        extra.signal.addEventListener('abort', () => reject(new Error('withdrawn by the server')));
      });
    });
  }
  try {
    await client.connect(transport);
  } catch (err) {
    // The SDK keeps an HTTP status in err.code, out of the message.
    const status = err?.code !== undefined ? ` (code ${err.code})` : '';
    console.error(`runner: cannot connect${status}: ${err?.stack ?? err}`);
    return EXIT_CANNOT_CONNECT;
  }

  const steps = [];
  for (const step of scenario.steps) steps.push(await runStep(client, step));

  if (transport instanceof StreamableHTTPClientTransport) {
    // Tell the server the session is over rather than leaving it to expire.
    await transport.terminateSession().catch((err) => console.error(`runner: terminating session: ${err.message}`));
  }
  // Closing a stdio transport ends the server's stdin, then signals it if it
  // lingers, so no server outlives the runner.
  await client.close();

  const report = { serverVersion: client.getServerVersion(), protocolVersion, steps };
  if (answers) report.elicitations = elicitations;
  if (samples) report.samplings = samplings;
  if (authProvider) report.oauth = { tokens: authProvider.tokensSaved };
  await new Promise((resolve) => process.stdout.write(JSON.stringify(report) + '\n', resolve));
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`runner: ${err instanceof ScenarioError ? err.message : err?.stack ?? err}`);
    process.exit(err instanceof ScenarioError || err?.code === 'ENOENT' ? EXIT_BAD_SCENARIO : 1);
  },
);
