// devboy's conformance target: an MCP server with the tools, resources and
// prompts that the official MCP conformance suite's server scenarios call, so
// the suite can be run through `devboy serve --http` placed in front of it (and
// directly against it, to tell the proxy's failures from the target's).
//
// Run with the Node 22 installed next to it:
//   PORT=3300 tests/conformance/node_modules/.bin/node tests/conformance/server.mjs
// It serves Streamable HTTP at http://127.0.0.1:$PORT/mcp (PORT defaults to
// 3300; 0 for any free port), logs to stderr and prints one "listening" line to stdout when ready.
// STREAM_DELAY_MS (default 0) delays the answer to each session's first GET.
//
// Written here from the scenarios' descriptions and checks (the suite's
// src/scenarios/server/*.ts), with the low-level Server of the TypeScript SDK
// so every schema and result goes out exactly as written below.

import { randomUUID } from 'node:crypto';
import express from 'express';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  LoggingLevelSchema,
  McpError,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  isInitializeRequest
} from '@modelcontextprotocol/sdk/types.js';

const PORT = Number(process.env.PORT ?? 3300);
const HOST = '127.0.0.1';

const log = (...parts) => console.error('[conformance server]', ...parts);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------
// Content the scenarios ask for

// A 1×1 red pixel.
const RED_PIXEL_PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';

// A tenth of a second of silence: 8 kHz, mono, 8-bit PCM (silence is 0x80).
function silentWav(samples = 800) {
  const wav = Buffer.alloc(44 + samples, 0x80);
  wav.write('RIFF', 0);
  wav.writeUInt32LE(36 + samples, 4);
  wav.write('WAVEfmt ', 8);
  wav.writeUInt32LE(16, 16); // fmt chunk size
  wav.writeUInt16LE(1, 20); // PCM
  wav.writeUInt16LE(1, 22); // channels
  wav.writeUInt32LE(8000, 24); // sample rate
  wav.writeUInt32LE(8000, 28); // byte rate
  wav.writeUInt16LE(1, 32); // block align
  wav.writeUInt16LE(8, 34); // bits per sample
  wav.write('data', 36);
  wav.writeUInt32LE(samples, 40);
  return wav.toString('base64');
}
const SILENT_WAV = silentWav();

const text = (value) => ({ type: 'text', text: value });
const image = () => ({ type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' });
const noArguments = { type: 'object', properties: {} };
const stringArgument = (name, description) => ({
  type: 'object',
  properties: { [name]: { type: 'string', description } },
  required: [name]
});

// ---------------------------------------------------------------------------
// Event store: keeps every SSE event of a session so a client that lost a
// stream can resume it with Last-Event-ID (resumability, SSE polling).

class SessionEventStore {
  #events = new Map(); // event id -> { streamId, message }, in the order stored
  #next = 0;

  async storeEvent(streamId, message) {
    const eventId = String(++this.#next);
    this.#events.set(eventId, { streamId, message });
    return eventId;
  }

  async getStreamIdForEventId(eventId) {
    return this.#events.get(eventId)?.streamId;
  }

  async replayEventsAfter(lastEventId, { send }) {
    const streamId = this.#events.get(lastEventId)?.streamId;
    if (streamId === undefined) throw new Error(`Unknown event id ${lastEventId}`);
    let after = false;
    for (const [eventId, event] of this.#events) {
      if (eventId === lastEventId) after = true;
      // The SDK stores a stream's priming event as `{}`; it is not a message to replay.
      else if (after && event.streamId === streamId && 'jsonrpc' in event.message) {
        await send(eventId, event.message);
      }
    }
    return streamId;
  }
}

// ---------------------------------------------------------------------------
// One MCP server per session; `session` carries that session's state.

const LOG_LEVELS = LoggingLevelSchema.options; // debug … emergency, least severe first

function createMcpServer(session) {
  const server = new Server(
    { name: 'devboy-conformance-target', version: '1.0.0' },
    {
      capabilities: {
        tools: {},
        resources: { subscribe: true },
        prompts: {},
        logging: {},
        completions: {}
      }
    }
  );

  // Log notifications go out on the stream of the request they belong to,
  // filtered by the level the client set with logging/setLevel.
  async function sendLog(extra, level, data) {
    if (LOG_LEVELS.indexOf(level) < LOG_LEVELS.indexOf(session.logLevel)) return;
    await extra.sendNotification({ method: 'notifications/message', params: { level, data } });
  }

  // Asks on the tool call's own stream; the SDK checks the client's elicitation
  // capability and the answer against the schema.
  async function elicit(extra, message, requestedSchema) {
    const result = await server.elicitInput({ message, requestedSchema }, { relatedRequestId: extra.requestId });
    return `action=${result.action}, content=${JSON.stringify(result.content ?? {})}`;
  }

  // Asks on the session's standalone stream (the GET), as a server does
  // that gives no related request (the suite's own client scenarios do):
  // with no such stream open, the SDK drops the request.
  async function elicitOnTheSessionStream(message, requestedSchema) {
    const result = await server.elicitInput({ message, requestedSchema });
    return `action=${result.action}, content=${JSON.stringify(result.content ?? {})}`;
  }

  const tools = [
    {
      name: 'test_simple_text',
      description: 'Returns a simple text response',
      inputSchema: noArguments,
      run: async () => [text('This is a simple text response for testing.')]
    },
    {
      name: 'test_image_content',
      description: 'Returns a 1×1 red PNG image',
      inputSchema: noArguments,
      run: async () => [image()]
    },
    {
      name: 'test_audio_content',
      description: 'Returns a short silent WAV clip',
      inputSchema: noArguments,
      run: async () => [{ type: 'audio', data: SILENT_WAV, mimeType: 'audio/wav' }]
    },
    {
      name: 'test_embedded_resource',
      description: 'Returns an embedded text resource',
      inputSchema: noArguments,
      run: async () => [
        {
          type: 'resource',
          resource: {
            uri: 'test://embedded-resource',
            mimeType: 'text/plain',
            text: 'This is an embedded resource content.'
          }
        }
      ]
    },
    {
      name: 'test_multiple_content_types',
      description: 'Returns text, image and resource content together',
      inputSchema: noArguments,
      run: async () => [
        text('Multiple content types test:'),
        image(),
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 })
          }
        }
      ]
    },
    {
      name: 'test_tool_with_logging',
      description: 'Sends three info log messages while it runs',
      inputSchema: noArguments,
      run: async (_args, extra) => {
        // The scenario checks that several notifications arrive during one call, spaced apart.
        await sendLog(extra, 'info', 'Tool execution started');
        await sleep(50);
        await sendLog(extra, 'info', 'Tool processing data');
        await sleep(50);
        await sendLog(extra, 'info', 'Tool execution completed');
        return [text('Tool with logging executed successfully')];
      }
    },
    {
      name: 'test_error_handling',
      description: 'Always fails, reporting the failure in its result',
      inputSchema: noArguments,
      run: async () => {
        throw new Error('This tool intentionally returns an error for testing');
      }
    },
    {
      name: 'test_tool_with_progress',
      description: 'Reports progress 0, 50 and 100 out of 100 when given a progress token',
      inputSchema: noArguments,
      run: async (_args, extra) => {
        const progressToken = extra._meta?.progressToken;
        for (const progress of [0, 50, 100]) {
          if (progress > 0) await sleep(50);
          if (progressToken !== undefined) {
            await extra.sendNotification({
              method: 'notifications/progress',
              params: { progressToken, progress, total: 100 }
            });
          }
        }
        return [text('Tool with progress executed successfully')];
      }
    },
    {
      name: 'test_sampling',
      description: 'Asks the client to sample an LLM with the given prompt',
      inputSchema: stringArgument('prompt', 'The prompt to send to the LLM'),
      run: async ({ prompt }, extra) => {
        if (!server.getClientCapabilities()?.sampling) {
          throw new Error('The client does not support sampling');
        }
        const result = await server.createMessage(
          { messages: [{ role: 'user', content: text(prompt) }], maxTokens: 100 },
          { relatedRequestId: extra.requestId }
        );
        const reply = result.content.type === 'text' ? result.content.text : JSON.stringify(result.content);
        return [text(`LLM response: ${reply}`)];
      }
    },
    {
      name: 'test_elicitation',
      description: 'Asks the user, through the client, for a username and an email address',
      inputSchema: stringArgument('message', 'The message to show the user'),
      run: async ({ message }, extra) => {
        const outcome = await elicit(extra, message, {
          type: 'object',
          properties: {
            username: { type: 'string', description: "User's response" },
            email: { type: 'string', description: "User's email address" }
          },
          required: ['username', 'email']
        });
        return [text(`User response: ${outcome}`)];
      }
    },
    {
      name: 'test_elicitation_sep1034_defaults',
      description: 'Elicits a form whose fields of every primitive type carry defaults (SEP-1034)',
      inputSchema: noArguments,
      run: async (_args, extra) => {
        const outcome = await elicit(extra, 'Please review the prefilled values', {
          type: 'object',
          properties: {
            name: { type: 'string', default: 'John Doe' },
            age: { type: 'integer', default: 30 },
            score: { type: 'number', default: 95.5 },
            status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },
            verified: { type: 'boolean', default: true }
          }
        });
        return [text(`Elicitation completed: ${outcome}`)];
      }
    },
    {
      name: 'test_elicitation_on_the_session_stream',
      description: "Elicits a name on the session's standalone stream instead of the call's",
      inputSchema: noArguments,
      run: async () => {
        const outcome = await elicitOnTheSessionStream('Your name?', {
          type: 'object',
          properties: { name: { type: 'string', default: 'Jane Doe' } }
        });
        return [text(`Elicitation completed: ${outcome}`)];
      }
    },
    {
      name: 'test_elicitation_sep1330_enums',
      description: 'Elicits a form with each of the five enum forms of SEP-1330',
      inputSchema: noArguments,
      run: async (_args, extra) => {
        const titled = (prefix, titles) =>
          titles.map((title, i) => ({ const: `${prefix}${i + 1}`, title }));
        const outcome = await elicit(extra, 'Please pick some options', {
          type: 'object',
          properties: {
            untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
            titledSingle: {
              type: 'string',
              oneOf: titled('value', ['First Option', 'Second Option', 'Third Option'])
            },
            // The deprecated form: titles in a parallel enumNames array.
            legacyEnum: {
              type: 'string',
              enum: ['opt1', 'opt2', 'opt3'],
              enumNames: ['Option One', 'Option Two', 'Option Three']
            },
            untitledMulti: {
              type: 'array',
              items: { type: 'string', enum: ['option1', 'option2', 'option3'] }
            },
            titledMulti: {
              type: 'array',
              items: { anyOf: titled('value', ['First Choice', 'Second Choice', 'Third Choice']) }
            }
          }
        });
        return [text(`Elicitation completed: ${outcome}`)];
      }
    },
    {
      name: 'json_schema_2020_12_tool',
      description: 'Tool with JSON Schema 2020-12 features',
      // Listed verbatim: the scenario checks that $schema, $defs and
      // additionalProperties survive into tools/list.
      inputSchema: {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        $defs: {
          address: {
            type: 'object',
            properties: { street: { type: 'string' }, city: { type: 'string' } }
          }
        },
        properties: {
          name: { type: 'string' },
          address: { $ref: '#/$defs/address' }
        },
        additionalProperties: false
      },
      run: async (args) => [text(`Received: ${JSON.stringify(args)}`)]
    },
    {
      name: 'test_reconnection',
      description: 'Closes its SSE stream mid-call; the result is replayed when the client resumes',
      inputSchema: noArguments,
      run: async (_args, extra) => {
        // The suite posts this call with MCP-Protocol-Version 2025-03-26, for
        // which the SDK writes no priming event, so a notification goes first
        // to give the client an event id to resume from (sent whatever the log
        // level: the resumption depends on it). The result, sent after the
        // stream is gone, waits in the event store for the client's GET with
        // Last-Event-ID.
        await extra.sendNotification({
          method: 'notifications/message',
          params: { level: 'info', data: 'Closing this stream; resume it with Last-Event-ID' }
        });
        session.transport.closeSSEStream(extra.requestId);
        await sleep(100);
        return [text('Reconnection test completed: the result came after the stream was closed')];
      }
    }
  ];
  const toolsByName = new Map(tools.map((tool) => [tool.name, tool]));

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: tools.map(({ name, description, inputSchema }) => ({ name, description, inputSchema }))
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = toolsByName.get(request.params.name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    const args = request.params.arguments ?? {};
    const missing = (tool.inputSchema.required ?? []).filter((name) => !(name in args));
    if (missing.length > 0) {
      throw new McpError(ErrorCode.InvalidParams, `Missing arguments: ${missing.join(', ')}`);
    }
    // A failing tool is reported in its result (isError), not as a protocol error.
    try {
      return { content: await tool.run(args, extra) };
    } catch (error) {
      return { isError: true, content: [text(error instanceof Error ? error.message : String(error))] };
    }
  });

  const resources = [
    {
      uri: 'test://static-text',
      name: 'static-text',
      description: 'A static text resource',
      mimeType: 'text/plain',
      contents: { text: 'This is the content of the static text resource.' }
    },
    {
      uri: 'test://static-binary',
      name: 'static-binary',
      description: 'A static binary resource (a 1×1 red PNG)',
      mimeType: 'image/png',
      contents: { blob: RED_PIXEL_PNG }
    },
    {
      uri: 'test://watched-resource',
      name: 'watched-resource',
      description: 'A resource clients may subscribe to',
      mimeType: 'text/plain',
      contents: { text: 'This resource can be watched for updates.' }
    }
  ];
  const resourcesByUri = new Map(resources.map((resource) => [resource.uri, resource]));
  const TEMPLATE_URI = /^test:\/\/template\/([^/]+)\/data$/;
  const RESOURCE_NOT_FOUND = -32002; // the spec's code; the SDK's ErrorCode has no name for it

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: resources.map(({ contents, ...listing }) => listing)
  }));

  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [
      {
        uriTemplate: 'test://template/{id}/data',
        name: 'template-data',
        description: 'Data for the given id',
        mimeType: 'application/json'
      }
    ]
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async ({ params: { uri } }) => {
    const resource = resourcesByUri.get(uri);
    if (resource) return { contents: [{ uri, mimeType: resource.mimeType, ...resource.contents }] };
    const match = TEMPLATE_URI.exec(uri);
    if (match) {
      const id = decodeURIComponent(match[1]);
      const data = { id, templateTest: true, data: `Data for ID: ${id}` };
      return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(data) }] };
    }
    throw new McpError(RESOURCE_NOT_FOUND, `Resource not found: ${uri}`);
  });

  // Subscriptions are tracked per session; these resources never change, so
  // no notifications/resources/updated is ever due.
  server.setRequestHandler(SubscribeRequestSchema, async ({ params: { uri } }) => {
    session.subscriptions.add(uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, async ({ params: { uri } }) => {
    session.subscriptions.delete(uri);
    return {};
  });

  const prompts = [
    {
      name: 'test_simple_prompt',
      description: 'A prompt without arguments',
      messages: () => [{ role: 'user', content: text('This is a simple prompt for testing.') }]
    },
    {
      name: 'test_prompt_with_arguments',
      description: 'A prompt that puts its two arguments into its text',
      arguments: [
        { name: 'arg1', description: 'First test argument', required: true },
        { name: 'arg2', description: 'Second test argument', required: true }
      ],
      messages: ({ arg1, arg2 }) => [
        { role: 'user', content: text(`Prompt with arguments: arg1='${arg1}', arg2='${arg2}'`) }
      ]
    },
    {
      name: 'test_prompt_with_embedded_resource',
      description: 'A prompt that embeds the resource it is given',
      arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }],
      messages: ({ resourceUri }) => [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' }
          }
        },
        { role: 'user', content: text('Please process the embedded resource above.') }
      ]
    },
    {
      name: 'test_prompt_with_image',
      description: 'A prompt with an image',
      messages: () => [
        { role: 'user', content: image() },
        { role: 'user', content: text('Please analyze the image above.') }
      ]
    }
  ];
  const promptsByName = new Map(prompts.map((prompt) => [prompt.name, prompt]));

  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: prompts.map(({ name, description, arguments: args }) => ({ name, description, arguments: args }))
  }));

  server.setRequestHandler(GetPromptRequestSchema, async ({ params }) => {
    const prompt = promptsByName.get(params.name);
    if (!prompt) throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${params.name}`);
    const args = params.arguments ?? {};
    const missing = (prompt.arguments ?? []).filter((arg) => arg.required && !(arg.name in args));
    if (missing.length > 0) {
      throw new McpError(ErrorCode.InvalidParams, `Missing arguments: ${missing.map((arg) => arg.name).join(', ')}`);
    }
    return { description: prompt.description, messages: prompt.messages(args) };
  });

  // Completion candidates by reference (prompt name or template URI), then argument.
  const completions = {
    test_prompt_with_arguments: {
      arg1: ['testValue1', 'testValue2', 'hello'],
      arg2: ['testValue1', 'testValue2', 'world']
    },
    'test://template/{id}/data': { id: ['1', '2', '3', '123'] }
  };

  server.setRequestHandler(CompleteRequestSchema, async ({ params: { ref, argument } }) => {
    const candidates = completions[ref.type === 'ref/prompt' ? ref.name : ref.uri]?.[argument.name] ?? [];
    const values = candidates.filter((value) => value.startsWith(argument.value));
    return { completion: { values, total: values.length, hasMore: false } };
  });

  // Replaces the SDK's own handler so the level lives with the session's other state.
  server.setRequestHandler(SetLevelRequestSchema, async ({ params: { level } }) => {
    session.logLevel = level;
    return {};
  });

  return server;
}

// ---------------------------------------------------------------------------
// HTTP: sessions by mcp-session-id, each with its own transport and server.

const sessions = new Map(); // session id -> session

async function openSession() {
  const session = { logLevel: 'debug', subscriptions: new Set() };
  session.transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: randomUUID,
    eventStore: new SessionEventStore(),
    // Sent in the priming event of each stream: how long a client waits before reconnecting.
    retryInterval: 500,
    onsessioninitialized: (sessionId) => {
      sessions.set(sessionId, session);
      log(`session ${sessionId} opened (${sessions.size} open)`);
    }
  });
  session.transport.onclose = () => {
    const { sessionId } = session.transport;
    if (sessionId !== undefined && sessions.delete(sessionId)) {
      log(`session ${sessionId} closed (${sessions.size} open)`);
    }
  };
  const server = createMcpServer(session);
  server.onerror = (error) => log('server error:', error.message);
  await server.connect(session.transport);
  return session;
}

const jsonRpcError = (res, status, code, message) =>
  res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id: null });

// DNS-rebinding protection: a browser tricked into sending a request here
// carries the attacker's name in Host and Origin; only loopback names pass,
// on any port.
const LOOPBACK_HOSTNAMES = new Set(['localhost', '127.0.0.1', '[::1]']);
const hostnameOf = (url) => URL.parse(url)?.hostname;

function loopbackOnly(req, res, next) {
  const { host, origin } = req.headers;
  const hostOk = host !== undefined && LOOPBACK_HOSTNAMES.has(hostnameOf(`http://${host}`));
  const originOk = origin === undefined || LOOPBACK_HOSTNAMES.has(hostnameOf(origin));
  if (hostOk && originOk) return next();
  log(`rejected a request with Host ${host} and Origin ${origin}`);
  jsonRpcError(res, 403, -32000, 'Forbidden: only localhost Host and Origin headers are accepted');
}

function sessionOf(req, res) {
  const sessionId = req.headers['mcp-session-id'];
  if (sessionId === undefined) {
    jsonRpcError(res, 400, -32000, 'Bad Request: no mcp-session-id header');
    return undefined;
  }
  const session = sessions.get(sessionId);
  if (!session) jsonRpcError(res, 404, -32001, 'Session not found');
  return session;
}

const app = express();
app.use(loopbackOnly);
app.use(express.json({ limit: '4mb' }));

app.post('/mcp', async (req, res) => {
  if (req.headers['mcp-session-id'] === undefined) {
    if (!isInitializeRequest(req.body)) {
      return jsonRpcError(res, 400, -32000, 'Bad Request: a new session starts with an initialize request');
    }
    const session = await openSession();
    return session.transport.handleRequest(req, res, req.body);
  }
  const session = sessionOf(req, res);
  if (session) await session.transport.handleRequest(req, res, req.body);
});

// STREAM_DELAY_MS holds back the answer to a session's first GET, as a
// busy machine can: until it is answered, the session has no stream for
// the requests that belong to no call.
const STREAM_DELAY_MS = Number(process.env.STREAM_DELAY_MS ?? 0);

// GET opens (or, with Last-Event-ID, resumes) an SSE stream; DELETE ends the session.
for (const method of ['get', 'delete']) {
  app[method]('/mcp', async (req, res) => {
    if (method === 'get' && req.headers['last-event-id'] === undefined) await sleep(STREAM_DELAY_MS);
    const session = sessionOf(req, res);
    if (session) await session.transport.handleRequest(req, res);
  });
}

app.all('/mcp', (_req, res) => {
  res.set('Allow', 'GET, POST, DELETE');
  jsonRpcError(res, 405, -32000, 'Method not allowed');
});

app.use((error, _req, res, _next) => {
  log('request failed:', error.message);
  if (res.headersSent) return res.end();
  if (error.type === 'entity.parse.failed') return jsonRpcError(res, 400, ErrorCode.ParseError, 'Parse error');
  // Other body-parser errors (a body too large, say) carry their own status.
  jsonRpcError(res, error.status ?? 500, ErrorCode.InternalError, error.expose ? error.message : 'Internal error');
});

const httpServer = app.listen(PORT, HOST, (error) => {
  if (error) {
    log(`cannot listen on ${HOST}:${PORT}: ${error.message}`);
    process.exit(1);
  }
  // PORT=0 lets the system choose; the line says which port it chose.
  console.log(`conformance server listening on http://${HOST}:${httpServer.address().port}/mcp`);
});

async function shutDown(signal) {
  log(`${signal}: closing ${sessions.size} session(s)`);
  await Promise.allSettled([...sessions.values()].map((session) => session.transport.close()));
  httpServer.close(() => process.exit(0));
  httpServer.closeAllConnections(); // streams still open would hold up the exit
}
process.on('SIGINT', shutDown);
process.on('SIGTERM', shutDown);
