// What bounds an upstream's answer (src/upstream/http.ts): UPSTREAM_TIMEOUT limits its body as a whole, not only the
// pause between two of its pieces, and UPSTREAM_MAX_ANSWER_BYTES its length. Each test runs the real gateway against a
// loopback upstream stand-in.
import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { upstreamKey } from '../../src/upstream/idempotency.js';
import { M } from '../helpers/cloud.js';
import { gatewaysPerTest, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const gateway = gatewaysPerTest();
const closing: Array<() => void> = [];
afterEach(() => {
  for (const close of closing.splice(0)) close();
});

/**
 * A loopback upstream that answers each request's head with `head`, then writes one space of body every `everyMs`
 * until `forMs` have passed (then it drops the connection), so its answer keeps coming in pieces, never stalling.
 */
async function drippingUpstream(
  head: string,
  everyMs: number,
  forMs: number,
): Promise<{ url: string; heads: string[]; close: () => void }> {
  const heads: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    let received = '';
    socket.on('data', (chunk) => {
      if (received.includes('\r\n\r\n')) return;
      received += chunk.toString('latin1');
      const end = received.indexOf('\r\n\r\n');
      if (end === -1) return;
      heads.push(received.slice(0, end));
      socket.write(head);
      const drip = setInterval(() => socket.write(' '), everyMs);
      const stop = setTimeout(() => socket.destroy(), forMs);
      socket.on('close', () => {
        clearInterval(drip);
        clearTimeout(stop);
      });
    });
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const close = () => {
    for (const s of sockets) s.destroy();
    server.close();
  };
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, heads, close };
}

const API_KEY = 'answer-bounds-app';
const sentKey = (key: string) =>
  upstreamKey(`key:${createHash('sha256').update(API_KEY).digest('hex').slice(0, 16)}`, key);

const BASE = {
  GATEWAY_API_KEYS: API_KEY,
  UPSTREAM_MAX_RETRIES: '1',
  UPSTREAM_RETRY_BUDGET: '60s',
  UPSTREAM_CIRCUIT_BREAKER: 'off',
  SANDBOX_CALLBACK_DELAY_MS: '600000',
};

/** The cloud API at `url`, every other upstream sandboxed. */
const cloudAt = (url: string) => ({
  CLOUD_API_URL: url,
  CLOUD_API_TOKEN: 'service-account-token',
  SANDBOX_UPSTREAMS: 'verification,identification,rfm,mobile-id',
});

/** The identification API at `url`, every other upstream sandboxed. */
const identificationAt = (url: string) => ({
  IDENTIFICATION_API_URL: url,
  IDENTIFICATION_API_TOKEN: 'identification-token',
  SANDBOX_UPSTREAMS: 'cloud,verification,rfm,mobile-id',
});

const IDENTIFY = `mutation($input: CreateIdentificationInput!, $key: UUID) {
  createIdentification(input: $input, idempotencyKey: $key) { identification { id } replayed }
}`;

/** A 200 whose body announces 1 MB and then comes a space every 20 ms: each pause is far below the timeout. */
const DRIP_HEAD = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n{"id":"dripped"';

// Concurrent, on one gateway: each test waits out its attempt timeout(s), and they need not wait one after the other.
describe.concurrent('an answer whose body keeps dripping, each piece well within UPSTREAM_TIMEOUT', () => {
  /**
   * The cloud and identification APIs each at a dripping stand-in. UPSTREAM_TIMEOUT bounds the answer's head too: 3 s,
   * which a stall of the machine before the head comes cannot outlast (the attempt would end in
   * UND_ERR_HEADERS_TIMEOUT, not in the body's). Were the body not cut, it would end when the stand-in drops the
   * connection (UND_ERR_SOCKET), after 10 s: far past the timeout, whatever a stall adds to it.
   */
  let cloud: Awaited<ReturnType<typeof drippingUpstream>>;
  let identification: Awaited<ReturnType<typeof drippingUpstream>>;
  let gw: TestGateway;
  beforeAll(async () => {
    [cloud, identification] = await Promise.all([
      drippingUpstream(DRIP_HEAD, 20, 10_000),
      drippingUpstream(DRIP_HEAD, 20, 10_000),
    ]);
    gw = await startTestGateway({
      ...BASE,
      UPSTREAM_TIMEOUT: '3s',
      CLOUD_API_URL: cloud.url,
      CLOUD_API_TOKEN: 'service-account-token',
      IDENTIFICATION_API_URL: identification.url,
      IDENTIFICATION_API_TOKEN: 'identification-token',
      SANDBOX_UPSTREAMS: 'verification,rfm,mobile-id',
    });
  }, 60_000);
  afterAll(async () => {
    await gw?.close();
    cloud?.close();
    identification?.close();
  });

  it('is cut by UPSTREAM_TIMEOUT on the cloud API: retried under the same key, then UPSTREAM_UNAVAILABLE', async () => {
    const key = randomUUID();
    const res = await gw.graphql(M.project, { input: { name: 'dripping' }, key }, { key: API_KEY });
    expect(res.data?.createProject ?? null).toBeNull();
    expect(res.errors).toHaveLength(1);
    expect(res.errors![0]!.extensions).toEqual({ code: 'UPSTREAM_UNAVAILABLE', upstream: 'cloud', attempts: 2 });
    expect(res.errors![0]!.message).toBe('cloud is unavailable after 2 attempt(s): UND_ERR_BODY_TIMEOUT');
    expect(cloud.heads.map((h) => /^idempotency-key: *(.+)$/im.exec(h)?.[1]?.trim())).toEqual([
      sentKey(key),
      sentKey(key),
    ]);
  }, 60_000);

  it('is cut by UPSTREAM_TIMEOUT on an identity endpoint: UPSTREAM_OUTCOME_UNKNOWN, sent once', async () => {
    const key = randomUUID();
    const res = await gw.graphql(IDENTIFY, { input: { workflowId: 'wf-drip' }, key }, { key: API_KEY });
    expect(res.data?.createIdentification ?? null).toBeNull();
    expect(res.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_OUTCOME_UNKNOWN',
      upstream: 'identification',
      reason: 'UND_ERR_BODY_TIMEOUT',
      attempts: 1,
    });
    expect(identification.heads).toHaveLength(1);
  }, 60_000);
});

/** A loopback upstream that answers every request 200 with `bytes` of JSON (`{"id":"big","pad":"xxx…"}`). */
async function largeUpstream(bytes: number): Promise<{ url: string; requests: () => number }> {
  const body = Buffer.from(`{"id":"big","pad":"${'x'.repeat(bytes - 22)}"}`);
  let requests = 0;
  const server = http.createServer((req, res) => {
    requests += 1;
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closing.push(() => server.close());
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, requests: () => requests };
}

describe('an answer longer than UPSTREAM_MAX_ANSWER_BYTES', () => {
  it('is not read whole: the cloud call fails as UPSTREAM_UNAVAILABLE, nothing is recorded, the key is released', async () => {
    const upstream = await largeUpstream(200_000);
    const gw = await gateway({
      ...BASE,
      UPSTREAM_MAX_ANSWER_BYTES: '65536',
      ...cloudAt(upstream.url),
    });
    const key = randomUUID();
    for (let call = 1; call <= 2; call++) {
      const res = await gw.graphql(M.project, { input: { name: 'large' }, key }, { key: API_KEY });
      expect(res.data?.createProject ?? null).toBeNull();
      expect(res.errors![0]!.extensions).toEqual({ code: 'UPSTREAM_UNAVAILABLE', upstream: 'cloud', attempts: 2 });
      expect(res.errors![0]!.message).toBe('cloud is unavailable after 2 attempt(s): UPSTREAM_ANSWER_TOO_LARGE');
    }
    expect(upstream.requests()).toBe(4);
    const projects = await gw.graphql('{ projects { id } }', {}, { key: API_KEY });
    expect(projects.data?.projects).toEqual([]);
  });

  it('fails an identity creation as UPSTREAM_OUTCOME_UNKNOWN, sent once', async () => {
    const upstream = await largeUpstream(200_000);
    const gw = await gateway({
      ...BASE,
      UPSTREAM_MAX_ANSWER_BYTES: '65536',
      ...identificationAt(upstream.url),
    });
    const key = randomUUID();
    const res = await gw.graphql(IDENTIFY, { input: { workflowId: 'wf-large' }, key }, { key: API_KEY });
    expect(res.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_OUTCOME_UNKNOWN',
      upstream: 'identification',
      reason: 'UPSTREAM_ANSWER_TOO_LARGE',
      attempts: 1,
    });
    expect(upstream.requests()).toBe(1);
  });

  it('is read whole up to the bound', async () => {
    const upstream = await largeUpstream(60_000);
    const gw = await gateway({
      ...BASE,
      UPSTREAM_MAX_ANSWER_BYTES: '65536',
      ...cloudAt(upstream.url),
    });
    const res = await gw.graphql(M.project, { input: { name: 'large' }, key: randomUUID() }, { key: API_KEY });
    expect(res.errors).toBeUndefined();
    expect(res.data?.createProject.project.id).toBe('big');
  });
});

describe("a refusal's words in the message", () => {
  it('are at most 200 characters of its details, whichever field they come from; the whole answer is upstreamError', async () => {
    const details = `the name is not allowed: ${'x'.repeat(5_000)}`;
    const server = http.createServer((req, res) => {
      req.resume();
      const body = JSON.stringify({ code: 'INVALID', details });
      res.writeHead(400, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closing.push(() => server.close());
    const gw = await gateway({
      ...BASE,
      ...cloudAt(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`),
    });
    const res = await gw.graphql(M.project, { input: { name: 'refused' }, key: randomUUID() }, { key: API_KEY });
    const error = res.errors![0]!;
    expect(error.extensions).toMatchObject({ code: 'UPSTREAM_REJECTED', upstreamError: { details } });
    expect(error.message).toBe(`cloud rejected the request with status 400: ${details.slice(0, 200)}`);
  });
});
