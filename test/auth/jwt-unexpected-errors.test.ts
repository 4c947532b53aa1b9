// An unexpected error (a bug's, neither jose's nor the JWKS fetch's own failure) while an app's JWT is checked reaches
// no app: not the 401 or 503 answer of POST /graphql, SSE or MCP, nor graphql-ws's close reason. The log has it in
// full, with the request id the answer carries. Only an internal throw reaches these paths: each case replaces ONE
// function of the running gateway (restored after), and moves the testing clock past AUTH_JWKS_REFRESH_INTERVAL so
// that the token's check asks for the keys again.
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

import * as jwksFetch from '../../src/auth/jwks-fetch.js';
import { JwksKeys } from '../../src/auth/jwt.js';
import type { TestGateway } from '../helpers/gateway.js';
import { sign, signingKey, startJwksServer, startJwtGateway, testClock, type JwksServer } from '../helpers/jwt.js';
import { operationOver } from '../helpers/operation.js';

const MARK = `jwt-leak-marker-${randomUUID()} /srv/gateway/secret.pem`;
const LEAKS = [/jwt-leak-marker-/, /\/srv\/gateway/, /TypeError/, /\bat [^\n"]*:\d+:\d+/];
const INTERVAL_MS = 60_000;
const TYPENAME = '{ __typename }';

let jwks: JwksServer;
let gw: TestGateway;
let token: string;
const clock = testClock();
beforeAll(async () => {
  const key = await signingKey('k1');
  jwks = await startJwksServer([key]);
  // Down at start: no key is ever fetched, so each check past the interval waits for a fetch of its own.
  jwks.down();
  gw = await startJwtGateway(jwks, { AUTH_JWKS_REFRESH_INTERVAL: '1m' }, { testing: { clock: clock.now } });
  token = await sign(key);
});
afterAll(async () => {
  await gw?.close();
  await jwks?.stop();
});
afterEach(() => {
  vi.restoreAllMocks();
});

function noLeak(raw: string): void {
  for (const leak of LEAKS) expect(raw, `${leak} in the answer`).not.toMatch(leak);
}

/** The log since `from` has the marker, in full, on an error line with the request id `id` (any id when undefined). */
async function logged(from: number, id?: string): Promise<void> {
  await vi.waitFor(() => expect(gw.logs().slice(from)).toContain('jwt-leak-marker-'), { timeout: 20_000 });
  const lines = gw
    .logs()
    .slice(from)
    .split('\n')
    .filter((l) => l.includes('jwt-leak-marker-'))
    .map((l) => JSON.parse(l) as { level?: number; requestId?: unknown; err?: { message?: string } });
  expect(
    lines.some(
      (l) =>
        l.level === 50 &&
        l.err?.message === MARK &&
        (id === undefined ? typeof l.requestId === 'string' : l.requestId === id),
    ),
    JSON.stringify(lines),
  ).toBe(true);
}

/** One check of the token over `way`: its status (or close code) and the raw answer, sent with X-Request-Id `id`. */
async function over(way: string, id: string): Promise<{ status: number | undefined; raw: string }> {
  const auth = { authorization: `Bearer ${token}`, 'x-request-id': id };
  if (way === 'ws') {
    const got = await operationOver('ws', gw, token, { query: TYPENAME });
    // The close reason is the answer's message.
    return { status: got.closeCode, raw: `${got.raw}\n${got.errors?.[0]?.message ?? ''}` };
  }
  const res =
    way === 'POST /graphql'
      ? await request(`${gw.url}/graphql`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ query: TYPENAME }),
        })
      : way === 'SSE'
        ? await request(`${gw.url}/graphql/stream`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
            body: JSON.stringify({ query: 'subscription { __typename }' }),
          })
        : await request(`${gw.url}/mcp`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
            body: JSON.stringify({
              jsonrpc: '2.0',
              id: 1,
              method: 'initialize',
              params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
            }),
          });
  const raw = `${JSON.stringify(res.headers)}\n${await res.body.text()}`;
  return { status: res.statusCode, raw };
}

const WAYS = ['POST /graphql', 'SSE', 'MCP', 'ws'] as const;

describe("an unexpected error while the identity provider's JWKS is fetched", () => {
  it.each(WAYS)(
    'over %s: the answer says the keys could not be fetched (Internal server error), the log has the error',
    async (way) => {
      clock.advance(INTERVAL_MS);
      const from = gw.logs().length;
      const id = `jwks-fetch-${randomUUID()}`;
      vi.spyOn(jwksFetch, 'fetchJwks').mockRejectedValueOnce(new TypeError(MARK));
      const got = await over(way, id);
      noLeak(got.raw);
      expect(got.status, got.raw).toBe(way === 'ws' ? 1013 : 503);
      // A close reason holds at most 123 bytes (RFC 6455 §5.5): the start of the same words.
      expect(got.raw).toContain(
        way === 'ws' ? "Try again later: the identity provider's keys" : 'could not be fetched: Internal server error',
      );
      await logged(from, way === 'ws' ? undefined : id);
    },
  );
});

describe("an unexpected error while a JWT's key is looked up", () => {
  it.each(WAYS)('over %s: the token cannot be verified, in no words of the error; the log has it', async (way) => {
    clock.advance(INTERVAL_MS);
    const from = gw.logs().length;
    const id = `jwt-check-${randomUUID()}`;
    // No key fetched yet: the lookup waits for the fetch it asks for, which throws a bug's error.
    vi.spyOn(JwksKeys.prototype, 'refresh').mockRejectedValueOnce(new TypeError(MARK));
    const got = await over(way, id);
    noLeak(got.raw);
    expect(got.status, got.raw).toBe(way === 'ws' ? 4403 : 401);
    expect(got.raw).toContain('the JWT cannot be verified');
    await logged(from, way === 'ws' ? undefined : id);
  });
});
