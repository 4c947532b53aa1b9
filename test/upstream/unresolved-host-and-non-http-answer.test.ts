import { createHash, randomUUID } from 'node:crypto';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';

import { upstreamKey } from '../../src/upstream/idempotency.js';
import { M } from '../helpers/cloud.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';

/**
 * An upstream that cannot be reached or keeps failing is UPSTREAM_UNAVAILABLE (docs/contract.md, error codes), never
 * INTERNAL_SERVER_ERROR, and the answer names the failure's code, never the driver's sentence or an address:
 * - a host name that does not resolve: nothing was sent, so it is retried on every upstream (docs/graphql-api.md,
 *   "Retry rules per upstream": "never sent"), the key released after the last attempt;
 * - an answer that is not HTTP (a raw TCP server writing text), or whose head is too large to read: the request was
 *   written, its outcome is unknown; the cloud API retries it under the same Idempotency-Key, an identity endpoint
 *   answers UPSTREAM_OUTCOME_UNKNOWN at once and keeps the key bound to the request.
 * `.invalid` never resolves (RFC 6761 §6.4); the resolver says so as ENOTFOUND, or EAI_AGAIN when it cannot be asked.
 */

const gateway = gatewaysPerTest();
const servers: net.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

interface RawServer {
  url: string;
  /** The head of every request received, in order. */
  heads: string[];
}

/** A TCP server on loopback that answers each request's head with `reply`, which is not HTTP, and closes. */
async function rawServer(reply: string): Promise<RawServer> {
  const heads: string[] = [];
  const server = net.createServer((socket) => {
    socket.on('error', () => {});
    let received = '';
    socket.on('data', (chunk) => {
      if (received.includes('\r\n\r\n')) return;
      received += chunk.toString('latin1');
      const end = received.indexOf('\r\n\r\n');
      if (end === -1) return;
      heads.push(received.slice(0, end));
      socket.end(reply);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, heads };
}

const keyOf = (head: string) => /^idempotency-key: *(.+)$/im.exec(head)?.[1]?.trim();

const API_KEY = 'unreachable-upstream-app';
/** The Idempotency-Key sent upstream for the app's `key` (the scope of an API key: its hash). */
const sentKey = (key: string) =>
  upstreamKey(`key:${createHash('sha256').update(API_KEY).digest('hex').slice(0, 16)}`, key);

/** Two attempts per call (one retry), a budget no attempt here comes near, and no breaker in the way. */
const RETRIES = {
  GATEWAY_API_KEYS: API_KEY,
  UPSTREAM_MAX_RETRIES: '1',
  UPSTREAM_RETRY_BUDGET: '60s',
  UPSTREAM_CIRCUIT_BREAKER: 'off',
};

const onCloud = (url: string) =>
  gateway({
    ...RETRIES,
    CLOUD_API_URL: url,
    CLOUD_API_TOKEN: 'service-account-token',
    SANDBOX_UPSTREAMS: 'verification,identification,rfm,mobile-id',
  });

const onIdentification = (url: string) =>
  gateway({
    ...RETRIES,
    IDENTIFICATION_API_URL: url,
    IDENTIFICATION_API_TOKEN: 'identification-token',
    SANDBOX_UPSTREAMS: 'cloud,verification,rfm,mobile-id',
    SANDBOX_CALLBACK_DELAY_MS: '600000',
  });

const IDENTIFY = `mutation($input: CreateIdentificationInput!, $key: UUID) {
  createIdentification(input: $input, idempotencyKey: $key) { identification { id } replayed }
}`;

/** Words of the drivers' own messages, and the addresses, that must not reach the app. */
const RAW = /getaddrinfo|\.invalid|127\.0\.0\.1|does not match the HTTP|HTTPParserError|Headers Overflow/i;

function onlyError(res: Awaited<ReturnType<TestGateway['graphql']>>) {
  expect(res.status).toBe(200);
  expect(res.errors).toHaveLength(1);
  expect(JSON.stringify(res.errors)).not.toMatch(RAW);
  return res.errors![0]!;
}

/**
 * The answers that are not HTTP, and the reason each is answered with: llhttp's code (HPE_…; undici 7 names none, so
 * HPE_ERROR), or undici's for a head past its limit.
 */
const NOT_HTTP: Array<[string, string, RegExp]> = [
  ['text that is not HTTP', 'this is not HTTP at all\r\n\r\n', /^HPE_[A-Z_]+$/],
  [
    'a head too large to read',
    `HTTP/1.1 200 OK\r\nx-padding: ${'a'.repeat(100_000)}\r\n\r\n`,
    /^UND_ERR_HEADERS_OVERFLOW$/,
  ],
];

describe('a cloud API whose host name does not resolve', () => {
  it('is UPSTREAM_UNAVAILABLE after the retries, and the key is released: the same key is sent again', async () => {
    const gw = await onCloud('http://cloud-api.invalid');
    const key = randomUUID();
    for (let call = 1; call <= 2; call++) {
      const res = await gw.graphql(M.project, { input: { name: 'unresolved' }, key }, { key: API_KEY });
      expect(res.data?.createProject ?? null).toBeNull();
      const error = onlyError(res);
      expect(error.extensions).toEqual({ code: 'UPSTREAM_UNAVAILABLE', upstream: 'cloud', attempts: 2 });
      expect(error.message).toMatch(/^cloud is unavailable after 2 attempt\(s\): (ENOTFOUND|EAI_AGAIN)$/);
    }
  });
});

describe('an identity endpoint whose host name does not resolve', () => {
  it('is retried (nothing was sent) and then UPSTREAM_UNAVAILABLE, never UPSTREAM_OUTCOME_UNKNOWN', async () => {
    const gw = await onIdentification('http://identification.invalid');
    const res = await gw.graphql(
      IDENTIFY,
      { input: { workflowId: 'wf-unresolved' }, key: randomUUID() },
      { key: API_KEY },
    );
    expect(res.data?.createIdentification ?? null).toBeNull();
    const error = onlyError(res);
    expect(error.extensions).toEqual({ code: 'UPSTREAM_UNAVAILABLE', upstream: 'identification', attempts: 2 });
    expect(error.message).toMatch(/^identification is unavailable after 2 attempt\(s\): (ENOTFOUND|EAI_AGAIN)$/);
  });
});

describe.each(NOT_HTTP)('an upstream that answers %s', (_label, reply, reason) => {
  it('on the cloud API: retried under the same key, then UPSTREAM_UNAVAILABLE; the key is released', async () => {
    const server = await rawServer(reply);
    const gw = await onCloud(server.url);
    const key = randomUUID();
    const res = await gw.graphql(M.project, { input: { name: 'not-http' }, key }, { key: API_KEY });
    expect(res.data?.createProject ?? null).toBeNull();
    const error = onlyError(res);
    expect(error.extensions).toEqual({ code: 'UPSTREAM_UNAVAILABLE', upstream: 'cloud', attempts: 2 });
    expect(error.message).toMatch(/^cloud is unavailable after 2 attempt\(s\): /);
    expect(error.message.replace(/^.*: /, '')).toMatch(reason);
    expect(server.heads.map(keyOf)).toEqual([sentKey(key), sentKey(key)]);

    // Released: the same key is the same request once more, sent under the same upstream key.
    const again = await gw.graphql(M.project, { input: { name: 'not-http' }, key }, { key: API_KEY });
    expect(onlyError(again).extensions).toEqual({ code: 'UPSTREAM_UNAVAILABLE', upstream: 'cloud', attempts: 2 });
    expect(server.heads.map(keyOf)).toEqual(Array.from({ length: 4 }, () => sentKey(key)));
  });

  it('on an identity endpoint: sent once, UPSTREAM_OUTCOME_UNKNOWN, the key kept bound to it', async () => {
    const server = await rawServer(reply);
    const gw = await onIdentification(server.url);
    const key = randomUUID();
    const res = await gw.graphql(IDENTIFY, { input: { workflowId: 'wf-not-http' }, key }, { key: API_KEY });
    expect(res.data?.createIdentification ?? null).toBeNull();
    const error = onlyError(res);
    expect(error.extensions).toEqual({
      code: 'UPSTREAM_OUTCOME_UNKNOWN',
      upstream: 'identification',
      reason: expect.stringMatching(reason),
      attempts: 1,
      idempotencyKey: key,
      upstreamIdempotencyKey: sentKey(key),
    });
    expect(error.message).toContain(error.extensions!.reason as string);
    expect(error.message).toContain('not sent again');
    expect(server.heads).toHaveLength(1);

    // Kept: the key is bound to that request, another input with it is refused without a request.
    const other = await gw.graphql(IDENTIFY, { input: { workflowId: 'wf-other' }, key }, { key: API_KEY });
    expect(onlyError(other).extensions).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', idempotencyKey: key });
    expect(server.heads).toHaveLength(1);
  });
});
