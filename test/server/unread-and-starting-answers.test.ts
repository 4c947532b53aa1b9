// Every answer carries an OAuth error body and an X-Request-Id: also the ones no route writes, a request Node's HTTP
// parser refuses, and what the gateway answers while it starts (waiting for PostgreSQL).
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { freePort } from '../../scripts/embedded-postgres.js';
import { GatewayServer } from '../../src/gateway/listen.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayProcesses } from '../helpers/process.js';

/** Writes `raw` on a fresh connection; resolves with all the server wrote once it closes the connection. */
function exchange(url: string, raw: string): Promise<string> {
  const { port, hostname } = new URL(url);
  return new Promise((resolve, reject) => {
    let answer = '';
    const socket = net.connect(Number(port), hostname, () => socket.write(raw));
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

/** The status, the headers (lower-cased) and the JSON body of one raw HTTP/1.1 answer. */
function parse(answer: string) {
  const [head, body] = answer.split('\r\n\r\n');
  const [statusLine, ...lines] = head!.split('\r\n');
  const headers = Object.fromEntries(
    lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
  );
  return { status: Number(statusLine!.split(' ')[1]), headers, body: JSON.parse(body!) as unknown };
}

describe('a request the HTTP parser refuses', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('is answered 431 with an OAuth error body and a request id when its headers are too large, then closed', async () => {
    const answer = parse(
      await exchange(
        gw.url,
        `POST /webhooks/mobile-id HTTP/1.1\r\nHost: x\r\nX-Mobileid-Request-Id: ${'r'.repeat(20_000)}\r\n` +
          `Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
      ),
    );
    expect(answer.status).toBe(431);
    expect(answer.body).toEqual({ error: 'invalid_request', error_description: 'the request headers are too large' });
    expect(answer.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(answer.headers.connection).toBe('close');
    expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(JSON.stringify(answer.body)));
  });

  it('is answered 400 when it is not HTTP', async () => {
    const answer = parse(await exchange(gw.url, 'HELLO /webhooks/mobile-id NOT-HTTP\r\n\r\n'));
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({ error: 'invalid_request', error_description: 'the request is not valid HTTP' });
    expect(answer.headers['x-request-id']).toBeTruthy();
  });
});

describe('the gateway while it starts', () => {
  let server: GatewayServer;
  beforeAll(async () => {
    server = new GatewayServer(0, '127.0.0.1');
    await server.listenWhileStarting(() => 'waiting for PostgreSQL');
  });
  afterAll(async () => {
    await server?.drain();
  });

  it('answers a webhook or any route 503 temporarily_unavailable, with Retry-After and the request id', async () => {
    for (const path of ['/webhooks/mobile-id', '/webhooks/verification/abc', '/graphql']) {
      const res = await request(`${server.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'sender-42' },
        body: '{}',
      });
      expect(res.statusCode, path).toBe(503);
      expect(await res.body.json(), path).toEqual({
        error: 'temporarily_unavailable',
        error_description: 'the gateway is starting: waiting for PostgreSQL',
      });
      expect(res.headers['retry-after'], path).toBe('5');
      expect(res.headers['x-request-id'], path).toBe('sender-42');
    }
  });

  it('says it is alive and not ready, each answer with a request id', async () => {
    const health = await request(`${server.url}/healthz`);
    expect(health.statusCode).toBe(200);
    expect(health.headers['x-request-id']).toBeTruthy();
    await health.body.dump();
    const ready = await request(`${server.url}/readyz`);
    expect(ready.statusCode).toBe(503);
    expect(await ready.body.json()).toEqual({ status: 'starting', error: 'waiting for PostgreSQL' });
    expect(ready.headers['x-request-id']).toBeTruthy();
  });
});

describe('a gateway waiting for an unreachable PostgreSQL', () => {
  const start = gatewayProcesses();

  it("tells an app or a webhook's sender it is starting, never the database's address or the driver's words", async () => {
    // Nothing listens on the port: the driver's refusal names it ("connect ECONNREFUSED 127.0.0.1:<port>").
    const port = await freePort();
    const gw = await start(
      {
        DATABASE_URL: `postgresql://postgres:${randomBytes(12).toString('hex')}@127.0.0.1:${port}/gateway_db`,
        TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      },
      { until: 'listening: not ready' },
    );
    await gw.waitFor('PostgreSQL is not reachable: waiting for it, retrying with backoff');
    for (const path of ['/webhooks/mobile-id', '/webhooks/verification/abc', '/graphql', '/mcp']) {
      const res = await request(`${gw.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect(res.statusCode, path).toBe(503);
      const text = await res.body.text();
      expect(JSON.parse(text), path).toEqual({
        error: 'temporarily_unavailable',
        error_description: 'the gateway is starting: waiting for its database',
      });
      for (const leak of [String(port), 'gateway_db', 'ECONNREFUSED', 'postgresql:'])
        expect(text, path).not.toContain(leak);
    }
    // The operator's probe still says where the gateway waits and why (docs/operations.md, Health).
    const ready = await request(`${gw.url}/readyz`);
    expect(ready.statusCode).toBe(503);
    expect(await ready.body.json()).toMatchObject({
      status: 'starting',
      error: expect.stringContaining(`waiting for PostgreSQL at postgresql://127.0.0.1:${port}/gateway_db`),
    });
  }, 60_000);
});
