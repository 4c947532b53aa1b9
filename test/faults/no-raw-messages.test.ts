// No unexpected error's raw message reaches a client, on the routes and paths the fault matrix
// (test/faults/matrix.test.ts) does not walk (docs/contract.md, Error codes: INTERNAL_SERVER_ERROR is answered with no
// message of its own on every transport, and logged in full with the request id; the plain HTTP routes answer
// `server_error`). One case per route × fault. Where only an internal throw reaches a path, the case replaces ONE
// internal method of the running gateway to throw SECRET (restored after the case), and says why.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { ServerResponse } from 'node:http';
import { syncBuiltinESMExports } from 'node:module';
import { Readable } from 'node:stream';
import { GraphQLError, type DocumentNode, type OperationDefinitionNode } from 'graphql';
import { createClient as createSseClient } from 'graphql-sse';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

import { scopeOfApp } from '../../src/auth/caller.js';
import { ErrorCode, GatewayError } from '../../src/errors.js';
import { SharedResultStream } from '../../src/execution/run.js';
import { SharedExecution } from '../../src/execution/shared.js';
import { McpResources } from '../../src/server/mcp/resources.js';
import { appsFile, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { AUDIENCE, EVERY_APP_SCOPE, ISSUER, sign, signingKey, startJwksServer } from '../helpers/jwt.js';
import { mcpClient } from '../helpers/mcp.js';
import { postNotification, wsClient } from '../helpers/mobile-id.js';
import { operationOver, type AnsweredError, type Transport } from '../helpers/operation.js';
import { postCompletion, registerVerifications } from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const KEY = 'no-raw-messages-app-key-01';
const OPERATOR_KEY = 'no-raw-messages-operator-01';
const SECRET = 'secret-internal-detail /var/lib/x SELECT * FROM t';
/** What no answer may hold: the secret's parts, a stack frame, a source path. */
const LEAKS = [
  /secret-internal-detail/,
  /\/var\/lib\/x/,
  /SELECT \* FROM/,
  /\bat [^\n"]*:\d+:\d+/,
  /node_modules|\.ts:\d+/,
];

let gw: TestGateway;
beforeAll(async () => {
  // An app with every app scope and both approve scopes (the approvals page's), and a reads budget, so that
  // every operation passes the admission's rate limit (the seam the admission cases make throw).
  const scopes = [...EVERY_APP_SCOPE.split(' '), 'cloud:approve', 'identity:approve'];
  gw = await startTestGateway({
    GATEWAY_APPS_FILE: appsFile('no-raw-messages-', [{ name: 'app', scopes, key: KEY }]),
    OPERATOR_API_KEYS: `sre:${OPERATOR_KEY}`,
    RATE_LIMIT_READS: '100000/1h',
  });
});
afterAll(async () => {
  await gw?.close();
});
afterEach(() => {
  vi.restoreAllMocks();
  // A case that replaced a function of node:fs made the modules that import it by name see it (readFails): they see
  // the real one again.
  syncBuiltinESMExports();
});

const thrown = () => new Error(SECRET);

/**
 * SECRET with a mark of one case: a line logged with it is that case's, whenever it is logged (a copy a teardown path
 * logs late is counted against its own case, not against the case running then).
 */
const marked = (mark: string) => `${SECRET} ${mark}`;

/**
 * Whether a log line has `text` and, with `requestId`, is a line of that request: its requestId is the id, under the
 * transport's prefix (`sse:`, `ws:`).
 */
function lineOf(line: string, text: string, requestId?: string): boolean {
  if (!line.includes(text)) return false;
  if (requestId === undefined) return true;
  const named = (JSON.parse(line) as { requestId?: unknown }).requestId;
  return typeof named === 'string' && (named === requestId || named.endsWith(`:${requestId}`));
}

/** The app's live subscriptions on the gateway (APP_LIVE_SUBSCRIPTIONS' count). */
const live = () => gw.gateway.services.liveSubscriptions.of(scopeOfApp('app'));

/** A subscription's case is settled when the app's live subscriptions are back to what they were: its stream ended. */
const released: NonNullable<Case['settled']> = {
  prepare: () => live(),
  until: (before) => live() === before,
  what: 'the subscription released',
};

/** A wait's limit: long, so that it only ends a real failure, never a slow machine's success. */
const LONG = 20_000;

/** An error the log cannot read: a property whose getter throws SECRET (as a bug's error object may have). */
const unreadable = (): Error => {
  const err = thrown();
  Object.defineProperty(err, 'detail', {
    enumerable: true,
    get() {
      throw thrown();
    },
  });
  return err;
};

/**
 * The first answer of `path` that starts 200 throws `marked(mark)` where its head is written, before anything was sent
 * (ServerResponse's writeHead replaced: every other answer is written as usual).
 */
const headThrows = (path: string, mark: string) => {
  const real = ServerResponse.prototype.writeHead;
  let thrownOnce = false;
  return vi.spyOn(ServerResponse.prototype, 'writeHead').mockImplementation(function (
    this: ServerResponse,
    ...args: unknown[]
  ) {
    if (!thrownOnce && args[0] === 200 && this.req?.url?.split('?')[0] === path) {
      thrownOnce = true;
      throw new Error(marked(mark));
    }
    return (real as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as never);
};

/**
 * The first read of a file whose path ends with `name` fails with `marked(mark)` once its first bytes were read (as a
 * file cut by a rebuild): node:fs's createReadStream replaced, and the modules that import it by name made to see it.
 */
const readFails = (name: string, mark: string) => {
  const real = fs.createReadStream;
  let failed = false;
  vi.spyOn(fs, 'createReadStream').mockImplementation(((path: fs.PathLike, options?: unknown) => {
    if (failed || !String(path).endsWith(name)) return real(path, options as never);
    failed = true;
    let started = false;
    return new Readable({
      read() {
        if (started) this.destroy(new Error(marked(mark)));
        else this.push('/* the first bytes */');
        started = true;
      },
    });
  }) as never);
  syncBuiltinESMExports();
};

/** The agent plans' one read of the pending ones (the approvals page's query and subscription both read it). */
const plansUnreadable = () =>
  vi
    .spyOn(gw.gateway.services.agentPlans as unknown as { pending: () => unknown }, 'pending')
    .mockRejectedValue(thrown());

/** What a client got: the text it received, and what the case checks of it. */
interface Got {
  readonly raw: string;
  readonly status?: number;
  /** The code the answer carries: `error` of an OAuth body, `extensions.code` or MCP's `code` of the first error. */
  readonly code?: unknown;
  /** The request id the answer named (X-Request-Id), when it has one. */
  readonly requestId?: string;
}

interface Case {
  readonly route: string;
  readonly fault: string;
  /** Makes the fault (a real one, or one internal method replaced). */
  readonly provoke: () => unknown;
  readonly send: () => Promise<Got>;
  readonly status?: number;
  readonly code?: unknown;
  /** The log has SECRET in full (false: nothing threw on this path, the answer is a normal one). */
  readonly logged: boolean;
  /** Text the log has on exactly one line, which names the request (the error logged once, not once per layer). */
  readonly loggedOnce?: string;
  /**
   * The id the case's request carries (X-Request-Id), when `loggedOnce` is no text of this case alone: only a line that
   * names it is the case's, so a copy another case logs late is never counted against this one.
   */
  readonly requestId?: string;
  /**
   * Waits for the event after which the case's operation can log nothing more (a subscription's release), before its
   * lines are counted. `before` is what `prepare` read before the case ran.
   */
  readonly settled?: { prepare: () => number; until: (before: number) => boolean; what: string };
}

async function http(
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Got> {
  const res = await request(`${gw.url}${path}`, { method: (init.method ?? 'GET') as 'GET', ...init });
  const raw = await res.body.text();
  let code: unknown;
  try {
    const body = JSON.parse(raw) as { error?: unknown; errors?: Array<{ extensions?: { code?: unknown } }> };
    code = body.error ?? body.errors?.[0]?.extensions?.code;
  } catch {
    code = undefined;
  }
  return { raw, status: res.statusCode, code, requestId: String(res.headers['x-request-id']) };
}

const auth = (key = KEY) => ({ authorization: `Bearer ${key}` });

/** A transport's answer to one operation, as its client got it. */
async function over(transport: Transport, query: string, requestId?: string): Promise<Got> {
  const answer = await operationOver(transport, gw, KEY, { query }, requestId);
  return {
    raw: answer.raw,
    code: answer.errors?.[0]?.extensions?.code,
    ...(answer.status !== undefined ? { status: answer.status } : {}),
    ...(answer.requestId !== undefined ? { requestId: answer.requestId } : {}),
  };
}

/** An MCP request's JSON-RPC answer, over the SDK's client. */
async function mcp(work: (client: Awaited<ReturnType<typeof mcpClient>>) => Promise<unknown>): Promise<Got> {
  const client = await mcpClient(gw, { key: KEY });
  try {
    const result = await work(client);
    const structured = (result as { structuredContent?: { errors?: Array<{ code?: unknown }> } }).structuredContent;
    return { raw: JSON.stringify(result), code: structured?.errors?.[0]?.code };
  } catch (err) {
    // A protocol error: the SDK's McpError with the JSON-RPC code and message.
    return { raw: JSON.stringify({ message: (err as Error).message, ...(err as object) }), code: (err as any).code };
  } finally {
    await client.close();
  }
}

/** One JSON-RPC request to /mcp over plain HTTP, read whole (a listen stream's first event included). */
async function mcpRaw(body: unknown): Promise<Got> {
  const res = await request(`${gw.url}/mcp`, {
    method: 'POST',
    headers: {
      ...auth(),
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
    },
    body: JSON.stringify(body),
  });
  const reader = res.body;
  let raw = '';
  // A listen stream stays open: its first event (or the error that ends it) is what the client got.
  for await (const chunk of reader) {
    raw += String(chunk);
    if (raw.includes('\n\n') || raw.trimEnd().endsWith('}')) break;
  }
  reader.destroy();
  let code: unknown;
  const json = /\{.*\}/s.exec(raw)?.[0];
  try {
    code = json ? (JSON.parse(json) as { error?: { code?: unknown } }).error?.code : undefined;
  } catch {
    code = undefined;
  }
  return { raw, status: res.statusCode, code, requestId: String(res.headers['x-request-id']) };
}

/** A reserved stream of graphql-sse's single-connection mode, connected: its text so far, and its end. */
async function reservedStream(): Promise<{ token: string; text: () => string; close: () => void }> {
  const put = await request(`${gw.url}/graphql/stream`, { method: 'PUT', headers: auth() });
  const token = await put.body.text();
  expect(put.statusCode, token).toBe(201);
  const get = await request(`${gw.url}/graphql/stream`, {
    headers: { ...auth(), accept: 'text/event-stream', 'x-graphql-event-stream-token': token },
  });
  expect(get.statusCode).toBe(200);
  let text = '';
  get.body.on('data', (chunk: Buffer) => (text += chunk.toString()));
  get.body.on('error', () => undefined);
  return { token, text: () => text, close: () => get.body.destroy() };
}

/** An operation added to a reserved stream (POST with its token), and what the stream carried for it. */
async function onReservedStream(query: string): Promise<Got> {
  const stream = await reservedStream();
  try {
    const post = await http('/graphql/stream', {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json', 'x-graphql-event-stream-token': stream.token },
      body: JSON.stringify({ query, extensions: { operationId: 'op-1' } }),
    });
    if (post.status === 202)
      await vi.waitFor(() => expect(stream.text()).toContain('event: complete'), { timeout: LONG });
    const streamed = stream.text();
    const payload = /data: (\{"id":"op-1","payload".*)/.exec(streamed)?.[1];
    const code = payload
      ? (JSON.parse(payload) as { payload: { errors?: Array<{ extensions?: { code?: unknown } }> } }).payload
          .errors?.[0]?.extensions?.code
      : post.code;
    return { raw: `${post.raw}\n${streamed}`, status: post.status!, code, requestId: post.requestId! };
  } finally {
    stream.close();
  }
}

const INTERNAL = 'INTERNAL_SERVER_ERROR';

const CASES: Case[] = [
  // The plain HTTP routes.
  {
    route: 'POST /admin/reload',
    fault: 'a reload step throws something unexpected (not a bad file)',
    // Only an internal throw: every file the reload reads is checked into a ConfigError. The mobile-ID keys' step is
    // the one a reload reaches through the running gateway.
    provoke: () =>
      vi.spyOn(gw.gateway.services.mobileId, 'prepareKeysReload').mockImplementation(() => {
        throw thrown();
      }),
    send: () => http('/admin/reload', { method: 'POST', headers: auth(OPERATOR_KEY) }),
    status: 500,
    code: 'server_error',
    logged: true,
  },
  {
    route: 'GET /readyz',
    fault: 'the store throws',
    provoke: () => vi.spyOn(gw.gateway.services.store, 'ping').mockRejectedValue(thrown()),
    send: () => http('/readyz'),
    status: 503,
    logged: true,
  },
  {
    route: 'GET /healthz',
    fault: 'the store throws',
    provoke: () => vi.spyOn(gw.gateway.services.store, 'ping').mockRejectedValue(thrown()),
    send: () => http('/healthz'),
    status: 200,
    logged: false,
  },
  {
    route: 'GET /metrics',
    fault: 'the registry throws',
    // Only an internal throw: nothing the scrape reads can fail for real (the counts it shows are kept in memory).
    provoke: () => vi.spyOn(gw.gateway.services.metrics.registry, 'metrics').mockRejectedValue(thrown()),
    send: () => http('/metrics'),
    status: 500,
    code: 'server_error',
    logged: true,
  },
  {
    route: 'GET /approvals',
    fault: 'the plans cannot be read',
    provoke: () => plansUnreadable(),
    send: () => http('/approvals'),
    status: 200,
    logged: false,
  },
  {
    route: 'POST /graphql pendingAgentPlans (the approvals page)',
    fault: 'the plans cannot be read',
    provoke: () => plansUnreadable(),
    send: () => over('post', '{ pendingAgentPlans(first: 5) { id } }'),
    status: 200,
    code: INTERNAL,
    logged: true,
  },
  {
    route: 'graphql-ws pendingAgentPlansChanged (the approvals page)',
    fault: 'the plans cannot be read',
    provoke: () => plansUnreadable(),
    send: () => over('ws', 'subscription { pendingAgentPlansChanged(first: 5) { id } }'),
    code: INTERNAL,
    logged: true,
  },
  // The three webhooks, when something unexpected throws once the body was read (not a database fault).
  {
    route: 'POST /webhooks/mobile-id',
    fault: 'the intake throws after the body was read',
    provoke: () => vi.spyOn(gw.gateway.services.mobileId, 'receive').mockRejectedValue(thrown()),
    send: async () => {
      const res = await postNotification(gw, { auth_req_id: randomUUID(), error: 'access_denied' });
      const raw = typeof res.text === 'string' ? res.text : JSON.stringify(res.json);
      return { raw, status: res.status, code: res.json?.error, requestId: String(res.headers['x-request-id']) };
    },
    status: 500,
    code: 'server_error',
    logged: true,
  },
  {
    route: 'POST /webhooks/verification/<token>',
    fault: 'the intake throws after the body was read',
    provoke: () => vi.spyOn(gw.gateway.services.identity, 'receiveCallback').mockRejectedValue(thrown()),
    send: async () => {
      const [[externalId, url]] = [...(await registerVerifications(gw, gw.gateway.sandbox.verification!, KEY, 1))] as [
        [string, string],
      ];
      return http(new URL(url).pathname, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ verificationExternalId: externalId, status: 'COMPLETED' }),
      });
    },
    status: 500,
    code: 'server_error',
    logged: true,
  },
  {
    route: 'POST /webhooks/identification/<token>',
    fault: 'the intake throws after the body was read',
    provoke: () =>
      vi.spyOn(gw.gateway.services.identity.identificationCompletions, 'receive').mockRejectedValue(thrown()),
    send: async () => {
      const created = await gw.graphql(
        `mutation($input: CreateIdentificationInput!) { createIdentification(input: $input) { identification { id callbackUrl } } }`,
        { input: { workflowId: `wf-leak-${randomUUID()}` } },
        { key: KEY },
      );
      const { id, callbackUrl } = created.data!.createIdentification.identification as {
        id: string;
        callbackUrl: string;
      };
      return http(new URL(callbackUrl).pathname, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id, status: 'COMPLETED' }),
      });
    },
    status: 500,
    code: 'server_error',
    logged: true,
  },
  // GraphiQL's assets under odd paths: a real fault each (no such file, a path that does not decode, a climb out).
  ...[
    '/graphql/assets/%E0%A4%A',
    '/graphql/assets/..%2F..%2Fpackage.json',
    '/graphql/assets/no-such-asset.js',
    `/graphql/assets/${'a'.repeat(4000)}.js`,
  ].map((path): Case => ({
    route: `GET ${path.slice(0, 48)}`,
    fault: 'an odd path',
    provoke: () => undefined,
    send: () => http(path, { headers: { accept: 'text/html' } }),
    status: 404,
    logged: false,
  })),
  // GraphiQL's page and an asset whose answer throws before anything was sent: only an internal throw, since every
  // file they read is checked (a missing one is a 404 or a 503 of its own). The route answers server_error and logs
  // the error once with the request's id; the request is never left without an answer.
  {
    route: 'GET /graphql/assets/graphiql.css',
    fault: 'the answer throws before anything was sent',
    provoke: () => headThrows('/graphql/assets/graphiql.css', '[asset head throws]'),
    send: () => http('/graphql/assets/graphiql.css'),
    status: 500,
    code: 'server_error',
    logged: true,
    loggedOnce: '[asset head throws]',
  },
  {
    route: 'GET /graphql/assets/graphiql.css',
    fault: 'the file cannot be read once the answer began',
    provoke: () => readFails('graphiql.css', '[asset read fails]'),
    // The head was written: the connection is ended, so the client sees a cut answer (its head, or nothing, may have
    // arrived first), never a complete-looking one.
    send: async () => {
      const raw = await request(`${gw.url}/graphql/assets/graphiql.css`)
        .then((res) => res.body.text())
        .then(
          (text) => `complete: ${text}`,
          (err: unknown) => `cut: ${String(err)}`,
        );
      expect(raw).toMatch(/^cut: /);
      return { raw };
    },
    logged: true,
    loggedOnce: '[asset read fails]',
  },
  {
    route: 'GET /graphql (the GraphiQL page)',
    fault: 'the answer throws before anything was sent',
    provoke: () => headThrows('/graphql', '[page head throws]'),
    send: () => http('/graphql', { headers: { accept: 'text/html' } }),
    status: 500,
    code: 'server_error',
    logged: true,
    loggedOnce: '[page head throws]',
  },
  // The same internal throw in the admission of every operation (the reads budget), on each transport.
  ...(['post', 'get', 'ws', 'sse', 'sse-single'] as const).map((transport): Case => ({
    route: `${transport} operation`,
    fault: 'the admission (the reads budget) throws',
    provoke: () => vi.spyOn(gw.gateway.services.rateLimits, 'take').mockRejectedValue(thrown()),
    send: () => over(transport, '{ projects { id } }'),
    logged: true,
  })),
  // A result JSON cannot write (a JSON scalar's value holding a BigInt): only an internal value, since nothing the
  // gateway reads from JSON can hold one. The read of mobile-ID authentications returns it. What is logged is the
  // TypeError of JSON.stringify, not SECRET: `logged` is false, and the answer is still checked. graphql-sse writes the
  // result itself: the TypeError is logged once, and the event stream is not ended without a word.
  ...(['post', 'get', 'ws', 'sse', 'sse-single'] as const).map((transport): Case => ({
    route: `${transport} query`,
    fault: 'the result cannot be written as JSON',
    provoke: () =>
      vi.spyOn(gw.gateway.services.mobileId, 'getMany').mockResolvedValue([
        {
          outcome: 'failure',
          authReqId: 'unwritable',
          error: 'access_denied',
          errorDescription: SECRET,
          reason: 'ACCESS_DENIED',
          receivedAt: new Date(),
          otherFields: { secret: SECRET, big: 1n },
        } as never,
      ]),
    send: () =>
      over(
        transport,
        '{ mobileIdAuthentication(authReqId: "unwritable") { ... on MobileIdAuthenticationFailed { otherFields } } }',
        `unwritable-${transport}`,
      ),
    code: INTERNAL,
    logged: false,
    // The TypeError's words are the same in every case: each case's line is the one naming its own request.
    ...(transport !== 'ws' ? { loggedOnce: 'serialize a BigInt', requestId: `unwritable-${transport}` } : {}),
  })),
  // A subscription's stream that throws: only an internal throw, since the stream turns what its source and its
  // executions throw into a result of its own (src/execution/run.ts). The one stream class's `next` is replaced.
  // graphql-sse reads the stream itself: the throw is the operation's last result, not the end of its event stream.
  // Each error is marked with its case, and counted once the subscription was released (`released`): the transport
  // ends a stream whose `next` rejected, and gives its count back.
  ...(['ws', 'sse', 'sse-single'] as const).map((transport): Case => ({
    route: `${transport === 'ws' ? 'graphql-ws' : transport} subscription`,
    fault: 'its stream throws',
    provoke: () =>
      vi.spyOn(SharedResultStream.prototype, 'next').mockRejectedValue(new Error(marked(`[throws ${transport}]`))),
    send: () => over(transport, 'subscription { heartbeat(intervalMs: 1000, count: 1) }'),
    code: INTERNAL,
    logged: true,
    loggedOnce: `[throws ${transport}]`,
    settled: released,
  })),
  // A bug's GraphQLError with no code, no path and no original error, which only graphql-js's own refusals of a
  // request raised before execution look like (src/execution/present.ts formatError): the client's words only then.
  ...(['ws', 'sse', 'sse-single'] as const).map((transport): Case => ({
    route: `${transport === 'ws' ? 'graphql-ws' : transport} subscription`,
    fault: 'its stream throws a GraphQLError of no code',
    provoke: () =>
      vi
        .spyOn(SharedResultStream.prototype, 'next')
        .mockRejectedValue(new GraphQLError(marked(`[throws no code ${transport}]`))),
    send: () => over(transport, 'subscription { heartbeat(intervalMs: 1000, count: 1) }'),
    code: INTERNAL,
    logged: true,
    loggedOnce: `[throws no code ${transport}]`,
    settled: released,
  })),
  ...(['post', 'ws', 'sse'] as const).map((transport): Case => ({
    route: `${transport} operation`,
    fault: 'the admission throws a GraphQLError of no code',
    provoke: () => vi.spyOn(gw.gateway.services.rateLimits, 'take').mockRejectedValue(new GraphQLError(SECRET)),
    send: () => over(transport, '{ projects { id } }'),
    ...(transport === 'post' ? { code: INTERNAL } : {}),
    logged: true,
  })),
  {
    route: 'post operation',
    fault: 'the admission throws a value that is no error',
    provoke: () => vi.spyOn(gw.gateway.services.rateLimits, 'take').mockRejectedValue(SECRET),
    send: () => over('post', '{ projects { id } }'),
    code: INTERNAL,
    logged: true,
  },
  // A thrown error the log cannot read (a property whose getter throws, as a bug's error object may have): the log
  // line of the masking rule fails with it. SECRET is in neither the answer nor the log.
  ...(['post', 'get', 'ws', 'sse', 'sse-single'] as const).map((transport): Case => ({
    route: `${transport} query`,
    fault: 'a thrown error the log cannot read',
    provoke: () => vi.spyOn(gw.gateway.services.ledger, 'list').mockRejectedValue(unreadable()),
    send: () => over(transport, '{ projects { id } }'),
    code: INTERNAL,
    logged: false,
  })),
  // A bug in the document's preparation (the parse with its limits, a validation rule) throwing a raw Error: the
  // client's request is not at fault, so it is no GRAPHQL_PARSE_FAILED with the error's words. GET goes through
  // Apollo's own parse, which the replaced method is not part of.
  ...(['post', 'ws', 'sse', 'sse-single'] as const).map((transport): Case => ({
    route: `${transport} operation`,
    fault: 'the preparation of a new document throws',
    provoke: () =>
      vi.spyOn(gw.gateway.limits, 'parse').mockImplementation(() => {
        throw thrown();
      }),
    send: () => over(transport, `{ projects { id } a${randomUUID().slice(0, 8)}: projects { id } }`),
    // As a throw of the admission: graphql-ws closes 4500 and graphql-sse's request is refused, with no message.
    ...(transport === 'post' ? { code: INTERNAL } : {}),
    logged: true,
  })),
  // SSE single-connection mode, the operation added to a reserved stream.
  {
    route: 'POST /graphql/stream (reserved stream)',
    fault: 'the store throws under a query',
    provoke: () => vi.spyOn(gw.gateway.services.ledger, 'list').mockRejectedValue(thrown()),
    send: () => onReservedStream('{ projects { id } }'),
    status: 202,
    code: INTERNAL,
    logged: true,
  },
  {
    route: 'POST /graphql/stream (reserved stream)',
    fault: 'the admission (the reads budget) throws',
    provoke: () => vi.spyOn(gw.gateway.services.rateLimits, 'take').mockRejectedValue(thrown()),
    send: () => onReservedStream('{ projects { id } }'),
    logged: true,
  },
  {
    route: 'DELETE /graphql/stream (reserved stream)',
    fault: 'an operation id that names nothing',
    provoke: () => undefined,
    send: async () => {
      const stream = await reservedStream();
      try {
        return await http(`/graphql/stream?operationId=nothing`, {
          method: 'DELETE',
          headers: { ...auth(), 'x-graphql-event-stream-token': stream.token },
        });
      } finally {
        stream.close();
      }
    },
    logged: false,
  },
  // MCP beyond tools/call and resources/read.
  {
    route: 'MCP tools/call projects',
    fault: 'the admission (the reads budget) throws',
    provoke: () => vi.spyOn(gw.gateway.services.rateLimits, 'take').mockRejectedValue(thrown()),
    send: () => mcp((c) => c.call('projects', {})),
    code: INTERNAL,
    logged: true,
  },
  {
    route: 'MCP wait_for_events (from a cursor)',
    fault: 'the event read throws',
    provoke: () => vi.spyOn(gw.gateway.services.events.reader, 'waitForEvents').mockRejectedValue(thrown()),
    send: () => mcp((c) => c.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 })),
    code: INTERNAL,
    logged: true,
  },
  {
    route: 'MCP tools/call projects',
    fault: 'a thrown error the log cannot read',
    provoke: () => vi.spyOn(gw.gateway.services.ledger, 'list').mockRejectedValue(unreadable()),
    send: () => mcp((c) => c.call('projects', {})),
    code: INTERNAL,
    logged: false,
  },
  {
    route: 'MCP wait_for_events (from a cursor)',
    fault: 'a thrown error the log cannot read',
    provoke: () => vi.spyOn(gw.gateway.services.events.reader, 'waitForEvents').mockRejectedValue(unreadable()),
    send: () => mcp((c) => c.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 })),
    code: INTERNAL,
    logged: false,
  },
  ...(['post', 'ws', 'sse'] as const).map((transport): Case => ({
    route: `${transport} operation`,
    fault: 'the admission throws an error the log cannot read',
    provoke: () => vi.spyOn(gw.gateway.services.rateLimits, 'take').mockRejectedValue(unreadable()),
    send: () => over(transport, '{ projects { id } }'),
    logged: false,
  })),
  {
    route: 'GET /metrics',
    fault: 'the registry throws an error the log cannot read',
    provoke: () => vi.spyOn(gw.gateway.services.metrics.registry, 'metrics').mockRejectedValue(unreadable()),
    send: () => http('/metrics'),
    status: 500,
    code: 'server_error',
    logged: false,
  },
  {
    route: 'POST /webhooks/mobile-id',
    fault: 'the intake throws an error the log cannot read',
    provoke: () => vi.spyOn(gw.gateway.services.mobileId, 'receive').mockRejectedValue(unreadable()),
    send: async () => {
      const res = await postNotification(gw, { auth_req_id: randomUUID(), error: 'access_denied' });
      const raw = typeof res.text === 'string' ? res.text : JSON.stringify(res.json);
      return { raw, status: res.status, code: res.json?.error, requestId: String(res.headers['x-request-id']) };
    },
    status: 500,
    code: 'server_error',
    logged: false,
  },
  {
    route: 'MCP resources/list',
    fault: 'the list throws',
    // Only an internal throw: the list is made from the configuration, in memory. The resources are no part of
    // gw.gateway, so their class's method is the one replaced.
    provoke: () =>
      vi.spyOn(McpResources.prototype, 'list').mockImplementation(() => {
        throw thrown();
      }),
    send: () => mcp((c) => c.client.listResources()),
    code: -32603,
    logged: true,
  },
  {
    route: 'MCP resources/templates/list',
    fault: 'the list throws',
    // As resources/list.
    provoke: () =>
      vi.spyOn(McpResources.prototype, 'templates').mockImplementation(() => {
        throw thrown();
      }),
    send: () => mcp((c) => c.client.listResourceTemplates()),
    code: -32603,
    logged: true,
  },
  {
    route: 'MCP prompts/list',
    fault: 'a method the endpoint does not serve',
    provoke: () => undefined,
    send: () => mcp((c) => c.client.listPrompts()),
    logged: false,
  },
  {
    route: 'MCP subscriptions/listen',
    fault: 'watching the resource throws',
    provoke: () =>
      vi.spyOn(gw.gateway.services.events.reader, 'onResourceChanged').mockImplementation(() => {
        throw thrown();
      }),
    send: () =>
      mcp(async (c) => {
        const sub = await c.client.listen({ resourceSubscriptions: ['mobileid://authentications/listen-1'] });
        await sub.close();
        return { honored: sub.honoredFilter };
      }),
    logged: true,
  },
];

/** The cases that ran and found their error logged once, by name, and which lines are theirs (checked last). */
const countedOnce = new Map<string, (line: string) => boolean>();

describe('no unexpected error reaches a client with its raw message', () => {
  it.each(CASES.map((c) => [`${c.route} × ${c.fault}`, c] as const))('%s', async (_name, c) => {
    const logged = gw.logs().length;
    const before = c.settled?.prepare();
    c.provoke();
    const got = await c.send();
    if (c.settled !== undefined) await waitFor(() => c.settled!.until(before!), LONG, c.settled.what);
    for (const leak of LEAKS) expect(got.raw, `${leak} in the answer`).not.toMatch(leak);
    if (c.status !== undefined) expect(got.status, got.raw).toBe(c.status);
    if (c.code !== undefined) expect(got.code, got.raw).toBe(c.code);
    if (c.loggedOnce !== undefined) {
      const once = c.loggedOnce;
      const ours = (l: string) => lineOf(l, once, c.requestId);
      const what = `a log line with ${once}${c.requestId === undefined ? '' : ` of request ${c.requestId}`}`;
      await waitFor(() => gw.logs().slice(logged).split('\n').some(ours), LONG, what);
      const lines = gw.logs().slice(logged).split('\n').filter(ours);
      expect(lines, lines.join('\n')).toHaveLength(1);
      expect((JSON.parse(lines[0]!) as { requestId?: unknown }).requestId, lines[0]).toEqual(expect.any(String));
      // A line of this case alone (its mark, or its request's id): a copy logged later is this case's, whenever
      // it comes.
      if (CASES.filter((o) => o.loggedOnce === once && o.requestId === c.requestId).length === 1)
        countedOnce.set(`${c.route} × ${c.fault}`, ours);
    }
    if (!c.logged) return;
    // The log has the error in full, on a line that names the request.
    await waitFor(() => gw.logs().slice(logged).includes('secret-internal-detail'), LONG, 'the error in the log');
    const lines = gw
      .logs()
      .slice(logged)
      .split('\n')
      .filter((l) => l.includes('secret-internal-detail'))
      .map((l) => JSON.parse(l) as { requestId?: string });
    expect(
      lines.some((l) => typeof l.requestId === 'string'),
      `no request id on ${JSON.stringify(lines)}`,
    ).toBe(true);
    if (got.requestId && got.status !== undefined)
      expect(
        lines.some((l) => l.requestId?.endsWith(got.requestId!)),
        JSON.stringify(lines),
      ).toBe(true);
  });
});

describe("a subscription's stream that throws the gateway's own error", () => {
  it.each(['ws', 'sse', 'sse-single'] as const)(
    'reaches the %s client as it is: its words and its code, nothing logged as unexpected',
    async (transport) => {
      const logged = gw.logs().length;
      const refusal = new GatewayError(ErrorCode.SERVICE_UNAVAILABLE, 'the database cannot be reached; retry', {
        retryAfter: 5,
      });
      vi.spyOn(SharedResultStream.prototype, 'next').mockRejectedValue(refusal);
      const got = await operationOver(transport, gw, KEY, {
        query: 'subscription { heartbeat(intervalMs: 1000, count: 1) }',
      });
      expect(got.errors).toEqual([
        {
          message: 'the database cannot be reached; retry',
          extensions: { code: 'SERVICE_UNAVAILABLE', retryAfter: 5 },
        },
      ]);
      expect(gw.logs().slice(logged)).not.toContain('unexpected error');
    },
  );
});

/** Every result a subscription over `transport` got, until it completed (or failed: `error`). */
async function allResults(
  transport: 'ws' | 'sse' | 'sse-single',
  query: string,
  requestId: string,
): Promise<{ results: Array<{ errors?: AnsweredError[] }>; completed: boolean; error?: unknown }> {
  const client =
    transport === 'ws'
      ? wsClient(gw, { key: KEY, operationId: requestId })
      : createSseClient({
          url: `${gw.url}/graphql/stream`,
          singleConnection: transport === 'sse-single',
          retryAttempts: 0,
          headers: { ...auth(), 'x-request-id': requestId },
        });
  try {
    const results: Array<{ errors?: AnsweredError[] }> = [];
    return await new Promise((resolve) => {
      client.subscribe(
        { query },
        {
          next: (value) => void results.push(value as { errors?: AnsweredError[] }),
          error: (error: unknown) => resolve({ results, completed: false, error }),
          complete: () => resolve({ results, completed: true }),
        },
      );
    });
  } finally {
    await client.dispose();
  }
}

describe("a subscription's result that JSON cannot write", () => {
  // One rule on every streaming transport (docs/contract.md, INTERNAL_SERVER_ERROR): the subscription gets its
  // INTERNAL_SERVER_ERROR and ends there, as when its stream fails; the ticks after it are not delivered. Only an
  // internal value holds a BigInt: the first tick's execution is replaced to return one.
  it.each(['ws', 'sse', 'sse-single'] as const)(
    'ends the %s subscription with INTERNAL_SERVER_ERROR and complete: no later event is delivered',
    async (transport) => {
      const logged = gw.logs().length;
      vi.spyOn(SharedExecution.prototype, 'execute').mockReturnValueOnce({ data: { heartbeat: 1n } } as never);
      // The subscription's own id (X-Request-Id; graphql-ws: its message id): the TypeError's line is counted as this
      // case's only when it names it, never a copy another case logged late.
      const id = `unwritable-subscription-${transport}`;
      const got = await allResults(transport, 'subscription { heartbeat(intervalMs: 10, count: 3) }', id);
      expect(got.error).toBeUndefined();
      expect(got.completed).toBe(true);
      expect(got.results).toHaveLength(1);
      expect(got.results[0]!.errors).toEqual([
        expect.objectContaining({ message: 'Internal server error', extensions: { code: INTERNAL } }),
      ]);
      const ours = (l: string) => lineOf(l, 'serialize a BigInt', id);
      await waitFor(() => gw.logs().slice(logged).split('\n').some(ours), LONG, `the TypeError's line of ${id}`);
      const lines = gw.logs().slice(logged).split('\n').filter(ours);
      expect(lines, lines.join('\n')).toHaveLength(1);
      expect((JSON.parse(lines[0]!) as { requestId?: unknown }).requestId).toEqual(expect.any(String));
      countedOnce.set(`the ${transport} subscription whose result JSON cannot write`, ours);
    },
  );
});

describe('a reserved SSE stream (single-connection mode) with a subscription whose stream throws', () => {
  it("answers that subscription INTERNAL_SERVER_ERROR and goes on with the stream's other operations", async () => {
    const [[externalId, callbackUrl]] = [
      ...(await registerVerifications(gw, gw.gateway.sandbox.verification!, KEY, 1)),
    ] as [[string, string]];
    // Only the operation named Broken has a stream whose `next` throws; the others read theirs as usual.
    const real = SharedResultStream.prototype.next;
    vi.spyOn(SharedResultStream.prototype, 'next').mockImplementation(function (this: SharedResultStream) {
      const { document } = (this as unknown as { args: { document: DocumentNode } }).args;
      const operation = document.definitions[0] as OperationDefinitionNode;
      return operation.name?.value === 'Broken' ? Promise.reject(thrown()) : real.call(this);
    });
    const stream = await reservedStream();
    const add = async (operationId: string, query: string, variables?: Record<string, unknown>) => {
      const post = await http('/graphql/stream', {
        method: 'POST',
        headers: { ...auth(), 'content-type': 'application/json', 'x-graphql-event-stream-token': stream.token },
        body: JSON.stringify({ query, variables, extensions: { operationId } }),
      });
      expect(post.status, post.raw).toBe(202);
    };
    try {
      const waits = 'subscription Waits($id: ID) { verificationCompleted(externalId: $id) { externalId payload } }';
      await add('waits', waits, {
        id: externalId,
      });
      await waitForSubscribers(gw, 'verification', externalId);
      await add('broken', 'subscription Broken { heartbeat(intervalMs: 1000, count: 1) }');
      await vi.waitFor(() => expect(stream.text()).toContain('event: complete\ndata: {"id":"broken"}'), {
        timeout: LONG,
      });
      expect(stream.text()).toContain(
        'event: next\ndata: {"id":"broken","payload":{"errors":[{"message":"Internal server error","extensions":{"code":"INTERNAL_SERVER_ERROR"}}]}}',
      );
      // The stream goes on: the other subscription gets an event that arrives after, and a new operation its answer.
      await postCompletion(callbackUrl, externalId, 'after-broken');
      await vi.waitFor(() => expect(stream.text()).toMatch(/\{"id":"waits","payload":\{"data".*after-broken/), {
        timeout: LONG,
      });
      await add('after', '{ __typename }');
      await vi.waitFor(() => expect(stream.text()).toContain('event: complete\ndata: {"id":"after"}'), {
        timeout: LONG,
      });
      for (const leak of LEAKS) expect(stream.text(), `${leak} in the stream`).not.toMatch(leak);
      expect(stream.text()).not.toContain('event: complete\ndata: {"id":"waits"}');
    } finally {
      stream.close();
    }
  });
});

describe("the identity provider's JWKS cannot be reached", () => {
  it('is answered UPSTREAM_UNAVAILABLE naming the JWKS URL and the failure class, never the sentence of the driver', async () => {
    // A host name, as a deployment names its identity provider: the address it resolved to is in no configuration.
    const key = await signingKey('no-raw-messages-1');
    const jwks = await startJwksServer([key]);
    const url = jwks.url.replace('127.0.0.1', 'localhost');
    await jwks.stop();
    const jwt = await startTestGateway({
      AUTH_JWKS_URL: url,
      AUTH_ISSUER: ISSUER,
      AUTH_AUDIENCE: AUDIENCE,
      AUTH_APPS: '*',
    });
    try {
      const res = await request(`${jwt.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${await sign(key)}` },
        body: JSON.stringify({ query: '{ projects { id } }' }),
      });
      const raw = await res.body.text();
      expect(res.statusCode, raw).toBe(503);
      expect((JSON.parse(raw) as { errors: Array<{ extensions: { code: string } }> }).errors[0]!.extensions.code).toBe(
        'UPSTREAM_UNAVAILABLE',
      );
      expect(raw).toContain(url);
      expect(raw).toContain('ECONNREFUSED');
      expect(raw).not.toContain('connect ECONNREFUSED');
      expect(raw.replaceAll(url, '')).not.toMatch(/127\.0\.0\.1|::1/);
    } finally {
      await jwt.close();
    }
  });
});

describe('what the cases logged late', () => {
  // A copy a teardown path logs after its case counted (nothing the gateway shows marks the end of such a path) lands
  // while later cases run, of any describe: counted here, after them all, by its mark (or its request's id), against
  // the case whose error it is.
  it("no marked case's error is logged again after its case", () => {
    const all = gw.logs().split('\n');
    for (const [name, ours] of countedOnce) {
      const lines = all.filter(ours);
      expect(lines, `${name}: ${lines.join('\n')}`).toHaveLength(1);
    }
  });
});
