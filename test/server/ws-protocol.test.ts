import { EventEmitter, on } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  buildSchema,
  execute,
  getOperationAST,
  GraphQLError,
  parse,
  subscribe,
  validate,
  type ExecutionArgs,
  type ExecutionResult,
} from 'graphql';
import { handleProtocols } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';

import { graphqlTransportWs, type Operated } from '../../src/server/ws-protocol.js';

/**
 * src/server/ws-protocol.ts against graphql-ws 6's own server (`useServer`, production mode), on one small
 * schema with the same hooks: each script of client messages gets the same messages back, byte for byte, and the same
 * close code and reason.
 */
const schema = buildSchema(`
  type Query { hello(name: String): String, boom: String }
  type Subscription { count(to: Int!): Int, ticks: Int, fails: Int }
`);

/** The resolvers: `ticks` yields what the test emits on its side's emitter; `fails` throws after its first value. */
const root = {
  hello: ({ name }: { name?: string }) => `hello ${name ?? 'world'}`,
  boom: () => {
    throw new Error('boom');
  },
  count: async function* ({ to }: { to: number }) {
    for (let i = 1; i <= to; i++) yield { count: i };
  },
  ticks: (_args: unknown, context: { ticks: EventEmitter }) => {
    const events = on(context.ticks, 'tick');
    return {
      next: async () => {
        const step = await events.next();
        return step.done ? step : { done: false, value: { ticks: (step.value as number[])[0] } };
      },
      return: () => events.return!(),
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  },
  fails: async function* () {
    yield { fails: 1 };
    throw new Error('the source failed');
  },
};

/** A result as graphql-ws writes it without an onNext hook: its errors (each its toJSON) after the rest. */
function shaped(result: ExecutionResult): ExecutionResult {
  const { errors, ...rest } = result;
  return errors ? ({ ...rest, errors: errors.map((e) => e.toJSON()) } as unknown as ExecutionResult) : rest;
}

interface Side {
  url: string;
  ticks: EventEmitter;
  close(): Promise<void>;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `ws://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/** graphql-ws's server: a connection whose connection_init carries `{ token: 'bad' }` is refused. */
async function reference(initWaitMs: number): Promise<Side> {
  const ticks = new EventEmitter();
  const http = createServer();
  const wss = new WebSocketServer({ server: http });
  const server = useServer(
    {
      schema,
      roots: { query: root, subscription: root },
      context: { ticks },
      isProd: true,
      connectionInitWaitTimeout: initWaitMs,
      onConnect: (ctx) => ctx.connectionParams?.token !== 'bad',
    },
    wss,
    0,
  );
  const url = await listen(http);
  return {
    url,
    ticks,
    async close() {
      await server.dispose();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}

/** The gateway's protocol with hooks that do what graphql-ws does by default. */
async function ours(initWaitMs: number): Promise<Side> {
  const ticks = new EventEmitter();
  const http = createServer();
  const wss = new WebSocketServer({ noServer: true, handleProtocols });
  const protocol = graphqlTransportWs<null>(
    {
      connect: (_connection, params) => params?.token !== 'bad',
      async subscribe(_connection, _id, payload): Promise<Operated> {
        const document = parse(payload.query);
        const errors = validate(schema, document);
        if (errors.length > 0) return { errors };
        const operation = getOperationAST(document, payload.operationName);
        if (!operation) return { errors: [new GraphQLError('Unable to identify operation')] };
        const args: ExecutionArgs = {
          schema,
          document,
          operationName: payload.operationName,
          variableValues: payload.variables,
          contextValue: { ticks },
          rootValue: root,
        };
        if (operation.operation !== 'subscription') return { result: shaped(await execute(args)) };
        const results = await subscribe(args);
        if (!(Symbol.asyncIterator in results)) return { result: shaped(results) };
        return {
          stream: {
            next: async () => {
              const step = await results.next();
              return step.done ? step : { done: false, value: shaped(step.value) };
            },
            return: () => results.return(undefined),
          },
        };
      },
      failed: () => undefined,
    },
    { connectionInitWaitMs: initWaitMs },
  );
  http.on('upgrade', (req, socket, head) => wss.handleUpgrade(req, socket, head, (ws) => protocol.open(ws, req, null)));
  const url = await listen(http);
  return {
    url,
    ticks,
    async close() {
      for (const client of wss.clients) client.terminate();
      await new Promise((resolve) => wss.close(resolve));
      await new Promise((resolve) => http.close(resolve));
    },
  };
}

/** One step of a script: a message to send, a wait for the n-th message back, or an event to emit on the side. */
type Step = { send: string } | { until: number } | { tick: number };

interface Transcript {
  messages: string[];
  closed: string | null;
}

/**
 * Runs a script on a fresh connection and returns what came back: every message, and the close (`code reason`) if the
 * server closed the connection. The script ends with the close, or, when `open` is set, after its last step.
 */
async function run(side: Side, steps: Step[], opts: { protocol?: string; open?: boolean } = {}): Promise<Transcript> {
  // No subprotocol at all when `protocol` is empty (one the server does not pick fails the client's handshake).
  const ws = new WebSocket(side.url, opts.protocol === '' ? [] : (opts.protocol ?? 'graphql-transport-ws'));
  const transcript: Transcript = { messages: [], closed: null };
  const waiters: Array<() => void> = [];
  const wake = () => waiters.splice(0).forEach((w) => w());
  ws.on('message', (data) => {
    transcript.messages.push(String(data));
    wake();
  });
  const closed = new Promise<void>((resolve) =>
    ws.once('close', (code, reason) => {
      transcript.closed = `${code} ${String(reason)}`;
      wake();
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  for (const step of steps) {
    if ('send' in step) ws.send(step.send);
    else if ('tick' in step) side.ticks.emit('tick', step.tick);
    else
      while (transcript.messages.length < step.until && transcript.closed === null)
        await new Promise<void>((resolve) => waiters.push(resolve));
  }
  if (opts.open) {
    ws.close();
    await closed;
    transcript.closed = null;
  } else await closed;
  return transcript;
}

const init = (payload?: object) => ({ send: JSON.stringify({ type: 'connection_init', payload }) });
const sub = (id: string, query: string, extra: object = {}) => ({
  send: JSON.stringify({ id, type: 'subscribe', payload: { query, ...extra } }),
});
const ping = { send: '{"type":"ping"}' };

/**
 * Scripts, with what graphql-ws answers them (asserted too, so that a change on either side reads plainly). Only a
 * script marked `initWait` runs where `connection_init` has a deadline: elsewhere a slow machine could not make one
 * close early.
 */
const SCRIPTS: Array<{
  name: string;
  steps: Step[];
  protocol?: string;
  open?: boolean;
  initWait?: boolean;
  expected: Transcript;
}> = [
  {
    name: 'no subprotocol',
    protocol: '',
    steps: [],
    expected: { messages: [], closed: '4406 Subprotocol not acceptable' },
  },
  {
    name: 'a message that is not JSON',
    steps: [{ send: '{nope' }],
    expected: { messages: [], closed: '4400 Invalid message received' },
  },
  {
    name: 'a message of no known type',
    steps: [init(), { until: 1 }, { send: '{"type":"hello"}' }],
    expected: { messages: ['{"type":"connection_ack"}'], closed: '4400 Invalid message received' },
  },
  {
    name: 'a subscribe without its query',
    steps: [init(), { until: 1 }, { send: '{"id":"1","type":"subscribe","payload":{}}' }],
    expected: { messages: ['{"type":"connection_ack"}'], closed: '4400 Invalid message received' },
  },
  {
    name: 'a subscribe before connection_init',
    steps: [sub('1', '{ hello }')],
    expected: { messages: [], closed: '4401 Unauthorized' },
  },
  {
    name: 'connection_init twice',
    steps: [init(), { until: 1 }, init()],
    expected: { messages: ['{"type":"connection_ack"}'], closed: '4429 Too many initialisation requests' },
  },
  {
    name: 'a connection refused',
    steps: [init({ token: 'bad' })],
    expected: { messages: [], closed: '4403 Forbidden' },
  },
  {
    name: 'no connection_init in time',
    initWait: true,
    steps: [],
    expected: { messages: [], closed: '4408 Connection initialisation timeout' },
  },
  {
    name: 'pings and pongs',
    open: true,
    steps: [
      init(),
      { until: 1 },
      ping,
      { send: '{"type":"ping","payload":{"at":1}}' },
      { send: '{"type":"pong"}' },
      ping,
      { until: 4 },
    ],
    expected: {
      messages: [
        '{"type":"connection_ack"}',
        '{"type":"pong"}',
        '{"type":"pong","payload":{"at":1}}',
        '{"type":"pong"}',
      ],
      closed: null,
    },
  },
  {
    name: 'a ping sent before the ack',
    open: true,
    steps: [init(), ping, { until: 2 }],
    expected: { messages: ['{"type":"connection_ack"}', '{"type":"pong"}'], closed: null },
  },
  {
    name: 'a query, a query with an error, a refused query, an unknown operation name',
    open: true,
    steps: [
      init(),
      { until: 1 },
      sub('a', 'query Q($n: String) { hello(name: $n) }', { variables: { n: 'you' }, operationName: 'Q' }),
      { until: 3 },
      sub('b', '{ boom }'),
      { until: 5 },
      sub('c', '{ nothing }'),
      { until: 6 },
      sub('d', 'query A { hello }', { operationName: 'B' }),
      { until: 7 },
      // The ids may be used again once their subscription ended.
      sub('a', '{ hello }'),
      { until: 9 },
    ],
    expected: {
      messages: [
        '{"type":"connection_ack"}',
        '{"id":"a","type":"next","payload":{"data":{"hello":"hello you"}}}',
        '{"id":"a","type":"complete"}',
        '{"id":"b","type":"next","payload":{"data":{"boom":null},"errors":[{"message":"boom","locations":[{"line":1,"column":3}],"path":["boom"]}]}}',
        '{"id":"b","type":"complete"}',
        '{"id":"c","type":"error","payload":[{"message":"Cannot query field \\"nothing\\" on type \\"Query\\".","locations":[{"line":1,"column":3}]}]}',
        '{"id":"d","type":"error","payload":[{"message":"Unable to identify operation"}]}',
        '{"id":"a","type":"next","payload":{"data":{"hello":"hello world"}}}',
        '{"id":"a","type":"complete"}',
      ],
      closed: null,
    },
  },
  {
    name: 'a subscription to its end, and one whose source fails',
    open: true,
    steps: [
      init(),
      { until: 1 },
      sub('s', 'subscription { count(to: 2) }'),
      { until: 4 },
      sub('f', 'subscription { fails }'),
      { until: 6 },
    ],
    expected: {
      messages: [
        '{"type":"connection_ack"}',
        '{"id":"s","type":"next","payload":{"data":{"count":1}}}',
        '{"id":"s","type":"next","payload":{"data":{"count":2}}}',
        '{"id":"s","type":"complete"}',
        '{"id":"f","type":"next","payload":{"data":{"fails":1}}}',
        '{"id":"f","type":"error","payload":[{"message":"the source failed"}]}',
      ],
      closed: null,
    },
  },
  {
    name: 'a subscription completed by the client, its id used again',
    open: true,
    steps: [
      init(),
      { until: 1 },
      sub('t', 'subscription { ticks }'),
      // The subscription is set up when its ping's pong is back: the tick then reaches it.
      ping,
      { until: 2 },
      { tick: 1 },
      { until: 3 },
      { send: '{"id":"t","type":"complete"}' },
      ping,
      { until: 4 },
      { tick: 2 },
      sub('t', '{ hello }'),
      { until: 6 },
    ],
    expected: {
      messages: [
        '{"type":"connection_ack"}',
        '{"type":"pong"}',
        '{"id":"t","type":"next","payload":{"data":{"ticks":1}}}',
        '{"type":"pong"}',
        '{"id":"t","type":"next","payload":{"data":{"hello":"hello world"}}}',
        '{"id":"t","type":"complete"}',
      ],
      closed: null,
    },
  },
  {
    name: 'a subscribe with an id in use',
    steps: [init(), { until: 1 }, sub('t', 'subscription { ticks }'), ping, { until: 2 }, sub('t', '{ hello }')],
    expected: {
      messages: ['{"type":"connection_ack"}', '{"type":"pong"}'],
      closed: '4409 Subscriber for t already exists',
    },
  },
  {
    name: 'a query that does not parse (the hook throws)',
    steps: [init(), { until: 1 }, sub('x', '{ hello')],
    expected: { messages: ['{"type":"connection_ack"}'], closed: '4500 Internal server error' },
  },
  {
    name: "a server's message sent by the client",
    steps: [init(), { until: 1 }, { send: '{"id":"1","type":"next","payload":{}}' }],
    expected: { messages: ['{"type":"connection_ack"}'], closed: '4500 Internal server error' },
  },
];

describe('graphql-transport-ws as graphql-ws speaks it', () => {
  /** Without a deadline for `connection_init`, and with one of 50 ms (graphql-ws's `connectionInitWaitTimeout`). */
  let untimed: { reference: Side; ours: Side };
  let timed: { reference: Side; ours: Side };
  beforeAll(async () => {
    untimed = { reference: await reference(0), ours: await ours(0) };
    timed = { reference: await reference(50), ours: await ours(50) };
  });
  afterAll(async () => {
    for (const side of [untimed?.reference, untimed?.ours, timed?.reference, timed?.ours]) await side?.close();
  });

  for (const script of SCRIPTS)
    it(`answers ${script.name} as graphql-ws does`, async () => {
      const opts = { protocol: script.protocol, open: script.open };
      const sides = script.initWait ? timed : untimed;
      const theirs = await run(sides.reference, script.steps, opts);
      expect(theirs).toEqual(script.expected);
      expect(await run(sides.ours, script.steps, opts)).toEqual(theirs);
    });
});
