// What arrives while the gateway drains (docs/operations.md, Shutdown): a request that was on its way when the
// shutdown began is served, and what it opens is ended with the rest, never left for the drain's deadline to cut.
import http from 'node:http';
import net from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readToEnd } from '../helpers/raw-http.js';

/** What came back on a raw connection: each answer's status line, headers (names lower-cased) and body. */
function answersOf(received: string) {
  const answers: { statusLine: string; headers: Record<string, string>; body: string }[] = [];
  let rest = received;
  while (rest.includes('\r\n\r\n')) {
    const end = rest.indexOf('\r\n\r\n');
    const [statusLine = '', ...lines] = rest.slice(0, end).split('\r\n');
    const headers = Object.fromEntries(
      lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
    );
    rest = rest.slice(end + 4);
    let body = '';
    if (headers['transfer-encoding'] === 'chunked') {
      for (;;) {
        const size = parseInt(rest, 16);
        rest = rest.slice(rest.indexOf('\r\n') + 2);
        if (!(size > 0)) break;
        body += rest.slice(0, size);
        rest = rest.slice(size + 2);
      }
      rest = rest.slice(rest.indexOf('\r\n') + 2);
    } else {
      body = rest.slice(0, Number(headers['content-length'] ?? 0));
      rest = rest.slice(body.length);
    }
    answers.push({ statusLine, headers, body });
  }
  return answers;
}

/**
 * A connection kept alive from before the shutdown, busy with a mutation the upstream holds: the drain's sweep closes
 * only idle connections, so it stays open, and holds the drain open. `send` pipelines a request behind the mutation
 * and resolves once the gateway has read it (or has closed the connection); `answers` releases the mutation and reads
 * every answer the connection got, once the gateway has closed it.
 */
async function busyConnection(gw: TestGateway) {
  const { hostname, port } = new URL(gw.url);
  const socket = net.connect(Number(port), hostname);
  let received = '';
  socket.setEncoding('latin1').on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => undefined);
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const held = gw.gateway.sandbox.cloud!.faults.hold();
  const body = JSON.stringify({ query: 'mutation { createProject(input: { name: "held" }) { project { id } } }' });
  socket.write(
    `POST /graphql HTTP/1.1\r\nHost: gateway\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBeGreaterThan(0);
  return {
    async send(text: string, url: string) {
      const read = new Promise<void>((resolve) =>
        gw.gateway.server.on('request', (req: http.IncomingMessage) => req.url === url && resolve()),
      );
      socket.write(text);
      await Promise.race([read, ended]);
    },
    async answers() {
      held.release();
      await ended;
      return answersOf(received);
    },
  };
}

/** The answer of a route that has closed for the shutdown (docs/operations.md, Shutdown), as the starting port's. */
const SHUTTING_DOWN = { error: 'temporarily_unavailable', error_description: 'the gateway is shutting down' };

const TICKS = JSON.stringify({ query: 'subscription { heartbeat(intervalMs: 1000, count: 1000) }' });

describe('a request that arrives as the gateway drains', () => {
  it('an SSE subscription whose body was still arriving when the shutdown began is ended, not held to the cut', async () => {
    const gw = await startTestGateway();
    // A stream open before the shutdown: its end says that the route has ended the streams it held.
    const before = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: TICKS,
    });
    expect(before.statusCode).toBe(200);
    let ticked!: () => void;
    const tick = new Promise<void>((resolve) => (ticked = resolve));
    const beforeEnded = readToEnd(before.body, (text) => text.includes('event: next') && ticked());
    await tick;

    // A second one whose body is half sent: in flight (the server has its request) as the shutdown begins.
    const arrived = new Promise<void>((resolve) =>
      gw.gateway.server.on('request', (req: http.IncomingMessage) => req.url === '/graphql/stream' && resolve()),
    );
    const half = Math.floor(TICKS.length / 2);
    const late = http.request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      agent: false,
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'content-length': String(Buffer.byteLength(TICKS)),
      },
    });
    const lateEnded = new Promise<{ how: string; status: number | undefined; text: string }>((resolve) => {
      late.on('error', (err) => resolve({ how: `cut: ${err.message}`, status: undefined, text: '' }));
      late.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ how: 'ended', status: res.statusCode, text }));
        res.on('aborted', () => resolve({ how: 'cut', status: res.statusCode, text }));
        res.on('error', () => resolve({ how: 'cut', status: res.statusCode, text }));
      });
    });
    late.write(TICKS.slice(0, half));
    await arrived;

    const closed = gw.close();
    expect(await beforeEnded).toBe('ended');
    // The rest of the body comes after the route ended its streams: the stream it opens must end as they did.
    late.end(TICKS.slice(half));
    const outcome = await lateEnded;
    expect(outcome.how).toBe('ended');
    expect(outcome.status).toBe(200);
    await closed;
  });

  it('a WebSocket upgrade on a kept-alive connection during the drain is refused in the gateway words, in its turn', async () => {
    const gw = await startTestGateway();
    const connection = await busyConnection(gw);
    const closed = gw.close();
    await expect.poll(() => gw.gateway.server.listening, { timeout: 20_000 }).toBe(false);
    await connection.send(
      'GET /graphql HTTP/1.1\r\nHost: gateway\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
        'Sec-WebSocket-Protocol: graphql-transport-ws\r\nX-Request-Id: upgrade-in-drain\r\n\r\n',
      '/graphql',
    );
    const answers = await connection.answers();
    // The mutation sent before it is answered first, as HTTP/1.1 answers a connection's requests in order.
    expect(answers.map((a) => a.statusLine)).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 503 Service Unavailable']);
    expect(JSON.parse(answers[0]!.body).data.createProject.project.id).toBeTruthy();
    expect(answers[1]!.headers).toMatchObject({
      'content-type': 'application/json; charset=utf-8',
      'retry-after': '5',
      'x-request-id': 'upgrade-in-drain',
      connection: 'close',
    });
    expect(JSON.parse(answers[1]!.body)).toEqual(SHUTTING_DOWN);
    await closed;
  });

  it('a stream reservation (PUT) on a kept-alive connection once the SSE route has closed is refused, not reserved', async () => {
    const gw = await startTestGateway();
    // A stream open before the shutdown: its end says that the SSE route has closed.
    const before = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: TICKS,
    });
    let ticked!: () => void;
    const tick = new Promise<void>((resolve) => (ticked = resolve));
    const beforeEnded = readToEnd(before.body, (text) => text.includes('event: next') && ticked());
    await tick;
    const connection = await busyConnection(gw);

    const closed = gw.close();
    expect(await beforeEnded).toBe('ended');
    await connection.send(
      'PUT /graphql/stream HTTP/1.1\r\nHost: gateway\r\nContent-Length: 0\r\nX-Request-Id: reserve-in-drain\r\n\r\n',
      '/graphql/stream',
    );
    const answers = await connection.answers();
    expect(answers.map((a) => a.statusLine)).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 503 Service Unavailable']);
    expect(answers[1]!.headers).toMatchObject({
      'content-type': 'application/json; charset=utf-8',
      'retry-after': '5',
      'x-request-id': 'reserve-in-drain',
    });
    expect(JSON.parse(answers[1]!.body)).toEqual(SHUTTING_DOWN);
    await closed;
  });
});
