// An operator matches a graphql-ws failure to its log line (docs/operations.md, Logs): an operation's lines name
// `requestId: ws:<operation id>` and `connection`, the request id of the WebSocket upgrade (its X-Request-Id when sane,
// else the one the gateway made, answered in the 101's X-Request-Id). Operation ids are the client's ("1", "2" are
// the protocol's usual ones), so two connections' lines tell apart only by `connection`.
import { createClient, type Client } from 'graphql-ws';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'ws-log-connection-key-01';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: KEY });
});
afterAll(async () => {
  await gw?.close();
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** A graphql-ws client whose operations all have id "1", its upgrade sent with `requestId` (if any). */
function client(requestId: string | undefined, answered: (id: string | undefined) => void): Client {
  class Upgrade extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, requestId === undefined ? {} : { headers: { 'x-request-id': requestId } });
      this.on('upgrade', (res) => answered(res.headers['x-request-id'] as string | undefined));
    }
  }
  return createClient({
    url: gw.url.replace(/^http/, 'ws') + '/graphql',
    webSocketImpl: Upgrade,
    connectionParams: { authorization: `Bearer ${KEY}` },
    retryAttempts: 0,
    lazy: true,
    generateID: () => '1',
  });
}

/** A result JSON cannot write: a JSON scalar's value holding a BigInt, read by the mobile-ID authentications' read. */
const unwritable = () =>
  vi.spyOn(gw.gateway.services.mobileId, 'getMany').mockResolvedValue([
    {
      outcome: 'failure',
      authReqId: 'unwritable',
      error: 'access_denied',
      errorDescription: 'denied',
      reason: 'ACCESS_DENIED',
      receivedAt: new Date(),
      otherFields: { big: 1n },
    } as never,
  ]);

const QUERY =
  '{ mobileIdAuthentication(authReqId: "unwritable") { ... on MobileIdAuthenticationFailed { otherFields } } }';

/** The operation's one answer (its error), the client closed after it. */
async function run(c: Client): Promise<unknown> {
  try {
    return await new Promise((resolve) => {
      c.subscribe({ query: QUERY }, { next: () => undefined, error: resolve, complete: () => resolve(undefined) });
    });
  } finally {
    await c.dispose();
  }
}

type Line = { requestId?: string; connection?: string; msg?: string };

describe('a graphql-ws operation that fails unexpectedly', () => {
  it("is logged with its connection's upgrade request id, which tells two connections' operation 1 apart", async () => {
    unwritable();
    const logged = gw.logs().length;
    const echoed: Array<string | undefined> = [];
    const a = await run(client('ws-upgrade-a', (id) => echoed.push(id)));
    const b = await run(client('ws-upgrade-b', (id) => echoed.push(id)));
    for (const answer of [a, b])
      expect(answer).toEqual([expect.objectContaining({ extensions: { code: 'INTERNAL_SERVER_ERROR' } })]);
    expect(echoed).toEqual(['ws-upgrade-a', 'ws-upgrade-b']);
    const lines = () =>
      gw
        .logs()
        .slice(logged)
        .split('\n')
        .filter((l) => l.includes('serialize a BigInt'))
        .map((l) => JSON.parse(l) as Line);
    await waitFor(() => lines().length >= 2, 20_000, 'both lines');
    expect(lines().map((l) => [l.requestId, l.connection])).toEqual([
      ['ws:1', 'ws-upgrade-a'],
      ['ws:1', 'ws-upgrade-b'],
    ]);
  });

  it('is logged with the id the gateway made for an upgrade without X-Request-Id, which the 101 answers', async () => {
    unwritable();
    const logged = gw.logs().length;
    let made: string | undefined;
    await run(client(undefined, (id) => (made = id)));
    expect(made).toMatch(/^[0-9a-f-]{36}$/);
    const ours = (l: string) => l.includes('serialize a BigInt');
    await waitFor(() => gw.logs().slice(logged).split('\n').some(ours), 20_000, 'the line');
    const line = JSON.parse(gw.logs().slice(logged).split('\n').find(ours)!) as Line;
    expect([line.requestId, line.connection]).toEqual(['ws:1', made]);
  });
});

describe('a WebSocket client that breaks the protocol', () => {
  /** Opens an authenticated socket whose upgrade names `requestId`, sends `frame`, and resolves with its close code. */
  async function closeCodeAfter(requestId: string, frame: (socket: WebSocket) => void): Promise<number> {
    const socket = new WebSocket(gw.url.replace(/^http/, 'ws') + '/graphql', 'graphql-transport-ws', {
      headers: { 'x-request-id': requestId, authorization: `Bearer ${KEY}` },
    });
    await new Promise((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
    frame(socket);
    return closed;
  }

  const linesOf = (connection: string) =>
    gw
      .logs()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Line & { level: number; code?: string })
      .filter((l) => l.connection === connection);

  // ws closes such a socket itself with the code the RFC gives (1007, 1009): the client's fault, not the gateway's. It
  // is no unexpected error for an operator to chase, and no 4500 was sent (but for a server's message, below).
  for (const [name, requestId, frame, code, wsCode] of [
    [
      'a text frame that is not UTF-8',
      'ws-not-utf8',
      (s: WebSocket) => s.send(Buffer.from([0x7b, 0xff, 0x7d]), { binary: false }),
      1007,
      'WS_ERR_INVALID_UTF8',
    ],
    [
      'a message over GRAPHQL_MAX_BODY_BYTES',
      'ws-too-big',
      (s: WebSocket) => s.send('x'.repeat(200_000)),
      1009,
      'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH',
    ],
    // A message only a server sends, before connection_init: closed 4500 as graphql-ws closes it (the protocol's
    // wire, test/server/ws-protocol.test.ts), yet the client's doing, which anyone who can open a socket may send.
    [
      "a server's message (next) sent by the client",
      'ws-server-message',
      (s: WebSocket) => s.send('{"id":"1","type":"next","payload":{}}'),
      4500,
      'GRAPHQL_WS_UNEXPECTED_MESSAGE',
    ],
  ] as const) {
    it(`is closed ${code} for ${name}, logged as a refusal with its connection, not as an error`, async () => {
      expect(await closeCodeAfter(requestId, frame)).toBe(code);
      expect(linesOf(requestId).filter((l) => l.level >= 50)).toEqual([]);
      await waitFor(() => linesOf(requestId).some((l) => l.code === wsCode), 20_000, 'the refusal line');
      expect(linesOf(requestId).filter((l) => l.code === wsCode)).toEqual([
        expect.objectContaining({ level: 30, connection: requestId, code: wsCode, closeCode: code }),
      ]);
    });
  }
});
