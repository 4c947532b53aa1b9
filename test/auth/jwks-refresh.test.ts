// The identity provider's JWKS: cached, fetched again when a key is rotated in (at most once per
// AUTH_JWKS_REFRESH_INTERVAL, on a clock the test moves), and kept while the provider is down.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import {
  AUDIENCE,
  ISSUER,
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  testClock,
  type JwksServer,
} from '../helpers/jwt.js';
import { waitFor } from '../helpers/wait.js';

const TYPENAME = '{ __typename }';
const INTERVAL_MS = 60_000;

const running: Array<{ close(): Promise<void> } | JwksServer> = [];
afterEach(async () => {
  for (const r of running.splice(0).reverse()) await ('stop' in r ? r.stop() : r.close());
});

async function provider(...kids: string[]) {
  const keys = await Promise.all(kids.map((kid) => signingKey(kid)));
  const jwks = await startJwksServer([...keys]);
  running.push(jwks);
  return { keys, jwks };
}

async function gateway(jwks: JwksServer, clock: { now: () => number }): Promise<TestGateway> {
  const t = await startJwtGateway(jwks, { AUTH_JWKS_REFRESH_INTERVAL: '1m' }, { testing: { clock: clock.now } });
  running.push(t);
  return t;
}

describe('the JWKS of the identity provider', () => {
  it('a token with an unknown kid is accepted once the rotated JWKS is fetched again, and a second unknown kid within the interval does not fetch it again', async () => {
    const clock = testClock();
    const { keys, jwks } = await provider('old');
    const t = await gateway(jwks, clock);
    expect((await t.graphql(TYPENAME, undefined, { key: await sign(keys[0]!) })).status).toBe(200);
    expect(jwks.requests).toBe(1);

    // The provider rotates a key in; a token signed by it comes before the interval has passed: no fetch yet.
    const rotated = await signingKey('rotated');
    jwks.keys.push(rotated);
    const refused = await t.graphql(TYPENAME, undefined, { key: await sign(rotated) });
    expect(refused.status).toBe(401);
    expect(refused.errors![0]!.message).toMatch(/no key of the identity provider's JWKS .* matches the JWT's kid/);
    expect(jwks.requests).toBe(1);

    // Once the interval has passed, the unknown kid makes the gateway fetch the JWKS again, once, and is accepted.
    clock.advance(INTERVAL_MS);
    expect((await t.graphql(TYPENAME, undefined, { key: await sign(rotated) })).status).toBe(200);
    expect(jwks.requests).toBe(2);

    // Another kid within the same interval: refused from the cache, the provider is not asked again.
    const third = await signingKey('third');
    jwks.keys.push(third);
    for (let i = 0; i < 5; i += 1)
      expect((await t.graphql(TYPENAME, undefined, { key: await sign(third) })).status).toBe(401);
    expect(jwks.requests).toBe(2);
    clock.advance(INTERVAL_MS);
    expect((await t.graphql(TYPENAME, undefined, { key: await sign(third) })).status).toBe(200);
    expect(jwks.requests).toBe(3);
  });

  it('a key removed from the JWKS stops working once the JWKS is fetched again', async () => {
    const clock = testClock();
    const { keys, jwks } = await provider('retired', 'current');
    const t = await gateway(jwks, clock);
    const token = await sign(keys[0]!);
    expect((await t.graphql(TYPENAME, undefined, { key: token })).status).toBe(200);
    jwks.keys.splice(0, 1);
    clock.advance(INTERVAL_MS);
    // The first request after the interval is answered from the cache while the JWKS is fetched in the background.
    await t.graphql(TYPENAME, undefined, { key: await sign(keys[1]!) });
    await waitFor(() => jwks.requests === 2, 20_000, 'the JWKS fetched again');
    await waitFor(
      async () => (await t.graphql(TYPENAME, undefined, { key: token })).status === 401,
      20_000,
      'the retired key refused',
    );
  });

  it('while the JWKS URL is down, tokens signed by keys already fetched keep working', async () => {
    const clock = testClock();
    const { keys, jwks } = await provider('cached');
    const t = await gateway(jwks, clock);
    expect((await t.graphql(TYPENAME, undefined, { key: await sign(keys[0]!) })).status).toBe(200);
    jwks.down();
    clock.advance(INTERVAL_MS * 3);
    const token = await sign(keys[0]!);
    expect((await t.graphql(TYPENAME, undefined, { key: token })).status).toBe(200);
    await waitFor(() => jwks.requests === 2, 20_000, 'a fetch attempt');
    await waitFor(() => t.logs().includes("the identity provider's JWKS could not be fetched"), 20_000, 'the warning');
    expect((await t.graphql(TYPENAME, undefined, { key: token })).status).toBe(200);
  });

  it('with the JWKS URL down and no key fetched, a token gets 503 UPSTREAM_UNAVAILABLE naming the JWKS, not "invalid token"', async () => {
    const clock = testClock();
    const { keys, jwks } = await provider('never-fetched');
    jwks.down();
    const t = await gateway(jwks, clock);
    const res = await t.graphql(TYPENAME, undefined, { key: await sign(keys[0]!) });
    expect(res.status).toBe(503);
    expect(res.errors![0]!.extensions!.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(res.errors![0]!.message).toContain(`the identity provider's keys (${jwks.url}) could not be fetched`);
    expect(res.errors![0]!.message).toContain('answered 503');
  });

  it('a token with a kid the cache lacks while the JWKS URL is down gets 503 UPSTREAM_UNAVAILABLE, not "invalid token"', async () => {
    const clock = testClock();
    const { keys, jwks } = await provider('known');
    const t = await gateway(jwks, clock);
    expect((await t.graphql(TYPENAME, undefined, { key: await sign(keys[0]!) })).status).toBe(200);
    jwks.down();
    clock.advance(INTERVAL_MS);
    const res = await t.graphql(TYPENAME, undefined, { key: await sign(await signingKey('unknown')) });
    expect(res.status).toBe(503);
    expect(res.errors![0]!.extensions!.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(res.errors![0]!.message).toMatch(
      /no key fetched so far matches the JWT's kid, and the identity provider's keys .* could not be fetched again/,
    );
  });

  it('a JWKS file (AUTH_JWKS_FILE) verifies tokens with its keys; a kid it lacks is refused as unknown, not as unavailable', async () => {
    const [known, other] = await Promise.all([signingKey('in-file'), signingKey('not-in-file')]);
    const file = path.join(tempDataDir('jwks-file-'), 'jwks.json');
    fs.writeFileSync(file, JSON.stringify({ keys: [known.publicJwk] }));
    const t = await startTestGateway({
      AUTH_JWKS_FILE: file,
      AUTH_ISSUER: ISSUER,
      AUTH_AUDIENCE: AUDIENCE,
      AUTH_APPS: '*',
    });
    running.push(t);
    expect((await t.graphql(TYPENAME, undefined, { key: await sign(known) })).status).toBe(200);
    const refused = await t.graphql(TYPENAME, undefined, { key: await sign(other) });
    expect(refused.status).toBe(401);
    expect(refused.errors![0]!.message).toMatch(/no key of the identity provider's JWKS .* matches the JWT's kid/);
  });
});
