// A token's time claims judged on the gateway's clock (a test clock here): exp strictly, nbf and iat with 30 s of skew
// (docs/apps-and-security.md), each refusal naming its claim.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { TestGateway } from '../helpers/gateway.js';
import {
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  testClock,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwt.js';

describe("a JWT's exp, nbf and iat, at and around the clock skew", () => {
  let key: SigningKey;
  let jwks: JwksServer;
  let t: TestGateway;
  // A whole second, so that a claim in seconds meets the clock exactly.
  const clock = testClock(Math.floor(Date.now() / 1000) * 1000);
  const now = () => clock.now() / 1000;

  beforeAll(async () => {
    key = await signingKey('key-1');
    jwks = await startJwksServer([key]);
    t = await startJwtGateway(jwks, { AUTH_JWT_CACHE_SIZE: '0' }, { testing: { clock: clock.now } });
  });
  afterAll(async () => {
    await t.close();
    await jwks.stop();
  });

  const answer = async (token: string) => {
    const res = await t.graphql('{ __typename }', undefined, { key: token });
    return res.status === 200 ? 'accepted' : `${res.errors![0]!.extensions!.code}: ${res.errors![0]!.message}`;
  };

  it('exp is judged strictly: a token is refused at its exp, accepted a second before', async () => {
    expect(await answer(await sign(key, { exp: now() + 1 }))).toBe('accepted');
    expect(await answer(await sign(key, { exp: now() }))).toMatch(/^UNAUTHENTICATED: the JWT has expired \(exp /);
    expect(await answer(await sign(key, { exp: now() - 1 }))).toMatch(/^UNAUTHENTICATED: the JWT has expired \(exp /);
  });

  it('nbf is accepted up to 30 s ahead of the clock, and refused beyond', async () => {
    expect(await answer(await sign(key, { nbf: now() + 30 }))).toBe('accepted');
    expect(await answer(await sign(key, { nbf: now() + 31 }))).toBe('UNAUTHENTICATED: the JWT is not valid yet (nbf)');
  });

  it('iat is accepted up to 30 s ahead of the clock, and a token issued further in the future is refused', async () => {
    expect(await answer(await sign(key, { iat: now() + 30 }))).toBe('accepted');
    expect(await answer(await sign(key, { iat: now() + 31 }))).toBe(
      'UNAUTHENTICATED: the JWT was issued in the future (iat), beyond the 30 s of clock skew allowed',
    );
    expect(await answer(await sign(key, { iat: now() + 3600 }))).toBe(
      'UNAUTHENTICATED: the JWT was issued in the future (iat), beyond the 30 s of clock skew allowed',
    );
  });
});
