// A JWT that an app sends with every request is verified once, then answered from the cache of verified tokens
// (AUTH_JWT_CACHE_SIZE, decision 049) until its exp, or until the JWKS is fetched again; AUTH_JWT_CACHE_SIZE=0 is the
// off switch, and both give every token the same answer.
import { afterEach, describe, expect, it } from 'vitest';

import type { TestGateway } from '../helpers/gateway.js';
import {
  AUDIENCE,
  ISSUER,
  nowSeconds,
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  testClock,
  unsigned,
  type JwksServer,
} from '../helpers/jwt.js';

const TYPENAME = '{ __typename }';

const running: Array<{ close(): Promise<void> } | JwksServer> = [];
afterEach(async () => {
  for (const r of running.splice(0).reverse()) await ('stop' in r ? r.stop() : r.close());
});

async function started(jwks: JwksServer, env: Record<string, string>, clock = testClock()): Promise<TestGateway> {
  const t = await startJwtGateway(jwks, env, { testing: { clock: clock.now } });
  running.push(t);
  return t;
}

async function provider() {
  const key = await signingKey('k1');
  const jwks = await startJwksServer([key]);
  running.push(jwks);
  return { key, jwks };
}

/** gateway_jwt_checks_total by check, from /metrics. */
async function checks(t: TestGateway): Promise<{ verified: number; cached: number }> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  const read = (check: string) =>
    Number(new RegExp(`^gateway_jwt_checks_total\\{check="${check}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { verified: read('verified'), cached: read('cached') };
}

describe('the cache of verified JWTs', () => {
  it('verifies a token sent with every request once, and answers the next requests from the cache', async () => {
    const { key, jwks } = await provider();
    const t = await started(jwks, { AUTH_JWKS_REFRESH_INTERVAL: '1h' });
    const token = await sign(key);
    expect((await t.graphql(TYPENAME, undefined, { key: token })).status).toBe(200);
    const before = await checks(t);
    for (let i = 0; i < 5; i += 1) expect((await t.graphql(TYPENAME, undefined, { key: token })).status).toBe(200);
    const after = await checks(t);
    // The first request may have raced the JWKS fetch of start-up: at most one more verification, then the cache.
    expect(after.verified - before.verified).toBeLessThanOrEqual(1);
    expect(after.cached - before.cached).toBeGreaterThanOrEqual(4);
  });

  it('refuses a cached token once its exp has passed, as an uncached one', async () => {
    const clock = testClock();
    const { key, jwks } = await provider();
    const t = await started(jwks, { AUTH_JWKS_REFRESH_INTERVAL: '1h' }, clock);
    const token = await sign(key, { exp: Math.floor(clock.now() / 1000) + 60 });
    for (let i = 0; i < 3; i += 1) expect((await t.graphql(TYPENAME, undefined, { key: token })).status).toBe(200);
    expect((await checks(t)).cached).toBeGreaterThanOrEqual(1);
    clock.advance(61_000);
    const refused = await t.graphql(TYPENAME, undefined, { key: token });
    expect(refused.status).toBe(401);
    expect(refused.errors![0]!.message).toMatch(/expired/);
  });

  it('refuses a token whose key the provider removed, once the keys are fetched again, though it was cached', async () => {
    const clock = testClock();
    const { key, jwks } = await provider();
    const t = await started(jwks, { AUTH_JWKS_REFRESH_INTERVAL: '1m' }, clock);
    const token = await sign(key);
    for (let i = 0; i < 3; i += 1) expect((await t.graphql(TYPENAME, undefined, { key: token })).status).toBe(200);
    const fetched = jwks.requests;
    jwks.keys.splice(0, jwks.keys.length, await signingKey('k2'));
    clock.advance(60_000);
    // The keys are stale now: the token is verified again (with the keys held while they are fetched anew) ...
    await t.graphql(TYPENAME, undefined, { key: token });
    await expect.poll(() => jwks.requests, { timeout: 20_000 }).toBeGreaterThan(fetched);
    // ... and once the new set has arrived, the removed key's token is refused, cache or not.
    await expect
      .poll(async () => (await t.graphql(TYPENAME, undefined, { key: token })).status, { timeout: 20_000 })
      .toBe(401);
  });

  it('AUTH_JWT_CACHE_SIZE=0 verifies every request, and gives every token the answer the cache gives', async () => {
    const { key, jwks } = await provider();
    const rogue = await signingKey('k1');
    const cached = await started(jwks, { AUTH_JWKS_REFRESH_INTERVAL: '1h' });
    const uncached = await started(jwks, { AUTH_JWKS_REFRESH_INTERVAL: '1h', AUTH_JWT_CACHE_SIZE: '0' });
    const tokens = [
      await sign(key),
      await sign(key, { claims: { azp: 'other', scope: 'cloud:read' } }),
      await sign(key, { exp: nowSeconds() - 10 }),
      await sign(key, { aud: 'someone-else' }),
      await sign(key, { iss: `${ISSUER}/other` }),
      await sign(rogue),
      await sign(key, { exp: null }),
      unsigned({ iss: ISSUER, aud: AUDIENCE, azp: 'shop', exp: nowSeconds() + 600 }),
    ];
    const answers = async (t: TestGateway) => {
      const out: unknown[] = [];
      for (const token of [...tokens, ...tokens]) {
        const r = await t.graphql('{ projects { id } }', undefined, { key: token });
        out.push({ status: r.status, errors: r.errors?.map((e) => [e.extensions?.code, e.message]) ?? null });
      }
      return out;
    };
    expect(await answers(cached)).toEqual(await answers(uncached));
    const before = await checks(uncached);
    for (let i = 0; i < 4; i += 1)
      expect((await uncached.graphql(TYPENAME, undefined, { key: tokens[0] })).status).toBe(200);
    const after = await checks(uncached);
    expect(after.verified - before.verified).toBe(4);
    expect(after.cached).toBe(0);
  });
});
