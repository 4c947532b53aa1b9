// A request whose target is in absolute form (`POST http://host/graphql HTTP/1.1`, which a server MUST accept: RFC
// 9112 §3.2.2) reaches the route its path names, with its query, as the same request in origin form does: GraphQL over
// HTTP, SSE, MCP, the health routes and the WebSocket upgrade. And a path that no route serves is said back in the 404
// cut short, so that a long request target cannot make the answer as long. Over raw sockets: the request line is
// written by hand.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const KEY = 'request-target-forms-key-0123456789';
let gw: TestGateway;
let origin: URL;

beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: KEY });
  origin = new URL(gw.url);
});
afterAll(() => gw.close());

/**
 * Writes `head` (its lines, without the blank line that ends them) and `body` on a fresh connection; resolves with the
 * status and the text that came back once the gateway ends the connection, or once `until` holds of the text (an event
 * stream, an upgrade: the connection stays open).
 */
function exchange(
  head: string[],
  body = '',
  until: (text: string) => boolean = () => false,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(origin.port), origin.hostname, () =>
      socket.write(`${head.join('\r\n')}\r\n\r\n${body}`),
    );
    let text = '';
    const done = () => resolve({ status: Number(text.split(' ')[1]), text });
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      if (until(text)) {
        socket.destroy();
        done();
      }
    });
    socket.on('end', done);
    socket.on('error', reject);
  });
}

/** A request in absolute form: `method http://host:port<target>`, with `headers` and a JSON `body`. */
function absolute(
  method: string,
  target: string,
  headers: string[] = [],
  body?: string,
  until?: (text: string) => boolean,
) {
  return exchange(
    [
      `${method} http://${origin.host}${target} HTTP/1.1`,
      `host: ${origin.host}`,
      'connection: close',
      ...(body === undefined ? [] : ['content-type: application/json', `content-length: ${Buffer.byteLength(body)}`]),
      ...headers,
    ],
    body,
    until,
  );
}

const auth = `authorization: Bearer ${KEY}`;

describe('a request target in absolute form', () => {
  it('POST /graphql runs the operation', async () => {
    const { status, text } = await absolute('POST', '/graphql', [auth], JSON.stringify({ query: '{ __typename }' }));
    expect(status, text).toBe(200);
    expect(text).toContain('{"data":{"__typename":"Query"}}');
  });

  it('GET /graphql reads the operation from its query', async () => {
    const { status, text } = await absolute('GET', `/graphql?query=${encodeURIComponent('{ __typename }')}`, [
      auth,
      'apollo-require-preflight: true',
    ]);
    expect(status, text).toBe(200);
    expect(text).toContain('{"data":{"__typename":"Query"}}');
  });

  it('GET /graphql/stream opens the event stream of the operation in its query', async () => {
    const { status, text } = await absolute(
      'GET',
      `/graphql/stream?query=${encodeURIComponent('{ __typename }')}`,
      [auth, 'accept: text/event-stream'],
      undefined,
      (received) => received.includes('event: complete'),
    );
    expect(status, text).toBe(200);
    expect(text).toContain('event: next');
    expect(text).toContain('{"data":{"__typename":"Query"}}');
  });

  it('POST /mcp is served', async () => {
    const { status, text } = await absolute(
      'POST',
      '/mcp',
      [auth, 'accept: application/json, text/event-stream'],
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      (received) => received.includes('"result":{}'),
    );
    expect(status, text).toBe(200);
    expect(text).toContain('"result":{}');
  });

  it('GET /healthz answers, and a path of no route is named by its path alone', async () => {
    expect((await absolute('GET', '/healthz')).status).toBe(200);
    const missing = await absolute('GET', '/nowhere?x=1');
    expect(missing.status).toBe(404);
    expect(missing.text).toContain('"error_description":"no route for /nowhere"');
  });

  it('with no path, it is the root: no route for /', async () => {
    const { status, text } = await exchange([
      `GET http://${origin.host} HTTP/1.1`,
      `host: ${origin.host}`,
      'connection: close',
    ]);
    expect(status).toBe(404);
    expect(text).toContain('"error_description":"no route for /"');
  });

  it('the WebSocket upgrade of /graphql is taken', async () => {
    const { status, text } = await exchange(
      [
        `GET http://${origin.host}/graphql HTTP/1.1`,
        `host: ${origin.host}`,
        'upgrade: websocket',
        'connection: Upgrade',
        'sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==',
        'sec-websocket-version: 13',
        'sec-websocket-protocol: graphql-transport-ws',
        auth,
      ],
      '',
      (received) => received.includes('\r\n\r\n'),
    );
    expect(status, text).toBe(101);
  });
});

describe('a path no route serves', () => {
  it('is said back in the 404 cut to 200 characters, with "…"', async () => {
    const path = `/${'x'.repeat(8000)}`;
    const { status, text } = await exchange([`GET ${path} HTTP/1.1`, `host: ${origin.host}`, 'connection: close']);
    expect(status).toBe(404);
    const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error_description: string };
    expect(body.error_description).toBe(`no route for ${path.slice(0, 200)}…`);
  });

  it('is said back whole when it is short', async () => {
    const { text } = await exchange(['GET /short HTTP/1.1', `host: ${origin.host}`, 'connection: close']);
    expect(text).toContain('"error_description":"no route for /short"');
  });
});

describe('a WebSocket upgrade of a path no route serves', () => {
  it('is refused 404 as any such request is: not_found naming the path (cut), its X-Request-Id, then closed', async () => {
    const path = `/${'y'.repeat(500)}`;
    const { status, text } = await exchange([
      `GET ${path} HTTP/1.1`,
      `host: ${origin.host}`,
      'upgrade: websocket',
      'connection: Upgrade',
      'sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==',
      'sec-websocket-version: 13',
      'x-request-id: upgrade-to-nowhere-1',
    ]);
    expect(status, text).toBe(404);
    const [head, body] = [text.slice(0, text.indexOf('\r\n\r\n')), text.slice(text.indexOf('\r\n\r\n') + 4)];
    expect(head.toLowerCase()).toContain('x-request-id: upgrade-to-nowhere-1');
    expect(head.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(body)).toEqual({ error: 'not_found', error_description: `no route for ${path.slice(0, 200)}…` });
  });
});
