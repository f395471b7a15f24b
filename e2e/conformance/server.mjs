// server.mjs is the downstream fixture of e2e/conformance_test.go: an MCP
// server over streamable HTTP that meets the server requirements of the
// official conformance suite (@modelcontextprotocol/conformance 0.1.16): its
// test_* tools, test:// resources and template, prompts and completions,
// logging, sampling and elicitation during a call, resumable SSE streams and
// DNS rebinding protection. The suite ships no such server, so this one is
// written from the scenarios' stated requirements with the TypeScript SDK
// pinned beside the suite.
//
//   node server.mjs            # listens on 127.0.0.1, a free port
//
// Once listening it prints one line on stdout,
//
//   conformance fixture: listening on http://127.0.0.1:PORT/mcp
//
// which the Go test waits for. SIGTERM closes every session and exits.
import { randomUUID } from 'node:crypto';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  LATEST_PROTOCOL_VERSION,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const HOST = '127.0.0.1';

// A 1x1 PNG (one red pixel).
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';

// wav is a valid PCM WAV file of 8 silent 8-bit samples at 8 kHz, base64.
function wav() {
  const samples = 8;
  const b = Buffer.alloc(44 + samples, 0x80);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + samples, 4);
  b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16); // fmt chunk size
  b.writeUInt16LE(1, 20); // PCM
  b.writeUInt16LE(1, 22); // mono
  b.writeUInt32LE(8000, 24); // sample rate
  b.writeUInt32LE(8000, 28); // byte rate
  b.writeUInt16LE(1, 32); // block align
  b.writeUInt16LE(8, 34); // bits per sample
  b.write('data', 36);
  b.writeUInt32LE(samples, 40);
  return b.toString('base64');
}
const WAV = wav();

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (t) => ({ type: 'text', text: t });
const noArgs = { type: 'object', properties: {} };

const TOOLS = [
  { name: 'test_simple_text', description: 'Returns simple text content', inputSchema: noArgs },
  { name: 'test_image_content', description: 'Returns image content', inputSchema: noArgs },
  { name: 'test_audio_content', description: 'Returns audio content', inputSchema: noArgs },
  { name: 'test_embedded_resource', description: 'Returns an embedded resource', inputSchema: noArgs },
  { name: 'test_multiple_content_types', description: 'Returns text, image and resource content', inputSchema: noArgs },
  { name: 'test_tool_with_logging', description: 'Sends three log messages while it runs', inputSchema: noArgs },
  { name: 'test_error_handling', description: 'Always fails with isError', inputSchema: noArgs },
  { name: 'test_tool_with_progress', description: 'Reports progress 0, 50, 100 of 100', inputSchema: noArgs },
  {
    name: 'test_sampling',
    description: 'Asks the client to sample its model',
    inputSchema: { type: 'object', properties: { prompt: { type: 'string', description: 'The prompt to send' } }, required: ['prompt'] },
  },
  {
    name: 'test_elicitation',
    description: 'Asks the user for a username and email',
    inputSchema: { type: 'object', properties: { message: { type: 'string', description: 'The message to show' } }, required: ['message'] },
  },
  { name: 'test_elicitation_sep1034_defaults', description: 'Elicitation with a default for every primitive type', inputSchema: noArgs },
  { name: 'test_elicitation_sep1330_enums', description: 'Elicitation with every enum form', inputSchema: noArgs },
  {
    name: 'json_schema_2020_12_tool',
    description: 'Tool with JSON Schema 2020-12 features',
    inputSchema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
      properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
      additionalProperties: false,
    },
  },
  { name: 'test_reconnection', description: 'Closes its SSE stream before answering, so the client resumes', inputSchema: noArgs },
];

const RESOURCES = [
  { uri: 'test://static-text', name: 'static-text', description: 'A static text resource', mimeType: 'text/plain' },
  { uri: 'test://static-binary', name: 'static-binary', description: 'A static binary resource (PNG)', mimeType: 'image/png' },
  { uri: 'test://watched-resource', name: 'watched-resource', description: 'A resource to subscribe to', mimeType: 'text/plain' },
];

const TEMPLATES = [
  { uriTemplate: 'test://template/{id}/data', name: 'template-data', description: 'Data for an id', mimeType: 'application/json' },
];

const PROMPTS = [
  { name: 'test_simple_prompt', description: 'A prompt without arguments' },
  {
    name: 'test_prompt_with_arguments',
    description: 'A prompt with two arguments',
    arguments: [
      { name: 'arg1', description: 'First test argument', required: true },
      { name: 'arg2', description: 'Second test argument', required: true },
    ],
  },
  {
    name: 'test_prompt_with_embedded_resource',
    description: 'A prompt that embeds a resource',
    arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }],
  },
  { name: 'test_prompt_with_image', description: 'A prompt with an image' },
];

// Completion candidates by prompt argument or template variable.
const CANDIDATES = {
  arg1: ['paris', 'park', 'party', 'test', 'testing'],
  arg2: ['world', 'word', 'work'],
  id: ['123', '456', '789'],
};

const ELICIT_DEFAULTS = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'User name', default: 'John Doe' },
    age: { type: 'integer', description: 'User age', default: 30 },
    score: { type: 'number', description: 'User score', default: 95.5 },
    status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
    verified: { type: 'boolean', description: 'Verification status', default: true },
  },
};

const ELICIT_ENUMS = {
  type: 'object',
  properties: {
    untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
    titledSingle: {
      type: 'string',
      oneOf: [
        { const: 'value1', title: 'First Option' },
        { const: 'value2', title: 'Second Option' },
        { const: 'value3', title: 'Third Option' },
      ],
    },
    legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
    untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
    titledMulti: {
      type: 'array',
      items: {
        anyOf: [
          { const: 'value1', title: 'First Choice' },
          { const: 'value2', title: 'Second Choice' },
          { const: 'value3', title: 'Third Choice' },
        ],
      },
    },
  },
};

// elicit asks the client through the call's own stream and reports the answer.
async function elicit(extra, message, requestedSchema) {
  try {
    const r = await extra.sendRequest({ method: 'elicitation/create', params: { message, requestedSchema } }, ElicitResultSchema);
    return { content: [text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`)] };
  } catch (err) {
    return { isError: true, content: [text(`Elicitation failed: ${err.message}`)] };
  }
}

async function callTool(request, extra) {
  const args = request.params.arguments ?? {};
  switch (request.params.name) {
    case 'test_simple_text':
      return { content: [text('This is a simple text response for testing.')] };
    case 'test_image_content':
      return { content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] };
    case 'test_audio_content':
      return { content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] };
    case 'test_embedded_resource':
      return {
        content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }],
      };
    case 'test_multiple_content_types':
      return {
        content: [
          text('Multiple content types test:'),
          { type: 'image', data: PNG, mimeType: 'image/png' },
          { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } },
        ],
      };
    case 'test_tool_with_logging': {
      const log = (data) => extra.sendNotification({ method: 'notifications/message', params: { level: 'info', logger: 'fixture', data } });
      await log('Tool execution started');
      await sleep(50);
      await log('Tool processing data');
      await sleep(50);
      await log('Tool execution completed');
      return { content: [text('Tool with logging executed successfully')] };
    }
    case 'test_error_handling':
      return { isError: true, content: [text('This tool intentionally returns an error for testing')] };
    case 'test_tool_with_progress': {
      const token = request.params._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (token !== undefined) {
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } });
        }
        if (progress < 100) await sleep(50);
      }
      return { content: [text('Tool with progress executed successfully')] };
    }
    case 'test_sampling':
      try {
        const r = await extra.sendRequest(
          {
            method: 'sampling/createMessage',
            params: { messages: [{ role: 'user', content: text(String(args.prompt ?? '')) }], maxTokens: 100 },
          },
          CreateMessageResultSchema,
        );
        const reply = r.content?.type === 'text' ? r.content.text : JSON.stringify(r.content);
        return { content: [text(`LLM response: ${reply}`)] };
      } catch (err) {
        return { isError: true, content: [text(`Sampling failed: ${err.message}`)] };
      }
    case 'test_elicitation':
      return elicit(extra, String(args.message ?? ''), {
        type: 'object',
        properties: {
          username: { type: 'string', description: "User's response" },
          email: { type: 'string', description: "User's email address" },
        },
        required: ['username', 'email'],
      });
    case 'test_elicitation_sep1034_defaults':
      return elicit(extra, 'Please review these values; each has a default', ELICIT_DEFAULTS);
    case 'test_elicitation_sep1330_enums':
      return elicit(extra, 'Please choose from each list', ELICIT_ENUMS);
    case 'json_schema_2020_12_tool':
      return { content: [text(`Received: ${JSON.stringify(args)}`)] };
    case 'test_reconnection':
      // The SDK offers closeSSEStream only when the client can resume (an
      // event store here, 2025-11-25 or later there); the result then waits
      // in the event store for the client's GET with Last-Event-ID.
      await sleep(50);
      extra.closeSSEStream?.();
      await sleep(100);
      return { content: [text('Reconnection test completed successfully')] };
    default:
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
  }
}

function readResource(uri) {
  switch (uri) {
    case 'test://static-text':
      return { contents: [{ uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }] };
    case 'test://static-binary':
      return { contents: [{ uri, mimeType: 'image/png', blob: PNG }] };
    case 'test://watched-resource':
      return { contents: [{ uri, mimeType: 'text/plain', text: 'The watched resource, as it is now.' }] };
  }
  const m = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
  if (m) {
    const id = decodeURIComponent(m[1]);
    return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] };
  }
  // -32002: the resource-not-found code of the session-based revisions.
  throw new McpError(-32002, 'Resource not found', { uri });
}

function getPrompt(name, args) {
  switch (name) {
    case 'test_simple_prompt':
      return { messages: [{ role: 'user', content: text('This is a simple prompt for testing.') }] };
    case 'test_prompt_with_arguments':
      return { messages: [{ role: 'user', content: text(`Prompt with arguments: arg1='${args.arg1 ?? ''}', arg2='${args.arg2 ?? ''}'`) }] };
    case 'test_prompt_with_embedded_resource':
      return {
        messages: [
          { role: 'user', content: { type: 'resource', resource: { uri: args.resourceUri ?? 'test://example-resource', mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
          { role: 'user', content: text('Please process the embedded resource above.') },
        ],
      };
    case 'test_prompt_with_image':
      return {
        messages: [
          { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
          { role: 'user', content: text('Please analyze the image above.') },
        ],
      };
  }
  throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${name}`);
}

// newServer is one session's MCP server.
function newServer() {
  const server = new Server(
    { name: 'troupe-conformance-fixture', version: '1.0.0' },
    {
      capabilities: {
        tools: {},
        resources: { subscribe: true },
        prompts: {},
        completions: {},
        logging: {},
      },
    },
  );
  const subscribed = new Set();
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, callTool);
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: RESOURCES }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: TEMPLATES }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => readResource(request.params.uri));
  server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    subscribed.add(request.params.uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    subscribed.delete(request.params.uri);
    return {};
  });
  server.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts: PROMPTS }));
  server.setRequestHandler(GetPromptRequestSchema, async (request) => getPrompt(request.params.name, request.params.arguments ?? {}));
  server.setRequestHandler(CompleteRequestSchema, async (request) => {
    const { name, value } = request.params.argument;
    const values = (CANDIDATES[name] ?? []).filter((v) => v.startsWith(value ?? ''));
    return { completion: { values, total: values.length, hasMore: false } };
  });
  return server;
}

// memoryEventStore keeps one session's last MAX_EVENTS SSE events so a
// client can resume a stream with Last-Event-ID.
const MAX_EVENTS = 1000;
function memoryEventStore() {
  const events = []; // { id, streamId, message }
  let next = 0;
  return {
    async storeEvent(streamId, message) {
      const id = `${streamId}:${next++}`;
      events.push({ id, streamId, message });
      if (events.length > MAX_EVENTS) events.shift();
      return id;
    },
    async getStreamIdForEventId(eventId) {
      return events.find((e) => e.id === eventId)?.streamId;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const at = events.findIndex((e) => e.id === lastEventId);
      if (at < 0) return '';
      const { streamId } = events[at];
      for (const e of events.slice(at + 1)) {
        if (e.streamId === streamId && Object.keys(e.message).length > 0) await send(e.id, e.message);
      }
      return streamId;
    },
  };
}

const sessions = new Map(); // session id -> { transport, server, version }

// asNegotiated makes a request's MCP-Protocol-Version header say what its
// session negotiated. The suite's SSE scenarios send 2025-03-26 on sessions
// that negotiated 2025-11-25, and the SDK decides from the header alone
// whether the client can resume a stream (priming events, closeSSEStream);
// a server answers by the version its session negotiated.
function asNegotiated(req, version) {
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].toLowerCase() === 'mcp-protocol-version') raw[i + 1] = version;
  }
  if (req.headers['mcp-protocol-version'] !== undefined) req.headers['mcp-protocol-version'] = version;
}

// createMcpExpressApp on 127.0.0.1 refuses other Host headers (DNS
// rebinding protection) and parses JSON bodies.
const app = createMcpExpressApp({ host: HOST });

app.all('/mcp', async (req, res) => {
  const id = req.headers['mcp-session-id'];
  try {
    if (id !== undefined) {
      const s = sessions.get(id);
      if (!s) {
        res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
        return;
      }
      asNegotiated(req, s.version);
      await s.transport.handleRequest(req, res, req.body);
      return;
    }
    if (req.method !== 'POST' || req.body?.method !== 'initialize') {
      res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: no session; send initialize first' }, id: null });
      return;
    }
    const server = newServer();
    const entry = { server };
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: memoryEventStore(),
      retryInterval: 200,
      onsessioninitialized: (sid) => sessions.set(sid, entry),
    });
    entry.transport = transport;
    // The version the SDK answers initialize with (its own rule).
    const requested = req.body.params?.protocolVersion;
    entry.version = SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : LATEST_PROTOCOL_VERSION;
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  } catch (err) {
    process.stderr.write(`conformance fixture: ${err.stack ?? err}\n`);
    if (!res.headersSent) res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null });
  }
});

const listener = app.listen(Number(process.env.PORT ?? 0), HOST, () => {
  const { port } = listener.address();
  process.stdout.write(`conformance fixture: listening on http://${HOST}:${port}/mcp\n`);
});

process.on('SIGTERM', async () => {
  for (const { transport } of sessions.values()) await transport.close().catch(() => {});
  listener.close(() => process.exit(0));
  listener.closeAllConnections?.();
});
